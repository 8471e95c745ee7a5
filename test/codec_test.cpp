#include <taskgroup/codec.hpp>

#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"
#include "support/values.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

template <class T>
T round_trip(const T& value, const codec_registry& reg = codec_registry::global()) {
  blob b;
  b.set(value);
  auto out = reg.round_trip(b);
  REQUIRE(out);
  return out.value().as<T>();
}

struct opaque {};

}  // namespace

TEST_CASE("built-in codecs round-trip every built-in type", "[codec]") {
  CHECK(round_trip<std::int64_t>(std::numeric_limits<std::int64_t>::min()) == std::numeric_limits<std::int64_t>::min());
  CHECK(round_trip<std::int64_t>(-1) == -1);
  CHECK(round_trip<double>(-0.125) == -0.125);
  CHECK(round_trip<bool>(true));
  CHECK_FALSE(round_trip<bool>(false));
  CHECK(round_trip<std::string>(std::string("a\0b", 3)) == std::string("a\0b", 3));
  CHECK(round_trip<std::string>("").empty());
  CHECK(round_trip(std::vector<std::int64_t>{1, -2, 3}) == std::vector<std::int64_t>{1, -2, 3});
  CHECK(round_trip(std::vector<double>{0.5, 1e300}) == std::vector<double>{0.5, 1e300});
  CHECK(round_trip(std::vector<bool>{true, false}) == std::vector<bool>{true, false});
  CHECK(round_trip(std::vector<std::string>{"x", "", "zz"}) == std::vector<std::string>{"x", "", "zz"});
  CHECK(round_trip(std::vector<std::int64_t>{}).empty());
  auto tags = codec_registry::global().tags();
  CHECK(tags == std::vector<std::string>{"bool", "double", "int64", "string", "vector<bool>", "vector<double>",
                                         "vector<int64>", "vector<string>"});
}

TEST_CASE("user types get codecs; duplicates are refused", "[codec]") {
  codec_registry reg;
  REQUIRE(add_point(reg));
  auto p = round_trip(point{1.5, -2}, reg);
  CHECK(p.x == 1.5);
  CHECK(p.y == -2);
  auto again = add_point(reg);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::bad_argument);
  CHECK_THAT(again.error().message, Catch::Contains("already has codec \"point\""));
  auto tag_taken = reg.add<opaque>(
      "int64", [](const opaque&, byte_writer&) {}, [](byte_reader&) -> result<opaque> { return opaque{}; });
  REQUIRE_FALSE(tag_taken);
  CHECK_THAT(tag_taken.error().message, Catch::Contains("codec tag \"int64\" is taken"));
  auto empty_tag = reg.add(blob_codec{});
  REQUIRE_FALSE(empty_tag);
  CHECK(empty_tag.error().code == errc::bad_argument);
}

TEST_CASE("encoding a type without a codec, or an empty blob, is a clear error", "[codec]") {
  std::string bytes;
  byte_writer w(bytes);
  blob b;
  b.set(opaque{});
  auto st = codec_registry::global().encode(b, w);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::not_serializable);
  CHECK_THAT(st.error().message, Catch::Contains("no codec for type") && Catch::Contains("opaque"));
  auto empty = codec_registry::global().encode(blob(), w);
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.error().message, Catch::Contains("empty blob"));
}

TEST_CASE("decoding truncated, corrupt or unknown bytes fails without reading past the end", "[codec]") {
  std::string bytes;
  byte_writer w(bytes);
  blob b;
  b.set(std::vector<std::int64_t>{1, 2, 3});
  REQUIRE(codec_registry::global().encode(b, w));
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    byte_reader r(std::string_view(bytes).substr(0, cut));
    auto out = codec_registry::global().decode(r);
    REQUIRE_FALSE(out);
    CHECK(out.error().code == errc::not_serializable);
  }
  // A length far larger than the bytes left is refused before allocating.
  std::string huge;
  byte_writer hw(huge);
  hw.string("vector<double>");
  hw.u64(std::uint64_t{1} << 60);
  byte_reader hr(huge);
  auto out = codec_registry::global().decode(hr);
  REQUIRE_FALSE(out);
  CHECK_THAT(out.error().message, Catch::Contains("exceeds the 0 bytes left"));
  // An unknown tag.
  std::string unknown;
  byte_writer uw(unknown);
  uw.string("mystery");
  byte_reader ur(unknown);
  auto u = codec_registry::global().decode(ur);
  REQUIRE_FALSE(u);
  CHECK_THAT(u.error().message, Catch::Contains("no codec tagged \"mystery\""));
  // A bool byte other than 0 or 1.
  std::string bad_bool;
  byte_writer bw(bad_bool);
  bw.string("bool");
  bw.u8(7);
  byte_reader br(bad_bool);
  auto bb = codec_registry::global().decode(br);
  REQUIRE_FALSE(bb);
  CHECK_THAT(bb.error().message, Catch::Contains("bad bool byte 7"));
}

TEST_CASE("strict codecs: a typed output without a codec fails the run at its start", "[codec][session]") {
  int ran = 0;
  task_group g;
  net n("count");
  n.lambda("Count", {}, {}, [&ran](op_context&) -> status {
    ++ran;
    return ok();
  });
  task t("t", step("t").add_net(n));
  (void)t.output<point>("p");
  REQUIRE(g.add(t, node("n1")));
  local_session session(1);
  run_options o;
  o.strict_codecs = &codec_registry::global();
  auto r = test::run_sync(session, g, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::Contains("task \"n1/t\" output \"p\": no codec for type"));
  CHECK(ran == 0);
  // Without strict codecs the same group runs.
  CHECK(test::run_sync(session, g));
  CHECK(ran == 1);
}

