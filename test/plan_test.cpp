#include <taskgroup/plan.hpp>

#include "model/step_access.hpp"
#include "plan/internal.hpp"

#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/session.hpp>

#include "fuzz/plan_round_trip.hpp"
#include "model/generate.hpp"
#include "support/steps.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
namespace json = boost::json;

namespace {

// A group that uses every feature the format holds.
task_group rich_group() {
  task_group g(workspace_type::global);
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", std::int64_t{5}}})
      .op("ConstantFill", {}, {"y"}, {{"value", std::int64_t{0}}})
      .op("ConstantFill", {}, {"zero"}, {{"value", std::int64_t{0}}})
      .op("ConstantFill", {}, {"one"}, {{"value", std::int64_t{1}}})
      .op("ConstantFill", {}, {"ratio"}, {{"value", 2.0}})
      .op("ConstantFill", {}, {"empty"}, {{"value", std::vector<std::int64_t>{}}})
      .op("ConstantFill", {}, {"names"}, {{"value", std::vector<std::string>{"a", "b"}}});
  task t("counter");
  t.node(node("n1", {{"cores", std::int64_t{2}}}));
  t.init(init);
  t.step(do_("main", {loop("countdown", {stop_if(binary("is_zero", "EQ", "x", "zero", "x_is_zero")),
                                         binary("dec", "Sub", "x", "one", "x"), binary("inc", "Add", "y", "one", "y")}),
                      if_("check", binary("gt", "GT", "y", "zero", "positive"), fill_int("mark", "marked", 1),
                          body(fill_int("unmark", "marked", 0)))}));
  t.report(step("progress").add_net(incr("tick", "ticks")), std::chrono::milliseconds(250));
  (void)t.output<std::int64_t>("y");
  (void)t.output<std::int64_t>(std::vector<std::string>{"y", "marked"});
  REQUIRE(g.add(t));
  task par("parallel");
  par.num_instances(3).step(step("work").add_net(fill_int("w", "w", 1)).iterations(2).timeout(std::chrono::seconds(5)));
  par.instance_init(fill_int("ii", "local", 1));
  REQUIRE(g.add(par, node("n2")));
  g.report_step(step("watch").add_net(fill_int("watch", "watched", 1)), node("n1"), std::chrono::milliseconds(100));
  g.local_init(node("n2"), fill_int("n2_init", "n2_ready", 1));
  g.local_exit(node("n2"), fill_int("n2_exit", "n2_done", 1));
  return g;
}

std::string outputs_of(const run_report& r) {
  std::string out;
  for (const auto& t : r.tasks) {
    for (const auto& [name, value] : t.outputs) out += t.name + "." + name + "=" + to_display_string(*value) + ";";
  }
  return out;
}

// A "retry" object drawn from `rng`: each member present or not, with
// values across their ranges and forms (integer and double multipliers,
// the limits themselves, any retryable codes in any order); `expected` is
// the policy it reads as, written whole (null: the default, not written).
struct drawn_retry {
  json::object given;
  json::value expected;
};

drawn_retry draw_retry(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  auto any_of = [&](std::initializer_list<std::int64_t> v) { return *(v.begin() + pick(v.size())); };
  const std::int64_t max_ms = std::chrono::duration_cast<std::chrono::milliseconds>(max_duration).count();
  drawn_retry d;
  json::object full{{"max_attempts", 1}, {"initial_backoff_ms", 10},
                    {"multiplier", 2.0}, {"max_backoff_ms", 1000},
                    {"jitter", true},    {"retry_on", json::array{"op_failed", "timeout"}}};
  const json::value defaults(full);
  auto set = [&](std::string_view key, json::value given, json::value read) {
    d.given[key] = std::move(given);
    full[key] = std::move(read);
  };
  if (pick(2) == 0) {
    const std::int64_t n = pick(3) == 0 ? any_of({1, 2, 1000}) : 1 + static_cast<std::int64_t>(pick(1000));
    set("max_attempts", n, n);
  }
  for (const char* key : {"initial_backoff_ms", "max_backoff_ms"}) {
    if (pick(2) != 0) continue;
    const std::int64_t ms = pick(3) == 0 ? any_of({0, 1, max_ms}) : static_cast<std::int64_t>(pick(100000));
    set(key, ms, ms);
  }
  if (pick(2) == 0) {
    switch (pick(5)) {
      case 0: {  // an integer
        const auto m = static_cast<std::int64_t>(1 + pick(100));
        set("multiplier", m, static_cast<double>(m));
        break;
      }
      case 1: set("multiplier", std::uint64_t(-1), static_cast<double>(std::uint64_t(-1))); break;
      case 2: {  // whole, or the least past 1, or huge
        const double m = std::array{1.0, 2.0, std::nextafter(1.0, 2.0), 1e300}[pick(4)];
        set("multiplier", m, m);
        break;
      }
      default: {
        const double m = 1.0 + std::uniform_real_distribution<double>(0.0, 10.0)(rng);
        set("multiplier", m, m);
      }
    }
  }
  if (pick(2) == 0) {
    const bool jitter = pick(2) == 0;
    set("jitter", jitter, jitter);
  }
  if (pick(2) == 0) {
    std::vector<errc> codes;
    for (int c = 1; !name_of(static_cast<errc>(c)).empty(); ++c) {
      if (retryable(static_cast<errc>(c))) codes.push_back(static_cast<errc>(c));
    }
    json::array on;
    const std::uint64_t n = pick(4);  // repeats allowed: the policy keeps what it is given
    for (std::uint64_t i = 0; i < n; ++i) on.emplace_back(json::string(name_of(codes[pick(codes.size())])));
    set("retry_on", on, on);
  }
  d.expected = json::value(full) == defaults ? json::value() : json::value(std::move(full));
  return d;
}

// Calls `f` with every task and every step object of plan `v` (as
// write_plan writes them: steps under "step", in "substeps" and in
// bodies), in document order.
void each_retry_place(json::value& v, const std::function<void(json::object&)>& f, std::string_view key = {}) {
  auto body_item = [&](json::value& item) {
    if (item.is_object() && !(item.get_object().size() == 1 && item.get_object().contains("net"))) {
      each_retry_place(item, f, "step");
    }
  };
  if (json::object* o = v.if_object()) {
    if (key == "task" || key == "step") f(*o);
    for (auto& [k, x] : *o) {
      if (k == "tasks") {
        for (auto& t : x.get_array()) each_retry_place(t, f, "task");
      } else if (k == "step") {
        each_retry_place(x, f, "step");
      } else if (k == "substeps" || k == "init" || k == "exit" || k == "instance_init" || k == "instance_exit" ||
                 k == "body") {
        for (auto& item : x.get_array()) body_item(item);
      } else if (x.is_array() && (k == "reports" || k == "report_steps" || k == "local_init" || k == "local_exit")) {
        for (auto& item : x.get_array()) each_retry_place(item, f, "holder");
      }
    }
  }
}

error read_error(const std::string& text) {
  auto g = read_plan(std::string_view(text));
  REQUIRE_FALSE(g);
  CHECK(g.error().code == errc::invalid_plan);
  return g.error();
}

}  // namespace

