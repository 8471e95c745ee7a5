#include <taskgroup/blob.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

using namespace taskgroup;

TEST_CASE("a new blob is empty", "[blob]") {
  blob b;
  CHECK_FALSE(b.has_value());
  CHECK(b.type() == typeid(void));
  CHECK(b.type_name() == "empty");
  CHECK(b.try_get<std::int64_t>() == nullptr);
  auto r = b.get<std::int64_t>();
  REQUIRE(r.has_error());
  CHECK(r.error().code == errc::blob_empty);
}

TEST_CASE("a blob holds a value and gives it back typed", "[blob]") {
  blob b(std::int64_t{42});
  CHECK(b.has_value());
  CHECK(b.holds<std::int64_t>());
  CHECK(b.type_name() == "int64");
  CHECK(*b.get<std::int64_t>().value() == 42);
  CHECK(b.as<std::int64_t>() == 42);
}

TEST_CASE("typed access to the wrong type names expected and actual types", "[blob]") {
  blob b(std::string("hi"));
  auto r = b.get<double>();
  REQUIRE(r.has_error());
  CHECK(r.error().code == errc::type_mismatch);
  CHECK(r.error().message == "expected double, got string");
  CHECK_THROWS_WITH(b.as<std::vector<std::int64_t>>(), "expected vector<int64>, got string");
}

TEST_CASE("setting a value of the held type assigns in place", "[blob]") {
  blob b;
  std::int64_t& first = b.set(std::int64_t{1});
  std::int64_t& second = b.set(std::int64_t{2});
  CHECK(&first == &second);
  CHECK(second == 2);
  b.set(std::string("now a string"));
  CHECK(b.type_name() == "string");
}

namespace {
struct move_only {
  explicit move_only(int v) : value(std::make_unique<int>(v)) {}
  std::unique_ptr<int> value;
};
}  // namespace

TEST_CASE("a blob holds a move-only value and moves with it", "[blob]") {
  blob a(move_only(7));
  CHECK(*a.as<move_only>().value == 7);
  blob b(std::move(a));
  CHECK_FALSE(a.has_value());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  CHECK(*b.as<move_only>().value == 7);
  auto copy = b.clone();
  REQUIRE(copy.has_error());
  CHECK(copy.error().code == errc::type_mismatch);
  CHECK_THAT(copy.error().message, Catch::Contains("cannot be copied"));
}

TEST_CASE("a copyable blob clones into an independent value", "[blob]") {
  blob a(std::vector<double>{1.5, 2.5});
  blob b = a.clone().value();
  b.as<std::vector<double>>().push_back(3.5);
  CHECK(a.as<std::vector<double>>().size() == 2);
  CHECK(b.as<std::vector<double>>().size() == 3);
  CHECK(b.type_name() == "vector<double>");
}

TEST_CASE("reset empties a blob and destroys its value", "[blob]") {
  auto counter = std::make_shared<int>(0);
  blob b(counter);
  CHECK(counter.use_count() == 2);
  b.reset();
  CHECK(counter.use_count() == 1);
  CHECK_FALSE(b.has_value());
}

TEST_CASE("type names cover built-in types and demangle the rest", "[blob]") {
  CHECK(type_name<bool>() == "bool");
  CHECK(type_name<std::vector<std::string>>() == "vector<string>");
  CHECK_THAT(type_name<move_only>(), Catch::Contains("move_only"));
}

// --- generated: a blob against a model of what it holds --------------------

