#include <taskgroup/blob.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <string>
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
