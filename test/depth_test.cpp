// Deep step trees: building, validating, running and destroying them costs
// no recursion proportional to their depth, and the depth limit is
// enforced with an error naming it.
#include <taskgroup/execution_step.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>

#include "detail/test_hooks.hpp"
#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

// `levels` nested steps (the root is level 1); the innermost runs `leaf`,
// and every level of `looping` runs its child twice.
execution_step chain(std::size_t levels, const net& leaf, std::size_t looping = 0) {
  execution_step inner = step("level " + std::to_string(levels)).add_net(leaf);
  for (std::size_t level = levels - 1; level >= 1; --level) {
    execution_step outer = step("level " + std::to_string(level)).add_substep(inner);
    if (level <= looping) outer.iterations(2);
    inner = outer;
  }
  return inner;
}

}  // namespace

TEST_CASE("a tree deeper than max_step_depth is refused with an error naming the limit", "[step][depth]") {
  for (std::size_t levels : {max_step_depth + 1, std::size_t{30'000}}) {
    INFO(levels << " levels");
    const execution_step s = chain(levels, incr("inc", "x"));
    const status st = s.validate();
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::invalid_step);
    CHECK(st.error().message.find("max_step_depth (1000 levels") != std::string::npos);
    CHECK(st.error().message.find("level 1/.../level 1001") != std::string::npos);
    // Running it fails the same way (no stack exhaustion in compile or bind).
    auto ws = workspace::make("w");
    ws->set<i64>("x", 0);
    const status ran = run(run_step(s, ws));
    REQUIRE_FALSE(ran);
    CHECK(ran.error().message == st.error().message);
  }
}

TEST_CASE("a tree of max_step_depth levels runs on both drivers", "[step][depth]") {
  auto& hooks = detail::test_driver_hooks();
  for (bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine driver" : "automatic driver"));
    hooks.coroutine_only = coroutine_only;
    local_session session(1);
    task_group g(workspace_type::global);
    net init("init");
    init.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}});
    REQUIRE(g.add(task("t", step("t")
                                .add_substep(step("init").add_net(init))
                                .add_substep(chain(max_step_depth - 1, incr("inc", "x"), 3)))));
    auto r = test::run_sync(session, g);
    hooks.coroutine_only = false;
    REQUIRE(r);
    // Three levels of two iterations each: the leaf runs 8 times.
    CHECK(session.node_workspace("local")->read<i64>("x").value() == 8);
  }
}

TEST_CASE("a tree of max_step_depth levels runs wherever a session places it; one level more never does",
          "[step][depth]") {
  // The levels a session composes around a tree (instances, report steps,
  // setup) do not count against the limit; the tree's own levels do.
  struct placement {
    const char* where;
    i64 runs;  // of the leaf, in one run of the group
    std::function<void(task_group&, const execution_step&)> put;
  };
  const std::vector<placement> placements{
      {"task step, 2 instances", 2,
       [](task_group& g, const execution_step& s) { REQUIRE(g.add(task("t", s).num_instances(2))); }},
      {"task report step", 1,
       [](task_group& g, const execution_step& s) {
         REQUIRE(g.add(task("t", step("s").add_net(incr("other", "y"))).report(s, std::chrono::hours(1))));
       }},
      {"task init", 1,
       [](task_group& g, const execution_step& s) {
         REQUIRE(g.add(task("t", step("s").add_net(incr("other", "y"))).init(s)));
       }},
      {"instance init, 2 instances", 2,
       [](task_group& g, const execution_step& s) {
         REQUIRE(g.add(task("t", step("s").add_net(incr("other", "y"))).num_instances(2).instance_init(s)));
       }},
      {"node setup", 1,
       [](task_group& g, const execution_step& s) {
         REQUIRE(g.add(task("t", step("s").add_net(incr("other", "y")))));
         g.local_init(node(), s);
       }},
  };
  for (const auto& p : placements) {
    INFO(p.where);
    local_session session(1);
    session.node_workspace("local")->set<i64>("x", 0);
    session.node_workspace("local")->set<i64>("y", 0);
    task_group fits(workspace_type::global);
    p.put(fits, chain(max_step_depth, incr("inc", "x")));
    auto r = test::run_sync(session, fits);
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
    CHECK(session.node_workspace("local")->read<i64>("x").value() == p.runs);
    // One level more, or a hundred (past the levels a session composes):
    // the error names the first step past the limit, in the tree given.
    for (std::size_t extra : {1, 100}) {
      INFO(extra << " levels more");
      task_group deeper(workspace_type::global);
      p.put(deeper, chain(max_step_depth + extra, incr("inc", "x")));
      auto refused = test::run_sync(session, deeper);
      REQUIRE_FALSE(refused);
      CHECK(refused.error().code == errc::invalid_step);
      CHECK_THAT(refused.error().message,
                 Catch::Contains("/level 1001\": deeper than max_step_depth (1000 levels of nested steps)"));
    }
  }
}