TEST_CASE("a group written to JSON and read back runs identically", "[plan]") {
  auto original = rich_group();
  auto text = write_plan(original).value();
  auto copy = read_plan(std::string_view(text)).value();
  CHECK(write_plan(copy).value() == text);  // stable
  local_session a(1), b(1);
  auto ra = test::run_sync(a, original).value();
  auto rb = test::run_sync(b, copy).value();
  CHECK(outputs_of(ra) == outputs_of(rb));
  CHECK(outputs_of(ra) == "n1/counter.y=5;n1/counter.y=5;n1/counter.marked=1;");
  CHECK(b.node_workspace("n2")->read<std::int64_t>("n2_done").value() == 1);
  CHECK(b.node_workspace("n1")->read<std::int64_t>("watched").value() == 1);
  CHECK(copy.cluster().options("n1").get<std::int64_t>("cores").value() == 2);
}

TEST_CASE("a plan keeps the group's name: written after the version when set, read back", "[plan]") {
  auto g = rich_group();
  const std::string unnamed = write_plan(g).value();
  CHECK(json::parse(unnamed).get_object().if_contains("name") == nullptr);  // unnamed: no key
  CHECK(read_plan(std::string_view(unnamed)).value().name().empty());

  const std::string name = "checkout \"v2\" \\ é/✓";
  g.name(name);
  const std::string text = write_plan(g).value();
  CHECK_THAT(text, Catch::StartsWith("{\n  \"taskgroup_plan\": 1,\n  \"name\": \"checkout \\\"v2\\\" \\\\ é/✓\",\n"));
  auto back = read_plan(std::string_view(text));
  REQUIRE(back);
  CHECK(back.value().name() == name);
  CHECK(write_plan(back.value()).value() == text);                   // stable
  CHECK(read_plan(plan_to_json(g).value()).value().name() == name);  // and from a document
  CHECK(test::plan_round_trip_fault(text).empty());

  // The longest name, in characters of one to four bytes.
  std::string longest;
  while (longest.size() + 10 <= max_group_name_size) longest += "aé✓𝄞";
  longest.append(max_group_name_size - longest.size(), 'z');
  REQUIRE(longest.size() == max_group_name_size);
  task_group named;
  named.name(longest);
  auto again = read_plan(std::string_view(write_plan(named).value()));
  REQUIRE(again);
  CHECK(again.value().name() == longest);

  // Anywhere among the members, and "" reads as unnamed.
  const std::string plain = R"({"nets": [], "name": "last", "taskgroup_plan": 1})";
  CHECK(read_plan(std::string_view(plain)).value().name() == "last");
  const std::string empty = R"({"taskgroup_plan": 1, "name": ""})";
  auto unnamed_again = read_plan(std::string_view(empty));
  REQUIRE(unnamed_again);
  CHECK(unnamed_again.value().name().empty());
  CHECK(json::parse(write_plan(unnamed_again.value()).value()).get_object().if_contains("name") == nullptr);
}