TEST_CASE("strict codecs: outputs come back decoded; a value without a codec fails its task", "[codec][session]") {
  codec_registry reg;
  REQUIRE(add_point(reg));
  task_group g;
  task good("good", step("good").add_net(put("p", "p", point{3, 4})));
  auto p = good.output<point>("p");
  REQUIRE(g.add(good, node("n1")));
  task bad("bad", step("bad").add_net(put("o", "o", opaque{})));
  bad.declare_output({"o"});
  REQUIRE(g.add(bad, node("n2")));
  local_session session(1);
  run_options o;
  o.strict_codecs = &reg;

  SECTION("join: the run fails with the task's error") {
    auto r = test::run_sync(session, g, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::not_serializable);
    CHECK_THAT(r.error().message, Catch::StartsWith("task \"n2/bad\" (node \"n2\"): output \"o\": no codec for type"));
  }
  SECTION("gather: the task fails, the other's outputs are the decoded copies") {
    o.policy = run_policy::gather;
    auto r = test::run_sync(session, g, o);
    REQUIRE(r);
    const auto& rep = r.value();
    CHECK(rep.tasks[0].status == task_status::succeeded);
    CHECK(rep.tasks[1].status == task_status::failed);
    CHECK(rep.tasks[1].outputs.empty());
    REQUIRE(p.get());
    CHECK(p.get().value().x == 3);
    CHECK(p.get().value().y == 4);
    // The value handed out is the decoded copy, shared by the report and
    // the handle; the blob itself went with the run's workspace.
    CHECK(p.get(rep).value().x == 3);
    CHECK_FALSE(session.node_workspace("n1")->has("p"));
  }
}

TEST_CASE("run_options::only_nodes runs the named nodes; the other tasks are not run", "[session]") {
  task_group g(workspace_type::global);
  task a("a", step("a").add_net(fill_int("a", "x", 1)));
  auto ax = a.output<std::int64_t>("x");
  task b("b", step("b").add_net(fill_int("b", "x", 2)));
  auto bx = b.output<std::int64_t>("x");
  REQUIRE(g.add(a, node("n1")));
  REQUIRE(g.add(b, node("n2")));
  local_session session(1);
  run_options o;
  o.only_nodes = std::vector<std::string>{"n2"};
  auto r = test::run_sync(session, g, o);
  REQUIRE(r);
  CHECK(r.value().tasks[0].status == task_status::not_run);
  CHECK(r.value().tasks[1].status == task_status::succeeded);
  CHECK_FALSE(r.value().ok());
  CHECK(bx.get().value() == 2);
  CHECK(ax.get().error().code == errc::output_not_set);
  CHECK(session.nodes() == std::vector<std::string>{"n2"});  // n1 was never made

  o.only_nodes = std::vector<std::string>{};
  auto none = test::run_sync(session, g, o);
  REQUIRE(none);
  CHECK(none.value().tasks[1].status == task_status::not_run);

  o.only_nodes = std::vector<std::string>{"n9"};
  auto bad = test::run_sync(session, g, o);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == errc::invalid_task);
  CHECK_THAT(bad.error().message, Catch::Contains("only_nodes names node \"n9\", which has no task"));
}

TEST_CASE("strings and numeric vectors have a contiguous form", "[codec]") {
  auto c = codec_registry::global().find(typeid(std::vector<double>));
  REQUIRE(c);
  REQUIRE(c->contiguous);
  REQUIRE(c->adopt);
  blob b;
  b.set(std::vector<double>{1.5, -2});
  const std::string_view bytes = c->contiguous(b);
  CHECK(bytes.size() == 2 * sizeof(double));
  blob copy;
  char* where = c->adopt(copy, bytes.size());
  REQUIRE(where != nullptr);
  std::memcpy(where, bytes.data(), bytes.size());
  CHECK(copy.as<std::vector<double>>() == std::vector<double>{1.5, -2});
  CHECK(c->adopt(copy, 7) == nullptr);                                    // not a whole number of doubles
  CHECK(copy.as<std::vector<double>>() == std::vector<double>{1.5, -2});  // left alone
  // A value of the codec's type is reused: same storage when it fits.
  const double* storage = copy.as<std::vector<double>>().data();
  char* again = c->adopt(copy, sizeof(double));
  CHECK(again == reinterpret_cast<const char*>(storage));  // NOLINT: bytes of numbers
  CHECK(copy.as<std::vector<double>>().size() == 1);
  // A value of another type is replaced.
  blob other(std::string("text"));
  REQUIRE(c->adopt(other, 3 * sizeof(double)) != nullptr);
  CHECK(other.as<std::vector<double>>().size() == 3);
  auto s = codec_registry::global().find(typeid(std::string));
  REQUIRE(s);
  CHECK(s->contiguous);
  blob text(std::string("short"));
  char* at = s->adopt(text, 1000);  // grows past the old capacity
  REQUIRE(at != nullptr);
  CHECK(text.as<std::string>().size() == 1000);
  auto vb = codec_registry::global().find(typeid(std::vector<bool>));
  REQUIRE(vb);
  CHECK_FALSE(vb->contiguous);  // bits, not bytes
}