TEST_CASE("write_plan writes a tree of max_step_depth levels in text linear in its depth, and refuses a deeper one",
          "[step][depth][plan]") {
  // Indentation stops growing past 64 levels: 1,000 levels took 10 MB
  // when every line was indented to its depth.
  std::vector<std::size_t> sizes;
  for (std::size_t levels : {std::size_t{250}, std::size_t{500}, max_step_depth}) {
    INFO(levels << " levels");
    task_group g;
    REQUIRE(g.add(task("t", chain(levels, incr("inc", "x")))));
    auto text = write_plan(g);
    REQUIRE(text);
    CHECK(text.value().size() < levels * 700);
    sizes.push_back(text.value().size());
    auto back = read_plan(std::string_view(text.value()));
    REQUIRE(back);
    auto again = write_plan(back.value());
    REQUIRE(again);
    CHECK(again.value() == text.value());
  }
  // Linear: the 500 levels from 500 to 1,000 cost what twice the 250 from
  // 250 to 500 do (each past the indentation's 64 levels).
  CHECK(sizes[2] - sizes[1] <= 2 * (sizes[1] - sizes[0]) + 1024);
  for (std::size_t levels : {max_step_depth + 1, std::size_t{30'000}}) {
    INFO(levels << " levels");
    task_group g;
    REQUIRE(g.add(task("t", chain(levels, incr("inc", "x")))));
    auto text = write_plan(g);
    REQUIRE_FALSE(text);
    CHECK(text.error().code == errc::invalid_step);
    CHECK(
        text.error().message ==
        "task \"local/t\": step \"level 1/.../level 1001\": deeper than max_step_depth (1000 levels of nested steps)");
  }
}

TEST_CASE("adding a step to itself is refused", "[step][depth]") {
  execution_step s = step("s").add_net(incr("inc", "x"));
  s.add_substep(s);
  const status st = s.validate();
  REQUIRE_FALSE(st);
  CHECK(st.error().message.find("its own substep") != std::string::npos);
}

TEST_CASE("adding a subtree freezes the child alone, whatever its depth: building a tree is linear", "[step][depth]") {
  // add_substep once froze the child's whole subtree: building a tree level
  // by level took time quadratic in its depth (40,000 levels: 25 s). It
  // must neither walk nor copy the subtree it is given.
  auto& hooks = detail::test_step_hooks();
  for (std::size_t levels : {std::size_t{1}, std::size_t{2}, std::size_t{100}, max_step_depth, std::size_t{30'000}}) {
    INFO(levels << " levels");
    hooks.frozen = 0;
    execution_step bottom = step("bottom").add_net(incr("inc", "x"));
    execution_step deep = bottom;
    for (std::size_t level = 1; level < levels; ++level) deep = step("level").add_substep(deep);
    // One step frozen per substep added, never its subtree again.
    CHECK(hooks.frozen == levels - 1);
    hooks.frozen = 0;
    execution_step parent = step("parent");
    parent.add_substep(deep);
    CHECK(hooks.frozen == 1);
    // The parent holds the very steps it was given, not copies.
    REQUIRE(parent.substeps().size() == 1);
    const execution_step* at = &parent.substeps().front();
    CHECK(at->same(deep));
    while (!at->substeps().empty()) at = &at->substeps().front();
    CHECK(at->same(bottom));
  }
}