TEST_CASE("generated groups keep their names through a plan", "[plan]") {
  int named = 0, longest = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const auto spec = model::generate(seed);
    auto text = write_plan(model::build(spec));
    if (!text) continue;  // inline operators: not a plan
    INFO("seed " << seed << "\n" << text.value());
    const json::value doc = json::parse(text.value());
    const json::value* written = doc.get_object().if_contains("name");
    if (spec.name.empty()) {
      CHECK(written == nullptr);
    } else {
      REQUIRE(written != nullptr);
      CHECK(written->as_string() == spec.name);
      ++named;
      if (spec.name.size() == max_group_name_size) ++longest;
    }
    auto back = read_plan(std::string_view(text.value()));
    if (!back) continue;  // the model's own operators, when its test has not registered them
    CHECK(back.value().name() == spec.name);
    CHECK(test::plan_round_trip_fault(text.value()).empty());
  }
  CHECK(named > 50);
  CHECK(longest > 5);
}

TEST_CASE("a plan keeps every step field", "[plan]") {
  task_group g;
  auto s = step("all")
               .add_substep(step("a").add_net(fill_int("a", "x", 1)).create_workspace(true))
               .add_substep(step("b").add_net(fill_bool("b", "stop", true)).should_stop_blob("stop").only_once(true))
               .add_substep(step("r").add_net(fill_int("r", "z", 1)).run_every(std::chrono::milliseconds(7)))
               .concurrent_substeps(true)
               .concurrent_instances(2)
               .timeout(std::chrono::milliseconds(900));
  REQUIRE(g.add(task("t", s)));
  auto j = plan_to_json(g).value();
  auto back = read_plan(j).value();
  const auto& rs = *back.tasks().at(0).step();
  CHECK(rs.concurrent_substeps());
  CHECK(rs.concurrent_instances() == 2);
  CHECK(rs.timeout() == std::chrono::milliseconds(900));
  CHECK(rs.substeps().at(0).create_workspace());
  CHECK(rs.substeps().at(1).should_stop_blob() == "stop");
  CHECK(rs.substeps().at(1).only_once());
  CHECK(rs.substeps().at(2).run_every() == std::chrono::milliseconds(7));
  CHECK(write_plan(back).value() == write_plan(g).value());
}

TEST_CASE("every scenario group of registered operators round-trips", "[plan]") {
  // The control-flow scenarios, as tasks of one group.
  task_group g(workspace_type::global);
  const net init = [] {
    net n("init");
    for (const char* b : {"i", "count"}) n.op("ConstantFill", {}, {b}, {{"value", std::int64_t{0}}});
    n.op("ConstantFill", {}, {"one"}, {{"value", std::int64_t{1}}})
        .op("ConstantFill", {}, {"n"}, {{"value", std::int64_t{10}}});
    return n;
  }();
  REQUIRE(g.add(task("loops", do_("main", {init, loop("l", 10, binary("c", "Add", "count", "one", "count")),
                                           while_("w", binary("lt", "LT", "i", "n", "lt"),
                                                  {binary("c2", "Add", "count", "one", "count"),
                                                   binary("si", "Add", "i", "one", "i")}),
                                           switch_("s", {{"lt", fill_int("never", "never", 1)}})}))));
  auto text = write_plan(g).value();
  auto back = read_plan(std::string_view(text)).value();
  local_session a(1), b(1);
  REQUIRE(test::run_sync(a, g));
  REQUIRE(test::run_sync(b, back));
  CHECK(a.node_workspace("local")->read<std::int64_t>("count").value() == 20);
  CHECK(b.node_workspace("local")->read<std::int64_t>("count").value() == 20);
}

