// W3C trace context (trace_context): generated traceparent values round
// trip; generated corruptions of each field are refused naming what and
// where; fresh contexts are valid and distinct. A run's trace: fresh or
// given (run_options::trace_parent), in its report, seen by its ops,
// refused when malformed, kept by a shed run. A run's trace file
// (trace_recorder): its ids and parents.
#include <taskgroup/net.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/trace_context.hpp>
#include <taskgroup/trace_recorder.hpp>

#include "support/checks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

using namespace taskgroup;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

std::string tc_hex(std::mt19937_64& rng, std::size_t digits) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < digits; ++i) out += hex[rng() % 16];
  return out;
}

}  // namespace

TEST_CASE("trace_context: generated traceparent values round trip", "[trace]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 2000; ++k) {
    std::string trace = tc_hex(rng, 32);
    std::string parent = tc_hex(rng, 16);
    if (trace == std::string(32, '0')) trace[0] = '1';
    if (parent == std::string(16, '0')) parent[0] = '1';
    const std::string text = "00-" + trace + "-" + parent + "-" + tc_hex(rng, 2);
    INFO(text);
    auto c = trace_context::parse(text);
    REQUIRE(c);
    CHECK(c.value().traceparent() == text);
    CHECK(c.value().trace_id_hex() == trace);
    // A later version: the same fields, and what follows a '-' is ignored.
    auto later = trace_context::parse("01" + text.substr(2) + "-whatever");
    REQUIRE(later);
    CHECK(later.value() == c.value());
  }
}

