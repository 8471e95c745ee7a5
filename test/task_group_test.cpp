#include <taskgroup/task_group.hpp>

#include <taskgroup/session.hpp>

#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

TEST_CASE("adding to a used group is an error", "[task_group]") {
  task_group g;
  REQUIRE(g.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(g.used());
  auto r = g.add(task("b"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_task);
  CHECK(r.error().message == "Cannot add Task to an already used TaskGroup.");
}

TEST_CASE("report steps and local setup added to a used group fail its later runs on every session",
          "[task_group][session]") {
  // Each change after the first run, and the message naming it.
  struct change {
    const char* what;
    void (*apply)(task_group&);
    const char* message;
  };
  const change changes[] = {
      {"report_step", [](task_group& g) { g.report_step(step("rep").add_net(fill_int("r", "y", 1))); },
       "task group: Cannot add report step \"rep\" on node \"local\" to an already used TaskGroup."},
      {"local_init", [](task_group& g) { g.local_init(node("local"), body(fill_int("i", "y", 1))); },
       "task group: Cannot add local setup of node \"local\" to an already used TaskGroup."},
      {"local_exit", [](task_group& g) { g.local_exit(node("local"), body(fill_int("e", "y", 1))); },
       "task group: Cannot add local setup of node \"local\" to an already used TaskGroup."},
      {"local_setup",
       [](task_group& g) { g.local_setup(node("local"), make_setup(body(fill_int("s", "y", 1)), body{})); },
       "task group: Cannot add local setup of node \"local\" to an already used TaskGroup."},
  };
  for (const auto type : {workspace_type::global, workspace_type::private_}) {
    for (const auto& c : changes) {
      INFO(c.what << " on a " << to_string(type) << " group");
      task_group g(type);
      REQUIRE(g.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
      local_session session(1);
      REQUIRE(test::run_sync(session, g));
      // At the call: a system_error naming the change, nothing changed.
      try {
        c.apply(g);
        FAIL("no exception");
      } catch (const taskgroup::system_error& e) {
        CHECK(e.error().code == errc::invalid_task);
        CHECK(std::string(e.what()) == c.message);
      }
      CHECK(g.report_steps().empty());
      CHECK(g.local_setups().empty());
      // The group stays usable: on the session that compiled it, and on
      // one that never saw it.
      local_session other(1);
      for (local_session* s : {&session, &other}) {
        auto r = test::run_sync(*s, g);
        REQUIRE(r);
        CHECK(r.value().ok());
      }
    }
  }
}

TEST_CASE("a group's name: empty by default, set and read back, passed on by tasks_by_node", "[task_group]") {
  task_group g;
  CHECK(g.name().empty());
  CHECK(&g.name("checkout") == &g);  // chains like the other builders
  CHECK(g.name() == "checkout");
  task_group copy = g;  // a handle: copies share the name
  CHECK(copy.name() == "checkout");
  g.name("");  // unnamed again
  CHECK(copy.name().empty());
  g.name("résumé ✓ \"q\" \\ /");  // printable UTF-8, any of it
  CHECK(g.name() == "résumé ✓ \"q\" \\ /");
  const std::string longest(max_group_name_size, 'n');
  g.name(longest);
  CHECK(g.name() == longest);
  REQUIRE(g.add(task("a", step("sa").add_net(fill_int("na", "x", 1))), node("n1")));
  auto by_node = g.tasks_by_node();
  REQUIRE(by_node);
  CHECK(by_node.value().name() == longest);
}

TEST_CASE("a name out of limits is refused, naming the field and the limit, and changes nothing", "[task_group]") {
  struct bad_name {
    std::string name;
    const char* message;
  };
  const bad_name cases[] = {
      {std::string(max_group_name_size + 1, 'n'),
       "task group: name must be at most 200 bytes (taskgroup::max_group_name_size), got 201"},
      {std::string(5000, 'n'), "task group: name must be at most 200 bytes (taskgroup::max_group_name_size), got 5000"},
      {"a\nb", "task group: name must hold no control characters, got \"a\\u000Ab\""},
      {std::string("nul\0", 4), "task group: name must hold no control characters, got \"nul\\u0000\""},
      {"tab\there", "task group: name must hold no control characters, got \"tab\\u0009here\""},
      {"del\x7f", "task group: name must hold no control characters, got \"del\\u007F\""},
      {"esc\x1b[1m", "task group: name must hold no control characters, got \"esc\\u001B[1m\""},
      {"bad\xff", "task group: name must be valid UTF-8, got byte 0xFF at offset 3"},
      {"cut\xc3", "task group: name must be valid UTF-8, got byte 0xC3 at offset 3"},
      {"\xc0\xafoverlong", "task group: name must be valid UTF-8, got byte 0xC0 at offset 0"},
      {"\xed\xa0\x80surrogate", "task group: name must be valid UTF-8, got byte 0xED at offset 0"},
  };
  // The limit counts bytes: 100 two-byte characters fit, 101 do not.
  std::string two_byte;
  for (int i = 0; i < 100; ++i) two_byte += "é";
  task_group ok_group;
  ok_group.name(two_byte);
  CHECK(ok_group.name() == two_byte);
  for (const auto& c : cases) {
    INFO(c.message);
    task_group g;
    g.name("before");
    try {
      g.name(c.name);
      FAIL("no exception");
    } catch (const taskgroup::system_error& e) {
      CHECK(e.error().code == errc::invalid_task);
      CHECK(std::string(e.what()) == c.message);
    }
    CHECK(g.name() == "before");
  }
  try {
    ok_group.name(two_byte + "é");
    FAIL("no exception");
  } catch (const taskgroup::system_error& e) {
    CHECK(std::string(e.what()) ==
          "task group: name must be at most 200 bytes (taskgroup::max_group_name_size), got 202");
  }
}

TEST_CASE("naming a used group is refused as the other builders of a used group are", "[task_group][session]") {
  task_group g;
  g.name("first");
  REQUIRE(g.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  REQUIRE(g.used());
  for (const char* attempt : {"second", "first", ""}) {
    INFO(attempt);
    try {
      g.name(attempt);
      FAIL("no exception");
    } catch (const taskgroup::system_error& e) {
      CHECK(e.error().code == errc::invalid_task);
      CHECK(std::string(e.what()) ==
            "task group: Cannot set name " + quote(attempt) + " on an already used TaskGroup.");
    }
    CHECK(g.name() == "first");
  }
  // Refused at the call; the group runs on as it was.
  auto r = test::run_sync(session, g);
  REQUIRE(r);
  CHECK(r.value().ok());
  // tasks_by_node uses a group too.
  task_group h;
  REQUIRE(h.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  REQUIRE(h.tasks_by_node());
  CHECK_THROWS_AS(h.name("late"), taskgroup::system_error);
  CHECK(h.name().empty());
}

TEST_CASE("workspace types: tasks take the group's, the group takes the first task's, no mixing", "[task_group]") {
  task_group typed(workspace_type::global);
  auto t = typed.add(task("t")).value();
  CHECK(t.workspace_type() == workspace_type::global);

  task_group untyped;
  auto first = untyped.add(task("a").workspace_type(workspace_type::global)).value();
  CHECK(untyped.workspace_type() == workspace_type::global);
  auto second = untyped.add(task("b")).value();
  CHECK(second.workspace_type() == workspace_type::global);
  auto clash = untyped.add(task("c").workspace_type(workspace_type::private_));
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == errc::invalid_task);
  CHECK_THAT(clash.error().message, Catch::Contains("Require global but already have private"));

  task_group defaulted;
  CHECK(defaulted.add(task("d")).value().workspace_type() == workspace_type::private_);
}

TEST_CASE("used nodes are listed in order of first use and options merge first-wins", "[task_group][node]") {
  task_group g;
  REQUIRE(g.add(task("a"), node("n2", {{"gpus", std::int64_t{1}}})));
  REQUIRE(g.add(task("b"), node("n1")));
  REQUIRE(g.add(task("c"), node("n2", {{"gpus", std::int64_t{4}}, {"mem", std::string("8G")}})));
  g.report_step(step("r").add_net(fill_int("r", "x", 1)), node("n1"));
  CHECK(g.used_nodes() == std::vector<std::string>{"n2", "n1"});
  CHECK(g.cluster().options("n2").get<std::int64_t>("gpus").value() == 1);
  CHECK(g.cluster().options("n2").get<std::string>("mem").value() == "8G");
}

TEST_CASE("a cluster of 20,000 nodes keeps first-use order, merges options and finds every name",
          "[task_group][node]") {
  constexpr int n = 20'000;
  cluster c;
  for (int i = 0; i < n; ++i) c.add(node("n" + std::to_string(i), {{"i", std::int64_t{i}}}));
  // Registered again in reverse with a conflicting and a new key each.
  for (int i = n - 1; i >= 0; --i) {
    c.add(node("n" + std::to_string(i), {{"i", std::int64_t{-1}}, {"again", std::int64_t{i}}}));
  }
  REQUIRE(c.nodes().size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::string name = "n" + std::to_string(i);
    CHECK(c.nodes()[static_cast<std::size_t>(i)] == name);
    REQUIRE(c.has(name));
    CHECK(c.options(name).get<std::int64_t>("i").value() == i);
    CHECK(c.options(name).get<std::int64_t>("again").value() == i);
  }
  CHECK_FALSE(c.has("n" + std::to_string(n)));
  CHECK(c.options("missing").empty());
}

TEST_CASE("used nodes of 20,000 tasks and report steps list each node once, in order", "[task_group][node]") {
  constexpr int n = 20'000;
  task_group g;
  for (int i = 0; i < n; ++i) REQUIRE(g.add(task("t" + std::to_string(i)), node("n" + std::to_string(i))));
  // Report steps on known nodes, and twice on each of two nodes without a task.
  for (int i = 0; i < n; i += 100)
    g.report_step(step("r").add_net(fill_int("r", "x", 1)), node("n" + std::to_string(i)));
  for (const char* extra : {"x1", "x2", "x1", "x2"})
    g.report_step(step("r").add_net(fill_int("r", "x", 1)), node(extra));
  const auto used = g.used_nodes();
  REQUIRE(used.size() == static_cast<std::size_t>(n) + 2);
  for (int i = 0; i < n; ++i) CHECK(used[static_cast<std::size_t>(i)] == "n" + std::to_string(i));
  CHECK(used[n] == "x1");
  CHECK(used[n + 1] == "x2");
}

TEST_CASE("a report step on a node with no task is an error", "[task_group]") {
  task_group g;
  REQUIRE(g.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  g.report_step(step("r").add_net(fill_int("r", "y", 1)), node("lonely"));
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "report step \"r\" on node \"lonely\", which has no task");
  task_group g2;
  REQUIRE(g2.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  g2.report_step(step("r").add_net(fill_int("r", "y", 1)), node("lonely"));
  CHECK_FALSE(g2.tasks_by_node());
}

TEST_CASE("tasks_by_node groups per node and accepts only the same map again", "[task_group]") {
  task_group g;
  REQUIRE(g.add(task("a", step("sa").add_net(fill_int("na", "x", 1))), node("n1")));
  REQUIRE(g.add(task("b", step("sb").add_net(fill_int("nb", "y", 1))), node("n2")));
  REQUIRE(g.add(task("c", step("sc").add_net(fill_int("nc", "z", 1))), node("n1")));
  auto by_node = g.tasks_by_node().value();
  REQUIRE(by_node.tasks().size() == 2);
  CHECK(by_node.tasks()[0].name() == "n1/grouped_by_node");
  CHECK(by_node.tasks()[1].name() == "n2/grouped_by_node");
  auto again = g.tasks_by_node();
  REQUIRE(again);
  CHECK(again.value().same(by_node));
  auto other = g.tasks_by_node([](std::string_view) { return std::string("x"); });
  REQUIRE_FALSE(other);
  CHECK(other.error().message == "Cannot call tasks_by_node multiple times.");
}

TEST_CASE("to_task merges every node into one task that runs all of them", "[task_group][session]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("a", step("sa").add_net(fill_int("na", "x", 1))), node("n1")));
  REQUIRE(g.add(task("b", step("sb").add_net(fill_int("nb", "y", 2))), node("n2")));
  auto t = g.to_task().value();
  CHECK(t.name() == "local/grouped_by_node");
  task_group single;
  REQUIRE(single.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, single));
  auto ws = session.node_workspace("local");
  CHECK(ws->read<i64>("x").value() == 1);
  CHECK(ws->read<i64>("y").value() == 2);
  CHECK(task_group().to_task().value().name() == "local/task");
}

TEST_CASE("local init runs before a node's tasks and local exit after them", "[task_group][session]") {
  task_group g(workspace_type::global);
  auto append = [](const std::string& name, i64 v) {
    net n(name);
    n.op("ConstantFill", {}, {name + "/v"}, {{"value", v}}).op("Append", {"log", name + "/v"}, {"log"});
    return n;
  };
  g.local_init(node("n1"), {[] {
                              net n("log_init");
                              n.op("ConstantFill", {}, {"log"}, {{"value", std::vector<i64>{}}});
                              return n;
                            }(),
                            append("init", 1)});
  g.local_exit(node("n1"), append("exit", 3));
  REQUIRE(g.add(task("a", step("a").add_net(append("a", 2))), node("n1")));
  REQUIRE(g.add(task("b", step("b").add_net(append("b", 2))), node("n1")));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(session.node_workspace("n1")->read<std::vector<i64>>("log").value() == std::vector<i64>{1, 2, 2, 3});
}

TEST_CASE("a group report step runs on its node and once more after the tasks", "[task_group][session]") {
  task_group g(workspace_type::global);
  net report("report");
  report.op("Iter", {}, {"reports"});
  g.report_step(step("r").add_net(report), node("n1"), std::chrono::seconds(30));
  REQUIRE(g.add(task("a", step("a").add_net(fill_int("a", "x", 1))), node("n1")));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(session.node_workspace("n1")->read<i64>("reports").value() == 1);
}

TEST_CASE("final_output adds a task that carries an output", "[task_group][session]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("w", step("w").add_net(fill_int("w", "result", 7)))));
  auto out = g.final_output<i64>("result").value();
  CHECK(g.tasks().size() == 2);
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(out.get().value() == 7);
}

TEST_CASE("local setup on a node with no task is an error", "[task_group][session]") {
  task_group g;
  REQUIRE(g.add(task("a", step("s").add_net(fill_int("n", "x", 1)))));
  g.local_init(node("empty_node"), fill_int("i", "y", 1));
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "local setup on node \"empty_node\", which has no task");
}