TEST_CASE("a group with an inline operator refuses to be written, naming it", "[plan]") {
  task_group g;
  net n("n");
  n.op("ConstantFill", {}, {"x"}, {{"value", std::int64_t{1}}});
  n.lambda("halve", {"x"}, {"x"}, [](op_context&) { return ok(); });
  REQUIRE(g.add(task("t", step("s").add_net(n))));
  auto r = write_plan(g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK(r.error().message ==
        "task \"local/t\": net \"n\" op #1 (halve): an inline operator cannot be written to a plan");
}

TEST_CASE("plan errors name the JSON pointer of the fault", "[plan]") {
  const std::string head =
      R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": 1}}]}], )";
  SECTION("both nets and substeps") {
    auto e = read_error(head + R"("tasks": [{"name": "t", "step": {"nets": ["a"], "substeps": []}}]})");
    CHECK(e.message == "/tasks/0/step: both \"nets\" and \"substeps\"");
  }
  SECTION("nested step") {
    auto e = read_error(
        head + R"("tasks": [{}, {}, {"step": {"substeps": [{"nets": ["a"], "substeps": [{"nets": ["a"]}]}]}}]})");
    CHECK(e.message == "/tasks/2/step/substeps/0: both \"nets\" and \"substeps\"");
  }
  SECTION("unknown net") {
    auto e = read_error(head + R"("tasks": [{"step": {"nets": ["a", "b"]}}]})");
    CHECK(e.message == "/tasks/0/step/nets/1: unknown net \"b\"");
  }
  SECTION("unknown operator type") {
    auto e = read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Ad"}]}]})");
    CHECK(e.message == "/nets/0/ops/0: unknown operator type \"Ad\"");
  }
  SECTION("wrong input count") {
    auto e = read_error(
        R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Add", "inputs": ["x"], "outputs": ["y"]}]}]})");
    CHECK(e.message == "/nets/0/ops/0: Add: expects 2 input(s), got 1");
  }
  SECTION("wrong output count") {
    auto e =
        read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Negate", "inputs": ["x"]}]}]})");
    CHECK(e.message == "/nets/0/ops/0: Negate: expects 1 output(s), got 0");
  }
  SECTION("argument of the wrong type") {
    auto e = read_error(
        R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Sleep", "args": {"ms": "long"}}]}]})");
    CHECK(e.message == "/nets/0/ops/0/args/ms: Sleep: argument \"ms\": expected int64 or double, got string");
  }
  SECTION("report step on a node with no task") {
    auto e = read_error(
        head +
        R"("tasks": [{"step": {"nets": ["a"]}}], "report_steps": [{"node": "nowhere", "step": {"nets": ["a"]}}]})");
    CHECK(e.message == "/report_steps/0: report step on node \"nowhere\", which has no task");
  }
  SECTION("an unknown key") {
    auto e = read_error(head + R"("tasks": [{"stpe": {}}]})");
    CHECK(e.message == "/tasks/0/stpe: unknown key \"stpe\"");
  }
  SECTION("a value of the wrong JSON type") {
    auto e = read_error(head + R"("tasks": [{"num_instances": "two"}]})");
    CHECK(e.message == "/tasks/0/num_instances: expected an integer, got string");
  }
  SECTION("num_iter with a stop blob") {
    auto e = read_error(head + R"("tasks": [{"step": {"nets": ["a"], "num_iter": 2, "should_stop_blob": "s"}}]})");
    CHECK(e.message == "/tasks/0/step: both \"num_iter\" and \"should_stop_blob\"");
  }
  SECTION("mixed workspace types") {
    auto e = read_error(head + R"("tasks": [{"workspace_type": "global"}, {"workspace_type": "private"}]})");
    CHECK_THAT(e.message,
               Catch::StartsWith("/tasks/1: ") && Catch::Contains("Require global but already have private"));
  }
  SECTION("not a plan") {
    CHECK(read_error(R"({"tasks": []})").message == "/: not a taskgroup plan (no \"taskgroup_plan\" version)");
    CHECK(read_error(R"([1, 2])").message == "/: expected an object, got array");
    CHECK(read_error(R"({"taskgroup_plan": 9})").message ==
          "/taskgroup_plan: unsupported plan version 9 (this reader knows 1)");
  }
  SECTION("a list mixing element types") {
    auto e = read_error(
        R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": [1, 2.5]}}]}]})");
    CHECK_THAT(
        e.message,
        Catch::StartsWith("/nets/0/ops/0/args/value/1: expected an integer like the list's first element, got number"));
  }
  SECTION("local setup on a node with no task") {
    auto e = read_error(
        head + R"("tasks": [{"step": {"nets": ["a"]}}], "local_init": [{"node": "n9", "body": [{"net": "a"}]}]})");
    CHECK(e.message == "/local_init/0: local setup on node \"n9\", which has no task");
  }
  SECTION("duplicate net names") {
    auto e = read_error(R"({"taskgroup_plan": 1, "nets": [{"name": "a"}, {"name": "a"}]})");
    CHECK(e.message == "/nets/1/name: duplicate net name \"a\"");
  }
  SECTION("a group name of the wrong type, too long, with a control character") {
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": 7})").message == "/name: expected a string, got integer");
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": ["a"]})").message == "/name: expected a string, got array");
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": null})").message == "/name: expected a string, got null");
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": ")" + std::string(201, 'n') + R"("})").message ==
          "/name: must be at most 200 bytes (taskgroup::max_group_name_size), got 201");
    // 67 three-byte characters: 201 bytes.
    std::string checks;
    for (int i = 0; i < 67; ++i) checks += "✓";
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": ")" + checks + R"("})").message ==
          "/name: must be at most 200 bytes (taskgroup::max_group_name_size), got 201");
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": "a\u0001b"})").message ==
          R"(/name: must hold no control characters, got "a\u0001b")");
    CHECK(read_error(R"({"taskgroup_plan": 1, "name": "line\n"})").message ==
          R"(/name: must hold no control characters, got "line\u000A")");
    // A document built in C++ may hold what text cannot.
    json::object doc{{"taskgroup_plan", 1}, {"name", "bad\xFF"}};
    auto g = read_plan(json::value(doc));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::invalid_plan);
    CHECK(g.error().message == "/name: must be valid UTF-8, got byte 0xFF at offset 3");
  }
}