namespace {

struct small_pair {  // a small trivially copyable struct
  std::int32_t a = 0;
  std::int16_t b = 0;
  bool operator==(const small_pair&) const = default;
};

// What a blob should hold: nothing, or one value of these types (inline
// ones first, then heap ones; the shared_ptr counts live copies).
using held_value = std::variant<std::monostate, std::int64_t, double, bool, small_pair, std::string,
                                std::vector<std::int64_t>, std::shared_ptr<int>>;

held_value random_value(std::mt19937_64& rng, const std::shared_ptr<int>& token) {
  switch (rng() % 7) {
    case 0: return static_cast<std::int64_t>(rng());
    case 1: return static_cast<double>(rng() % 1000) / 8.0;
    case 2: return rng() % 2 == 0;
    case 3: return small_pair{static_cast<std::int32_t>(rng()), static_cast<std::int16_t>(rng())};
    case 4: return std::string(rng() % 40, 'x');  // long ones leave the string's own buffer
    case 5: return std::vector<std::int64_t>(rng() % 5, 3);
    default: return token;
  }
}

void put(blob& b, const held_value& v, bool by_emplace) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          b.reset();
        } else if (by_emplace) {
          b.emplace<T>(x);
        } else {
          b.set(x);
        }
      },
      v);
}

// Empty when `b` matches `want`, else what differs.
std::string differs(const blob& b, const held_value& want) {
  if (b.has_value() != (want.index() != 0)) return "has_value is " + std::to_string(b.has_value());
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return b.type() == typeid(void) ? "" : "an empty blob names a type";
        } else {
          const T* p = b.try_get<T>();
          if (p == nullptr || b.exact<T>() != p) return "holds " + b.type_name() + ", not " + type_name<T>();
          if (!(*p == x)) return "wrong " + type_name<T>() + " value";
          if (b.copyable() != true) return "a copyable value is not copyable";
          if (b.try_get<std::int64_t>() != nullptr && !std::is_same_v<T, std::int64_t>) return "also an int64";
          return "";
        }
      },
      want);
}

}  // namespace

TEST_CASE("blobs behave as their model under generated sets, moves, clones and resets", "[blob]") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto token = std::make_shared<int>(5);
    {
      std::array<blob, 4> blobs;
      std::array<held_value, 4> model;
      for (int step = 0; step < 60; ++step) {
        const std::size_t i = rng() % blobs.size();
        const std::size_t j = rng() % blobs.size();
        std::string what;
        switch (rng() % 7) {
          case 0:
          case 1: {
            held_value v = random_value(rng, token);
            const bool same_type = v.index() == model[i].index();
            const bool by_emplace = rng() % 2 == 0;
            // `set` of the type held assigns in place: the value keeps its address.
            std::visit(
                [&](const auto& x) {
                  using T = std::decay_t<decltype(x)>;
                  if constexpr (!std::is_same_v<T, std::monostate>) {
                    const T* old = blobs[i].try_get<T>();
                    put(blobs[i], v, by_emplace);
                    if (same_type && !by_emplace && old != blobs[i].try_get<T>()) what = "set moved the value";
                  }
                },
                v);
            model[i] = std::move(v);
            break;
          }
          case 2:
            if (i != j) {
              blobs[i] = std::move(blobs[j]);
              model[i] = std::exchange(model[j], std::monostate{});
            }
            break;
          case 3: {
            blob moved(std::move(blobs[i]));
            if (!blobs[i].has_value()) blobs[i] = std::move(moved);  // back, through a new blob
            break;
          }
          case 4: {
            auto copy = blobs[j].clone();
            REQUIRE(copy.has_value());
            blobs[i] = std::move(copy).value();
            model[i] = model[j];
            break;
          }
          case 5:
            blobs[i].reset();
            model[i] = std::monostate{};
            break;
          default:
            std::swap(blobs[i], blobs[j]);
            std::swap(model[i], model[j]);
            break;
        }
        for (std::size_t k = 0; k < blobs.size(); ++k) {
          if (what.empty()) what = differs(blobs[k], model[k]);
          if (!what.empty()) what = "step " + std::to_string(step) + ", blob " + std::to_string(k) + ": " + what;
          if (!what.empty()) break;
        }
        if (!what.empty()) FAIL(what);
        // Each copy of the token in the model has its twin in a blob: none
        // leaked, none lost.
        long held = 1;
        for (const held_value& v : model) held += std::holds_alternative<std::shared_ptr<int>>(v) ? 2 : 0;
        if (token.use_count() != held)
          FAIL("step " << step << ": " << token.use_count() << " tokens live, model " << held);
      }
    }
    CHECK(token.use_count() == 1);
  }
}