TEST_CASE("trace_context: malformed traceparent values are refused naming what is wrong", "[trace]") {
  const std::string good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  REQUIRE(trace_context::parse(good));
  struct bad_case {
    std::string text;
    std::string says;
  };
  const std::vector<bad_case> cases = {
      {"", "must be 55 characters"},
      {good.substr(0, 54), "must be 55 characters (00-<32 hex>-<16 hex>-<2 hex>), got 54"},
      {good + "0", "must be 55 characters"},
      {"ff" + good.substr(2), "has version ff"},
      {"0g" + good.substr(2), "not lowercase hex in its version at offset 1"},
      {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "not lowercase hex in its trace id at offset 4"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bZ-01", "not lowercase hex in its parent id at offset 51"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x", "not lowercase hex in its flags at offset 54"},
      {"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "all-zero trace id"},
      {"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "all-zero parent id"},
      {"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "must have a '-' at offset 2"},
      {"01" + good.substr(2) + "x", "must be 55 characters"},
  };
  for (const auto& c : cases) {
    INFO("\"" << c.text << "\"");
    auto r = trace_context::parse(c.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_task);
    CHECK_THAT(r.error().message, Catch::StartsWith("trace_parent ") && Catch::Contains(c.says));
  }
  // Every single-character corruption of a good value is refused or reads
  // as another valid context (a hex digit for a hex digit).
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 5000; ++k) {
    std::string t = good;
    const std::size_t at = rng() % t.size();
    t[at] = static_cast<char>(rng() % 256);
    INFO("offset " << at << ": \"" << t << "\"");
    auto r = trace_context::parse(t);
    const bool hex = (t[at] >= '0' && t[at] <= '9') || (t[at] >= 'a' && t[at] <= 'f');
    const bool dash = at == 2 || at == 35 || at == 52;
    if (!hex || dash) {
      CHECK((t == good || !r));
    } else if (r) {
      // A later version reads as version 00's fields.
      CHECK(r.value().traceparent() == "00" + t.substr(2));
    }
  }
}

TEST_CASE("trace_context: fresh contexts are valid and distinct", "[trace]") {
  std::set<std::string> seen;
  for (int k = 0; k < 1000; ++k) {
    const trace_context c = trace_context::fresh();
    auto again = trace_context::parse(c.traceparent());
    REQUIRE(again);
    CHECK(again.value() == c);
    CHECK(seen.insert(c.trace_id_hex()).second);
  }
}

namespace {

// A one-task group whose op writes what it sees of its run's trace: the
// traceparent it would forward, and the group's name.
struct tc_seen {
  task_group group;
  task_output<std::string> traceparent;
  task_output<std::string> group_name;
};

tc_seen tc_group(const std::string& name) {
  net n("see");
  n.lambda("SeeTrace", {}, {"tp", "name"}, [](op_context& ctx) -> status {
    ctx.set_output(0, ctx.run().trace().traceparent());
    ctx.set_output(1, std::string(ctx.run().group_name()));
    return ok();
  });
  task t("t", step("s").add_net(n));
  tc_seen out{task_group(), t.output<std::string>("tp"), t.output<std::string>("name")};
  out.group.name(name);
  REQUIRE(out.group.add(t));
  return out;
}

bool tc_lower_hex(const std::string& s, std::size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

TEST_CASE("a run has a trace id: fresh, or the one its trace_parent gives; its ops see it", "[trace]") {
  local_session session(2);
  tc_seen g = tc_group("checkout");
  std::set<std::string> ids;
  for (int k = 0; k < 20; ++k) {
    const run_report r = session.run(g.group);
    REQUIRE(r.ok());
    CHECK(tc_lower_hex(r.trace_id, 32));
    CHECK(r.trace_id == r.trace.trace_id_hex());
    CHECK(r.trace.flags == 0);
    CHECK(ids.insert(r.trace_id).second);
    // The op forwards the run's own span as the parent.
    CHECK(g.traceparent.get(r).value() == r.trace.traceparent());
    CHECK(g.group_name.get(r).value() == "checkout");
  }
  const std::string given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const run_report r = session.run(g.group, {.trace_parent = given});
  REQUIRE(r.ok());
  CHECK(r.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736");
  CHECK(r.trace.flags == 1);
  CHECK(r.trace.parent_id_hex() != "00f067aa0ba902b7");  // the run's own span, a child of the given one
  CHECK(tc_lower_hex(r.trace.parent_id_hex(), 16));
  const std::string forwarded = g.traceparent.get(r).value();
  CHECK(forwarded.substr(0, 36) == "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  CHECK(forwarded == r.trace.traceparent());
}

TEST_CASE("a node's own work (local init and exit) sees its run as the tasks do", "[trace]") {
  local_session session(2);
  tc_seen g = tc_group("checkout");
  // The node's init and exit run on its strand, one after the other.
  std::vector<std::string> seen;
  auto see = [&seen](const std::string& name) {
    net n(name);
    n.lambda("SeeRun", {}, {}, [&seen](op_context& ctx) -> status {
      seen.push_back(ctx.run().trace().traceparent() + " " + std::string(ctx.run().group_name()) + " " +
                     (ctx.run().id() != 0 ? "in a run" : "outside"));
      return ok();
    });
    return n;
  };
  g.group.local_init(node("local"), see("init")).local_exit(node("local"), see("exit"));
  const run_report r = session.run(g.group);
  REQUIRE(r.ok());
  const std::string want = r.trace.traceparent() + " checkout in a run";
  CHECK(seen == std::vector<std::string>{want, want});
}

TEST_CASE("a malformed trace_parent fails the run at its start, naming it; no task runs", "[trace]") {
  local_session session(1);
  tc_seen g = tc_group("");
  boost::system::error_code ec;
  const run_report r =
      session.run(g.group, {.trace_parent = "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, ec);
  CHECK(ec == errc::invalid_task);
  REQUIRE(r.failure);
  CHECK(r.failure->message == "run_options::trace_parent has an all-zero trace id, which is invalid");
  REQUIRE(r.tasks.size() == 1);
  CHECK(r.tasks[0].status == task_status::not_run);
  CHECK(tc_lower_hex(r.trace_id, 32));  // a fresh one: the log line still leads somewhere
  CHECK_FALSE(g.group_name.get(r).has_value());
}

TEST_CASE("a shed run reports the trace id it was given", "[trace]") {
  session_limits limits;
  limits.max_runs_in_flight = 1;
  limits.max_queued = 0;
  local_session session(1, limits);
  task_group hold;
  net wait("wait");
  wait.op("Sleep", {}, {}, {{"ms", std::int64_t{3'600'000}}});
  REQUIRE(hold.add(task("t", step("s").add_net(wait))));
  asio::cancellation_signal cancel;
  std::promise<void> held;
  session.async_run(hold, {}, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report) {
                      held.set_value();
                    }));
  for (int i = 0; i < 6000 && session.load().in_flight == 0; ++i) std::this_thread::sleep_for(1ms);
  boost::system::error_code ec;
  const run_report shed =
      session.run(hold, {.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, ec);
  CHECK(ec == errc::overloaded);
  CHECK(shed.trace_id == "0af7651916cd43dd8448eb211c80319c");
  cancel.emit(asio::cancellation_type::terminal);
  REQUIRE(held.get_future().wait_for(60s) == std::future_status::ready);
}

TEST_CASE("trace_parent_text holds a value inline; a longer one is refused by its length", "[trace]") {
  const std::string good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const trace_parent_text t(good);
  CHECK(t.view() == good);
  CHECK(t.parse());
  CHECK(trace_parent_text().empty());
  const trace_parent_text longer("01" + good.substr(2) + "-" + std::string(200, 'a'));
  CHECK(longer.size() == 256);
  auto r = longer.parse();
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "trace_parent is 256 bytes, longer than the 128 read");
  // A braced run_options in a co_await expression (g++ 12 copies such a
  // temporary into the frame bit by bit): its trace_parent survives.
  asio::io_context io;
  local_session session(io.get_executor());
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(net("n")))));
  std::string seen;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, report] = co_await session.async_run(g, {.timeout = 10s, .priority = 1, .trace_parent = good},
                                                       asio::as_tuple(asio::use_awaitable));
        seen = report.trace_id;
      },
      asio::detached);
  io.run();
  CHECK(seen == "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST_CASE("trace_recorder: a run's trace file names its trace, and every span its parent", "[trace]") {
  // Two nodes: a loop of three iterations with a report step on "a", a task
  // retried once on "b".
  net add("add");
  add.op("ConstantFill", {}, {"one"}, {{"value", std::int64_t{1}}});
  net rep("rep");
  rep.op("ConstantFill", {}, {"seen"}, {{"value", std::int64_t{1}}});
  task loop("loop", step("outer").add_substep(step("inner").add_net(add).iterations(3)));
  loop.report(step("r").add_net(rep), std::chrono::hours(1));
  net flaky("flaky");
  flaky.op("FailTimes", {}, {}, {{"times", std::int64_t{1}}});
  retry_policy p;
  p.max_attempts = 2;
  p.initial_backoff = 1ms;
  task_group g;
  REQUIRE(g.add(loop, node("a")));
  REQUIRE(g.add(task("flaky", step("s").add_net(flaky)).retry(p), node("b")));

  local_session session(2);
  trace_recorder recorder;
  run_options o;
  o.observer = &recorder;
  o.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  boost::system::error_code ec;
  const run_report r = session.run(g, o, ec);
  REQUIRE_FALSE(ec);

  const boost::json::value file = boost::json::parse(recorder.to_json(r.trace));
  const boost::json::object& other = file.at("otherData").as_object();
  CHECK(other.at("trace_id").as_string() == "0af7651916cd43dd8448eb211c80319c");
  const std::string run_span(other.at("run_span_id").as_string());
  CHECK(run_span == r.trace.parent_id_hex());
  CHECK(run_span != "b7ad6b7169203331");
  std::map<std::string, std::string> task_span;  // task -> its span id
  std::multiset<std::string> categories;
  std::set<std::string> ids{run_span};
  const boost::json::array& events = file.at("traceEvents").as_array();
  for (const auto& e : events) {
    if (e.at("ph").as_string() != "X") continue;
    const boost::json::object& args = e.at("args").as_object();
    const std::string id(args.at("span_id").as_string());
    CHECK(id.size() == 16);
    CHECK(ids.insert(id).second);  // each its own
    categories.insert(std::string(e.at("cat").as_string()));
    if (e.at("cat").as_string() == "task") task_span[std::string(e.at("name").as_string())] = id;
  }
  CHECK(task_span.size() == 2);
  CHECK(categories.count("step") >= 4);  // outer, inner, and s for each of its two attempts
  CHECK(categories.count("net") >= 5);   // add three times, flaky twice
  CHECK(categories.count("report") >= 1);
  CHECK(categories.count("retry") == 1);
  for (const auto& e : events) {
    if (e.at("ph").as_string() != "X") continue;
    const boost::json::object& args = e.at("args").as_object();
    const std::string parent(args.at("parent_span_id").as_string());
    if (e.at("cat").as_string() == "task" || !args.contains("task")) {
      CHECK(parent == run_span);
    } else {
      CHECK(parent == task_span.at(std::string(args.at("task").as_string())));
    }
  }
}