TEST_CASE("a plan keeps the retry policies of tasks and steps, written whole when not the default", "[plan]") {
  const std::string text = R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": []}], "tasks": [{
      "name": "t",
      "retry": {"max_attempts": 3, "initial_backoff_ms": 0, "multiplier": 3, "max_backoff_ms": 50, "jitter": false,
                "retry_on": ["timeout", "blob_not_found"]},
      "step": {"name": "s", "substeps": [
        {"name": "a", "nets": ["a"], "retry": {"max_attempts": 2, "multiplier": 1.5}},
        {"name": "b", "nets": ["a"], "retry": {}},
        {"name": "c", "nets": ["a"], "retry": {"max_attempts": 1, "initial_backoff_ms": 10, "multiplier": 2.0,
                                               "max_backoff_ms": 1000, "jitter": true,
                                               "retry_on": ["op_failed", "timeout"]}},
        {"name": "d", "nets": ["a"], "retry": {"retry_on": []}}]}}]})";
  auto g = read_plan(std::string_view(text)).value();
  const task& t = g.tasks().at(0);
  retry_policy want;
  want.max_attempts = 3;
  want.initial_backoff = std::chrono::milliseconds(0);
  want.multiplier = 3.0;
  want.max_backoff = std::chrono::milliseconds(50);
  want.jitter = false;
  want.retry_on = {errc::timeout, errc::blob_not_found};
  CHECK(t.retry() == want);
  const auto& subs = t.step()->substeps();
  retry_policy a;
  a.max_attempts = 2;
  a.multiplier = 1.5;
  CHECK(subs.at(0).retry() == a);
  CHECK(subs.at(1).retry() == retry_policy{});  // every member has its default
  CHECK(subs.at(2).retry() == retry_policy{});
  CHECK(subs.at(3).retry().retry_on.empty());
  CHECK(t.step()->retry() == retry_policy{});

  const std::string written = write_plan(g).value();
  // A policy other than the default is written whole, in the documented
  // order; the default is not written.
  CHECK_THAT(written, Catch::Contains(R"("retry": {
        "max_attempts": 3,
        "initial_backoff_ms": 0,
        "multiplier": 3.0,
        "max_backoff_ms": 50,
        "jitter": false,
        "retry_on": ["timeout", "blob_not_found"]
      },)"));
  CHECK_THAT(written, Catch::Contains(R"("retry": {
              "max_attempts": 2,
              "initial_backoff_ms": 10,
              "multiplier": 1.5,
              "max_backoff_ms": 1000,
              "jitter": true,
              "retry_on": ["op_failed", "timeout"]
            })"));
  CHECK_THAT(written, Catch::Contains(R"("retry_on": [])"));
  const auto count = [&](std::string_view what) {
    std::size_t n = 0;
    for (auto at = written.find(what); at != std::string::npos; at = written.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count("\"retry\"") == 3);  // the task's, a's and d's
  auto back = read_plan(std::string_view(written)).value();
  CHECK(back.tasks().at(0).retry() == want);
  CHECK(back.tasks().at(0).step()->substeps().at(0).retry() == a);
  CHECK(write_plan(back).value() == written);
}

TEST_CASE("generated retry policies on every task and step read, write whole and round-trip", "[plan]") {
  std::mt19937_64 rng(11);
  int plans = 0;
  std::size_t placed = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    auto text = write_plan(model::build(model::generate(seed)));
    // Not a plan: inline operators, or the model's own operators when its
    // test has not registered them.
    if (!text || !read_plan(std::string_view(text.value()))) continue;
    ++plans;
    json::value doc = json::parse(text.value());
    std::vector<json::value> expected;
    each_retry_place(doc, [&](json::object& o) {
      if (rng() % 2 == 0) {
        expected.emplace_back();
        return;
      }
      auto d = draw_retry(rng);
      o["retry"] = std::move(d.given);
      expected.push_back(std::move(d.expected));
      ++placed;
    });
    const std::string given = json::serialize(doc);
    INFO("seed " << seed << "\n" << given);
    auto g = read_plan(std::string_view(given));
    REQUIRE(g);
    auto written = write_plan(g.value());
    REQUIRE(written);
    // Parsed as plans are (Boost.JSON's own parser may miss a double's
    // last bit).
    auto back = plan_detail::parse_text(written.value());
    REQUIRE(back);
    std::vector<json::value> found;
    each_retry_place(back.value().v, [&](json::object& o) {
      const json::value* r = o.if_contains("retry");
      found.push_back(r != nullptr ? json::value(*r, json::storage_ptr()) : json::value());
    });
    REQUIRE(found.size() == expected.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
      INFO("place " << i);
      CHECK(json::serialize(found[i]) == json::serialize(expected[i]));
    }
    CHECK(plan_round_trip_fault(given).empty());
  }
  CHECK(plans > 100);
  CHECK(placed > 1000);
}

TEST_CASE("a plan's retry policy runs: a task retried past FailTimes succeeds, with too few attempts fails", "[plan]") {
  const auto plan = [](int attempts) {
    return R"({"taskgroup_plan": 1, "nets": [{"name": "f", "ops": [
        {"type": "FailTimes", "args": {"times": 2, "message": "busy"}},
        {"type": "ConstantFill", "outputs": ["v"], "args": {"value": 42}}]}],
      "tasks": [{"name": "t", "retry": {"max_attempts": )" +
           std::to_string(attempts) + R"(, "initial_backoff_ms": 1}, "step": {"name": "s", "nets": ["f"]},
                 "outputs": ["v"]}]})";
  };
  local_session session(1);
  auto three = read_plan(std::string_view(plan(3))).value();
  auto r = test::run_sync(session, three);
  REQUIRE(r);
  CHECK(outputs_of(r.value()) == "local/t.v=42;");
  auto two = read_plan(std::string_view(plan(2))).value();
  auto failed = test::run_sync(session, two);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == errc::op_failed);
  CHECK_THAT(failed.error().message, Catch::Contains("busy (run 2 of the 2 that fail)"));
}

TEST_CASE("malformed JSON reports line and column", "[plan]") {
  auto e = read_error("{\n  \"taskgroup_plan\": 1,\n  \"tasks\": [,]\n}");
  CHECK_THAT(e.message, Catch::StartsWith("line 3, column 13: "));
  CHECK_THAT(read_error("{\"taskgroup_plan\": 1} x").message, Catch::Contains("line 1"));
}

TEST_CASE("written plans show doubles readably", "[plan]") {
  task_group g;
  net n("n");
  n.op("ConstantFill", {}, {"d"}, {{"value", 1.5}})
      .op("ConstantFill", {}, {"l"}, {{"value", std::vector<double>{0.25, 2.0}}});
  REQUIRE(g.add(task("t", step("s").add_net(n))));
  auto text = write_plan(g).value();
  CHECK_THAT(text, Catch::Contains("\"value\": 1.5") && Catch::Contains("[0.25, 2.0]"));
  CHECK(write_plan(read_plan(std::string_view(text)).value()).value() == text);
}

TEST_CASE("typed arguments keep empty lists and whole doubles", "[plan]") {
  task_group g;
  net n("n");
  n.op("ConstantFill", {}, {"d"}, {{"value", 3.0}}).op("ConstantFill", {}, {"l"}, {{"value", std::vector<double>{}}});
  REQUIRE(g.add(task("t", step("s").add_net(n))));
  auto back = read_plan(plan_to_json(g).value()).value();
  const auto& ops = back.tasks()[0].step()->nets()[0].ops();
  CHECK(kind_of(*ops[0].args.find("value")) == argument_kind::float64);
  CHECK(kind_of(*ops[1].args.find("value")) == argument_kind::float64_list);
}

TEST_CASE("a plan file that cannot be opened is an error naming it", "[plan]") {
  auto r = read_plan_file("/nonexistent/plan.json");
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "cannot open plan file \"/nonexistent/plan.json\": No such file or directory");
}

TEST_CASE("plans declare inputs; read_feeds reads feeds as op arguments are written", "[plan][feeds]") {
  const std::string text = R"({"taskgroup_plan": 1,
    "inputs": [{"node": "n1", "blob": "x", "type": "int64"}, {"blob": "d", "type": "double", "required": false},
               {"node": "n1", "blob": "any"}, {"node": "n1", "blob": "l", "type": "list<double>"}],
    "tasks": [{"name": "t", "node": "n1", "step": {"name": "s", "nets": ["copy"]}, "outputs": ["y"]},
              {"name": "u", "step": {"name": "s", "nets": ["fill"]}}],
    "nets": [{"name": "copy", "ops": [{"type": "Copy", "inputs": ["x"], "outputs": ["y"]}]},
             {"name": "fill", "ops": [{"type": "ConstantFill", "outputs": ["z"], "args": {"value": 1}}]}]})";
  auto g = read_plan(std::string_view(text));
  REQUIRE(g);
  const auto& in = g.value().inputs();
  REQUIRE(in.size() == 4);
  CHECK(in[0].node == "n1");
  CHECK(*in[0].type == typeid(std::int64_t));
  CHECK(in[0].required);
  CHECK(in[1].node == "local");
  CHECK(*in[1].type == typeid(double));
  CHECK_FALSE(in[1].required);
  CHECK(in[2].type == nullptr);
  CHECK(in[3].type_name == "vector<double>");

  // Written back as read.
  auto again = read_plan(std::string_view(write_plan(g.value()).value()));
  REQUIRE(again);
  REQUIRE(again.value().inputs().size() == 4);
  CHECK(again.value().inputs()[3].type_name == "vector<double>");
  CHECK_FALSE(again.value().inputs()[1].required);

  auto f = read_feeds(std::string_view(R"({"n1/x": 5, "local/d": 2, "n1/any": "text", "n1/l": [1, 2],
                                           "n1/a/b": {"type": "list<bool>", "value": [true]}})"),
                      g.value());
  REQUIRE(f);
  const auto& e = f.value().entries();
  REQUIRE(e.size() == 5);
  CHECK(e[0].value->as<std::int64_t>() == 5);
  CHECK(e[1].value->as<double>() == 2.0);  // an integer fed to a double input
  CHECK(e[2].value->as<std::string>() == "text");
  CHECK(e[3].value->as<std::vector<double>>() == std::vector<double>{1.0, 2.0});
  CHECK(e[4].node == "n1");
  CHECK(e[4].blob == "a/b");  // split at the first '/'

  local_session session(1);
  auto r = test::run_sync(
      session, g.value(),
      {.feeds = feeds().set("n1", "x", std::int64_t{9}).set("n1", "any", true).set("n1", "l", std::vector<double>{})});
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r);
  CHECK(r.value().tasks[0].outputs.at(0).second->as<std::int64_t>() == 9);

  struct bad_case {
    std::string inputs;
    std::string message;
  };
  for (const auto& c : std::vector<bad_case>{
           {R"([{"node": "n1"}])", "/inputs/0: an input needs a \"blob\""},
           {R"([{"blob": "x", "type": "int"}])",
            "/inputs/0/type: unknown input type \"int\" (one of int64, double, bool, string, list<int64>, "
            "list<double>, list<bool>, list<string>)"},
           {R"([{"blob": "x", "kind": "int64"}])", "/inputs/0/kind: unknown key \"kind\""},
           {R"([{"blob": "x"}, {"blob": "x"}])", "/inputs/1: input \"local/x\" declared twice"},
           {R"({"blob": "x"})", "/inputs: expected an array"},
           {R"([{"node": "n7", "blob": "x"}])", "/inputs/0: input on node \"n7\", which has no task"},
       }) {
    INFO(c.inputs);
    // One task, on node "local".
    auto bad = read_plan(std::string_view(
        R"({"taskgroup_plan": 1, "tasks": [{"step": {"nets": ["f"]}}], "nets": [{"name": "f", "ops": [{"type": )"
        R"("ConstantFill", "outputs": ["z"], "args": {"value": 1}}]}], "inputs": )" +
        c.inputs + "}"));
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains(c.message));
  }
  auto no_slash = read_feeds(std::string_view(R"({"x": 1})"), g.value());
  REQUIRE_FALSE(no_slash);
  CHECK(no_slash.error().message == R"(/x: a feed is named "node/blob", got "x")");
}

TEST_CASE("a feed's name is the declared input it spells, whichever of node and blob holds a '/'", "[plan][feeds]") {
  task_group g;
  REQUIRE(g.input<std::int64_t>("r", node("p/q")));
  REQUIRE(g.input<std::int64_t>("b/c", node("a"), false));
  REQUIRE(g.declare_input("c", node("a/b"), false));
  REQUIRE(g.input<double>("w/x", node("v")));

  auto f = read_feeds(std::string_view(R"({"p/q/r": 1, "v/w/x": 2, "p/q/s": 3})"), g);
  REQUIRE(f);
  const auto& e = f.value().entries();
  REQUIRE(e.size() == 3);
  CHECK((e[0].node == "p/q" && e[0].blob == "r"));  // the slash in the node name
  CHECK((e[1].node == "v" && e[1].blob == "w/x"));
  CHECK(e[1].value->as<double>() == 2.0);           // as the input it names is typed
  CHECK((e[2].node == "p" && e[2].blob == "q/s"));  // no declared input: split at the first '/'

  auto ambiguous = read_feeds(std::string_view(R"({"p/q/r": 1, "a/b/c": 2})"), g);
  REQUIRE_FALSE(ambiguous);
  CHECK(ambiguous.error().message ==
        R"(/a~1b~1c: feed "a/b/c" is ambiguous: it names node "a", blob "b/c" and node "a/b", blob "c")");
}

TEST_CASE("read_feed reads one feed; its errors, and parse_json's, are placed in the value", "[plan][feeds]") {
  task_group g;
  REQUIRE(g.input<double>("x", node("p/q")));
  REQUIRE(g.input<std::int64_t>("b/c", node("a"), false));
  REQUIRE(g.input<std::int64_t>("c", node("a/b"), false));

  auto v = parse_json("2");
  REQUIRE(v);
  auto e = read_feed("p/q/x", v.value(), g);
  REQUIRE(e);
  CHECK(e.value().node == "p/q");
  CHECK(e.value().blob == "x");
  CHECK(e.value().value->as<double>() == 2.0);  // as the input is typed

  auto error_of = [&](std::string_view name, std::string_view text) {
    auto parsed = parse_json(text);
    if (!parsed) return "parse: " + parsed.error().message;
    auto r = read_feed(name, parsed.value(), g);
    return r ? std::string("fed") : r.error().message;
  };
  CHECK(error_of("p/q/x", "four") == "parse: line 1, column 2: syntax error");  // where parsing stopped
  CHECK(error_of("p/q/x", "[1, 2,]") == "parse: line 1, column 7: syntax error");
  CHECK(error_of("p/q/x", R"({"a": 1, "a": 2})") == R"(parse: line 1, column 10: duplicate key "a")");
  CHECK(error_of("p/q/x", "1e999") == "parse: line 1, column 1: number out of range (not a finite double): 1e999");
  CHECK(error_of("p/q/x",
                 "\xEF\xBB\xBF"
                 "1") ==
        "parse: line 1, column 1: a byte order mark (BOM) starts the text; JSON text is UTF-8 without one");
  CHECK(error_of("p/q/x", "null") == "/: an argument is a bool, number, string or list, got null");
  CHECK_THAT(error_of("p/q/x", "[1, true]"), Catch::StartsWith("/1: expected an integer like the list's first"));
  CHECK(error_of("x", "1") == R"(a feed is named "node/blob", got "x")");
  CHECK(error_of("a/b/c", "1") ==
        R"(feed "a/b/c" is ambiguous: it names node "a", blob "b/c" and node "a/b", blob "c")");
  CHECK(error_of("n/undeclared", "1") == "fed");  // whether it matches an input is the run's check
}

TEST_CASE("write_plan refuses what read_plan would refuse: control characters in names, text that is not UTF-8",
          "[plan]") {
  auto written = [](const std::string& task_name, const std::string& blob, const std::string& text) {
    task_group g;
    net n("n");
    n.op("ConstantFill", {}, {blob}, {{"value", text}});
    REQUIRE(g.add(task(task_name, step("s").add_net(n))));
    return write_plan(g);
  };
  // Control characters in a string argument are text, and round-trip.
  auto fine = written("t", "x", std::string("tab\tnul\0end", 11));
  REQUIRE(fine);
  auto back = read_plan(std::string_view(fine.value()));
  REQUIRE(back);
  CHECK(write_plan(back.value()).value() == fine.value());

  auto task_name = written(
      "a\x01"
      "b",
      "x", "v");
  REQUIRE_FALSE(task_name);
  CHECK(task_name.error().code == errc::not_serializable);
  CHECK(task_name.error().message == R"(/tasks/0/name: a name cannot hold control characters, got "a\u0001b")");
  auto blob_name = written("t", std::string("x\0y", 3), "v");
  REQUIRE_FALSE(blob_name);
  CHECK(blob_name.error().message ==
        R"(/nets/0/ops/0/outputs/0: a name cannot hold control characters, got "x\u0000y")");
  auto bad_text = written("t", "x", "caf\xC3");
  REQUIRE_FALSE(bad_text);
  CHECK(bad_text.error().code == errc::not_serializable);
  CHECK_THAT(bad_text.error().message,
             Catch::StartsWith("/nets/0/ops/0/args/value: a string that is not valid UTF-8 cannot be written"));
  auto bad_name = written("t\xFF", "x", "v");
  REQUIRE_FALSE(bad_name);
  CHECK_THAT(bad_name.error().message, Catch::StartsWith("/tasks/0/name: a string that is not valid UTF-8"));
}

TEST_CASE("write_plan writes no group that would not run: each fault is the run's, named alike", "[plan]") {
  // A group read back from a plan runs as the group written, so a group
  // that cannot run is not written (it used to be, and read_plan refused
  // the text, or read a rejected control helper as an empty step that
  // ran as a success).
  using namespace std::chrono_literals;
  const net n = incr("inc", "x");
  struct faulty {
    const char* what;
    std::function<void(task_group&)> build;
  };
  const std::vector<faulty> cases{
      {"timeout 0", [&](task_group& g) { REQUIRE(g.add(task("t", step("s").add_net(n).timeout(0ms)))); }},
      {"num_iter -1", [&](task_group& g) { REQUIRE(g.add(task("t", step("s").add_net(n).iterations(-1)))); }},
      {"run_every 0",
       [&](task_group& g) {
         REQUIRE(g.add(
             task("t", step("p").add_substep(step("r").add_net(n).run_every(0ms)).add_substep(step("q").add_net(n)))));
       }},
      {"loop without a stop", [&](task_group& g) { REQUIRE(g.add(task("t", loop("L", body(n))))); }},
      {"loop over an unnamed count blob", [&](task_group& g) { REQUIRE(g.add(task("t", loop("L", "", body(n))))); }},
      {"stop in do_parallel",
       [&](task_group& g) {
         REQUIRE(g.add(task("t", do_parallel("p", {n, stop()}))));
       }},
      {"if_ with an empty condition net", [&](task_group& g) { REQUIRE(g.add(task("t", if_("i", net("empty"), n)))); }},
      {"while_ over an unnamed blob", [&](task_group& g) { REQUIRE(g.add(task("t", while_("w", "", n)))); }},
      {"a step marked invalid",
       [&](task_group& g) {
         execution_step e("e");
         detail::step_access::mark_invalid(e, "broken");
         REQUIRE(g.add(task("t", e)));
       }},
      {"a nested rejected helper",
       [&](task_group& g) { REQUIRE(g.add(task("t", step("s").add_net(n).add_substep(loop("L", body(n)))))); }},
      {"a report step rejected",
       [&](task_group& g) { REQUIRE(g.add(task("t", step("s").add_net(n)).report(loop("L", body(n)), 10ms))); }},
      {"a step's retry multiplier of 0.5",
       [&](task_group& g) {
         retry_policy p;
         p.max_attempts = 2;
         p.multiplier = 0.5;
         REQUIRE(g.add(task("t", step("s").add_net(n).retry(p))));
       }},
      {"a group report interval of -1 ms",
       [&](task_group& g) {
         REQUIRE(g.add(task("t", step("s").add_net(n))));
         g.report_step(step("r").add_net(n), node(), -1ms);
       }},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    task_group g(workspace_type::global);
    c.build(g);
    auto text = write_plan(g);
    REQUIRE_FALSE(text);
    local_session session(1);
    session.node_workspace("local")->set<i64>("x", 0);
    auto ran = test::run_sync(session, g);
    REQUIRE_FALSE(ran);
    CHECK(ran.error().code == text.error().code);
    // The same fault: the writer's message less its task prefix ends the run's.
    std::string fault = text.error().message;
    const std::string writer_prefix = "task \"local/t\": ";
    if (fault.starts_with(writer_prefix)) fault.erase(0, writer_prefix.size());
    INFO("written: " << text.error().message << "\nrun: " << ran.error().message);
    CHECK(ran.error().message.ends_with(fault));
    CHECK(session.node_workspace("local")->read<i64>("x").value() == 0);  // nothing ran
  }
}

TEST_CASE("write_plan refuses text longer than max_plan_size, which read_plan would refuse", "[plan]") {
  task_group g;
  net big("big");
  big.op("ConstantFill", {}, {"s"}, {{"value", std::string(max_plan_size, 'x')}});
  REQUIRE(g.add(task("t", step("s").add_net(big))));
  auto text = write_plan(g);
  REQUIRE_FALSE(text);
  CHECK(text.error().code == errc::not_serializable);
  CHECK_THAT(text.error().message, Catch::Contains("more than 268435456 bytes (taskgroup::max_plan_size, 256 MiB)"));
}
