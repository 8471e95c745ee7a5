#include <taskgroup/control.hpp>

#include <taskgroup/session.hpp>

#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

net consts(const std::string& name, const std::vector<std::pair<std::string, i64>>& values) {
  net n(name);
  for (const auto& [blob, v] : values) n.op("ConstantFill", {}, {blob}, {{"value", v}});
  return n;
}

}  // namespace

TEST_CASE("scenario 1: a loop ended by stop_if counts down", "[control][scenario]") {
  auto ws = workspace::make("w");
  auto s =
      do_("main", {consts("init", {{"x", 5}, {"y", 0}, {"zero", 0}, {"one", 1}}),
                   loop("countdown", {stop_if(binary("is_zero", "EQ", "x", "zero", "x_is_zero")),
                                      binary("dec", "Sub", "x", "one", "x"), binary("inc", "Add", "y", "one", "y")})});
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("y").value() == 5);
  CHECK(ws->read<i64>("x").value() == 0);
}

TEST_CASE("scenario 2: stop_guard reports whether a stop halted its block", "[control][scenario]") {
  auto ws = workspace::make("w");
  auto s = do_("main", {consts("init", {{"x", 10}, {"y", 3}, {"five", 5}}),
                        stop_guard("g1", {stop_if(binary("x_lt", "LT", "x", "five", "x_lt_5"))}),
                        stop_guard("g2", {stop_if(binary("y_lt", "LT", "y", "five", "y_lt_5"))}),
                        stop_guard("g4", {consts("g4_body", {{"z", 1}})}), stop_guard("g3", body{})});
  REQUIRE(run_tree(s, ws));
  CHECK_FALSE(ws->read<bool>(has_stopped_blob("g1")).value());
  CHECK(ws->read<bool>(has_stopped_blob("g2")).value());
  CHECK_FALSE(ws->read<bool>(has_stopped_blob("g3")).value());
  CHECK_FALSE(ws->read<bool>(has_stopped_blob("g4")).value());
}

TEST_CASE("scenario 3: a stop inside an if branch ends only that branch", "[control][scenario]") {
  for (auto [x, expected] : {std::pair<i64, i64>{75, 2}, {25, 3}}) {
    auto ws = workspace::make("w");
    auto s = do_("main", {consts("init", {{"x", x}, {"y", 1}, {"fifty", 50}}),
                          if_("big", binary("gt", "GT", "x", "fifty", "x_gt_50"), consts("two", {{"y", 2}})),
                          if_("small", binary("lt", "LT", "x", "fifty", "x_lt_50"),
                              {consts("three", {{"y", 3}}), stop(), consts("four", {{"y", 4}})}),
                          consts("after", {{"done", 1}})});
    REQUIRE(run_tree(s, ws));
    CHECK(ws->read<i64>("y").value() == expected);
    CHECK(ws->read<i64>("done").value() == 1);
  }
}

TEST_CASE("scenario 9: if_net branches run in scoped workspaces", "[control][scenario]") {
  auto ws = workspace::make("w");
  net init = consts("init", {{"x0", 0},
                             {"x1", 1},
                             {"x2", 2},
                             {"y0", 0},
                             {"y1", 1},
                             {"y2", 2},
                             {"first_res", 0},
                             {"second_res", 0},
                             {"c100", 100},
                             {"c901", 901}});
  init.op("ConstantFill", {}, {"t"}, {{"value", true}}).op("ConstantFill", {}, {"f"}, {{"value", false}});

  net make_local = consts("make_local", {{"local_blob", 900}});
  make_local.op("Add", {"c100", "local_blob"}, {"y0"});
  net else_work("else_work");
  else_work.op("Add", {"y1", "local_blob"}, {"local_blob"}).op("Add", {"c100", "y1"}, {"y1"});
  net then_work = consts("then_work", {{"y2", 7}});
  then_work.op("Add", {"y1", "y2"}, {"y2"});

  auto s = do_(
      "main",
      {init, if_net("if1", "t", consts("first_one", {{"first_res", 1}}), body(consts("first_two", {{"first_res", 2}}))),
       if_net("if2", "f", consts("second_one", {{"second_res", 1}}), body(consts("second_two", {{"second_res", 2}}))),
       if_net("if3", binary("gt10", "GT", "x1", "x0", "gt10"),
              {make_local, if_net("if3a", binary("gt12", "GT", "x1", "x2", "gt12"), body{}, body(else_work)),
               if_net("if3b", binary("eq901", "EQ", "local_blob", "c901", "eq901"), then_work)},
              body{})});
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("first_res").value() == 1);
  CHECK(ws->read<i64>("second_res").value() == 2);
  CHECK(ws->read<i64>("y0").value() == 1000);
  CHECK(ws->read<i64>("y1").value() == 101);
  CHECK(ws->read<i64>("y2").value() == 108);
  CHECK_FALSE(ws->has("local_blob"));
}

TEST_CASE("scenario 10: while_net evaluates its condition before each iteration", "[control][scenario]") {
  auto ws = workspace::make("w");
  net cond("cond");
  cond.op("Add", {"x", "one"}, {"x"}).op("LT", {"x", "seven"}, {"x_lt_7"});
  auto s = do_("main", {consts("init", {{"x", 0}, {"y", 0}, {"one", 1}, {"seven", 7}}),
                        while_net("w", cond, binary("acc", "Add", "y", "x", "y"))});
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("x").value() == 7);
  CHECK(ws->read<i64>("y").value() == 21);
}

TEST_CASE("scenario 23: every loop form counts to 10", "[control][scenario]") {
  const net init = consts("init", {{"i", 0}, {"count", 0}, {"one", 1}, {"n", 10}});
  const net count = binary("count", "Add", "count", "one", "count");
  const net step_i = binary("step_i", "Add", "i", "one", "i");
  const net idle = consts("idle", {{"idle", 0}});
  const net lt = binary("i_lt_n", "LT", "i", "n", "i_lt_n");
  const net ge = binary("i_ge_n", "GE", "i", "n", "i_ge_n");
  std::vector<std::pair<std::string, execution_step>> variants{
      {"loop, net", loop("l1", 10, count)},
      {"loop, step", loop("l2", 10, step("wrapped").add_net(count))},
      {"loop, idle net", loop("l3", 10, {idle, count})},
      {"while_", while_("w", lt, {count, step_i})},
      {"until", until("u", ge, {count, step_i})},
      {"do_while", do_while("dw", lt, {count, step_i})},
      {"do_until", do_until("du", ge, {count, step_i})},
      {"while_ with a step body", while_("ws", lt, step("b").nets({count, step_i}))},
  };
  for (const auto& [what, s] : variants) {
    INFO(what);
    auto ws = workspace::make("w");
    REQUIRE(run_tree(do_("main", {init, s}), ws));
    CHECK(ws->read<i64>("count").value() == 10);
  }
}

TEST_CASE("a counted loop exposes its iteration counter", "[control]") {
  auto ws = workspace::make("w");
  net record("record");
  record.op("Append", {"seen", loop_iter_blob("l")}, {"seen"});
  net init("init");
  init.op("ConstantFill", {}, {"seen"}, {{"value", std::vector<i64>{}}});
  REQUIRE(run_tree(do_("main", {init, loop("l", 4, record)}), ws));
  CHECK(ws->read<std::vector<i64>>("seen").value() == std::vector<i64>{0, 1, 2, 3});
}

TEST_CASE("a stop_if inside a counted loop ends it early", "[control]") {
  auto ws = workspace::make("w");
  auto s = do_("main", {consts("init", {{"count", 0}, {"one", 1}, {"three", 3}}),
                        loop("l", 100,
                             {binary("count", "Add", "count", "one", "count"),
                              stop_if(binary("enough", "GE", "count", "three", "enough"))})});
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("count").value() == 3);
}

TEST_CASE("an uncounted loop without a stop is rejected", "[control]") {
  auto ws = workspace::make("w");
  auto st = run_tree(loop("forever", consts("c", {{"x", 1}})), ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::invalid_step);
  CHECK_THAT(st.error().message, Catch::Contains("requires a stop condition to be set with `stop` or `stop_if`"));
}

TEST_CASE("stop markers are not allowed in scoped or parallel bodies", "[control]") {
  CHECK(if_net("i", "c", {consts("a", {{"x", 1}}), stop()}).validate().error().message ==
        "step \"i/then\": Stop blobs are not used with control operators");
  CHECK_THAT(do_parallel("p", {consts("a", {{"x", 1}}), stop()}).validate().error().message,
             Catch::Contains("cannot end a do_parallel"));
  CHECK_THAT(if_("i", net("empty"), consts("a", {{"x", 1}})).validate().error().message,
             Catch::Contains("Invalid condition net"));
}

TEST_CASE("scenario 24: if_, if_not and if-else pick the right branch", "[control][scenario]") {
  for (bool value : {true, false}) {
    auto ws = workspace::make("w");
    net init = consts("init", {{"if_cnt", 0}, {"ifnot_cnt", 0}, {"cnt", 0}, {"cnt2", 0}, {"one", 1}});
    init.op("ConstantFill", {}, {"cond"}, {{"value", value}});
    auto s = do_("main", {init, if_("if", "cond", binary("a", "Add", "if_cnt", "one", "if_cnt")),
                          if_not("ifnot", "cond", binary("b", "Add", "ifnot_cnt", "one", "ifnot_cnt")),
                          if_("ifelse", "cond", binary("c", "Add", "cnt", "one", "cnt"),
                              body(binary("d", "Add", "cnt2", "one", "cnt2")))});
    REQUIRE(run_tree(s, ws));
    CHECK(ws->read<i64>("if_cnt").value() == (value ? 1 : 0));
    CHECK(ws->read<i64>("ifnot_cnt").value() == (value ? 0 : 1));
    CHECK(ws->read<i64>("cnt").value() == (value ? 1 : 0));
    CHECK(ws->read<i64>("cnt2").value() == (value ? 0 : 1));
  }
}

TEST_CASE("an if_ decides once even when its branch changes the condition", "[control]") {
  auto ws = workspace::make("w");
  net init = consts("init", {{"then_runs", 0}, {"else_runs", 0}, {"one", 1}});
  init.op("ConstantFill", {}, {"cond"}, {{"value", true}});
  net flip("flip");
  flip.op("Not", {"cond"}, {"cond"}).op("Add", {"then_runs", "one"}, {"then_runs"});
  REQUIRE(run_tree(
      do_("main", {init, if_("i", "cond", flip, body(binary("e", "Add", "else_runs", "one", "else_runs")))}), ws));
  CHECK(ws->read<i64>("then_runs").value() == 1);
  CHECK(ws->read<i64>("else_runs").value() == 0);
}

TEST_CASE("scenario 25: switch_ runs every true case, switch_not every false one", "[control][scenario]") {
  auto ws = workspace::make("w");
  net init = consts("init", {{"cnt", 0}, {"cnt2", 0}, {"n_cnt", 0}, {"n_cnt2", 0}, {"one", 1}});
  init.op("ConstantFill", {}, {"no"}, {{"value", false}}).op("ConstantFill", {}, {"yes"}, {{"value", true}});
  auto s = do_("main", {init,
                        switch_("sw", {{"no", binary("a", "Add", "cnt", "one", "cnt")},
                                       {"yes", binary("b", "Add", "cnt2", "one", "cnt2")},
                                       {"yes", binary("c", "Add", "cnt2", "one", "cnt2")}}),
                        switch_not("swn", {{"no", binary("d", "Add", "n_cnt", "one", "n_cnt")},
                                           {"yes", binary("e", "Add", "n_cnt2", "one", "n_cnt2")}})});
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("cnt").value() == 0);
  CHECK(ws->read<i64>("cnt2").value() == 2);
  CHECK(ws->read<i64>("n_cnt").value() == 1);
  CHECK(ws->read<i64>("n_cnt2").value() == 0);
}

TEST_CASE("do_parallel runs its items concurrently", "[control]") {
  auto ws = workspace::make("w");
  auto sleepy = [](const std::string& name, const std::string& blob) {
    net n(name);
    n.op("Sleep", {}, {}, {{"ms", std::int64_t{5}}}).op("ConstantFill", {}, {blob}, {{"value", std::int64_t{1}}});
    return n;
  };
  auto s = do_parallel("p", {sleepy("a", "a_done"), sleepy("b", "b_done")});
  CHECK(s.concurrent_substeps());
  CHECK(s.substeps().size() == 2);
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("a_done").value() == 1);
  CHECK(ws->read<i64>("b_done").value() == 1);
}

// Every conditional loop form, with its condition as a blob and as a net,
// entered four times by an enclosing loop: each entry runs its body three
// times (Caffe2 resets the stop blob on entry; a stale `true` from the
// previous entry must not end the loop after the condition's own net).
TEST_CASE("conditional loops behave on every entry as on the first", "[control][reentry]") {
  const net count = binary("count", "Add", "count", "one", "count");
  const net step_i = binary("step_i", "Add", "i", "one", "i");
  const net reset_i = consts("reset_i", {{"i", 0}});
  const net lt_net = binary("i_lt_n", "LT", "i", "n", "i_lt_n");
  const net ge_net = binary("i_ge_n", "GE", "i", "n", "i_ge_n");
  using make = execution_step (*)(std::string, condition, body);
  struct form {
    const char* name;
    make fn;
    bool negated;  // loops while the condition holds
  };
  const form forms[] = {{"while_", &while_, true},
                        {"until", &until, false},
                        {"do_while", &do_while, true},
                        {"do_until", &do_until, false},
                        {"while_net", &while_net, true}};
  for (const form& f : forms) {
    for (bool as_net : {false, true}) {
      INFO(f.name << (as_net ? ", condition net" : ", condition blob"));
      const net& cond_net = f.negated ? lt_net : ge_net;
      const condition cond = as_net ? condition(cond_net) : condition(cond_net.ops().back().outputs.front());
      // The blob form reads a blob the body keeps up to date.
      body b = as_net ? body{count, step_i} : body{count, step_i, cond_net};
      execution_step inner = f.fn("inner", cond, b);
      auto ws = workspace::make("w");
      auto s = do_("main", {consts("init", {{"count", 0}, {"one", 1}, {"n", 3}, {"i", 0}}), cond_net,
                            loop("outer", 4, {reset_i, cond_net, inner})});
      REQUIRE(run_tree(s, ws));
      CHECK(ws->read<i64>("count").value() == 12);
    }
  }
}

TEST_CASE("a GLOBAL group whose while_ has a condition net runs alike on every run", "[control][reentry]") {
  local_session session(1);
  task_group g(workspace_type::global);
  const net lt_net = binary("i_lt_n", "LT", "i", "n", "i_lt_n");
  REQUIRE(g.add(task("t", do_("main", {consts("init", {{"i", 0}, {"n", 3}, {"one", 1}}),
                                       while_("w", lt_net,
                                              {binary("step_i", "Add", "i", "one", "i"),
                                               binary("count", "Add", "count", "one", "count")})}))));
  task_group zero(workspace_type::global);
  REQUIRE(zero.add(task("zero", step("zero").add_net(consts("zero", {{"count", 0}})))));
  REQUIRE(test::run_sync(session, zero));
  for (int run = 1; run <= 3; ++run) {
    INFO("run " << run);
    REQUIRE(test::run_sync(session, g));
    CHECK(session.node_workspace("local")->read<i64>("count").value() == 3 * run);
  }
}

// Nested loops choosing a branch with if_ / else built on while_: each
// (row, column) cell gets 1, 2 or 3 by its sum's remainder mod 3.
TEST_CASE("nested while_ loops with if/else branches compute every cell", "[control][reentry]") {
  auto ws = workspace::make("w");
  const net row_lt = binary("row_lt", "LT", "row", "n", "row_lt");
  const net col_lt = binary("col_lt", "LT", "col", "n", "col_lt");
  net classify("classify");
  classify.op("Add", {"row", "col"}, {"sum"}).op("Mod", {"sum", "three"}, {"rem"});
  auto add_to = [](const std::string& name, const std::string& amount) {
    return binary(name, "Add", "total", amount, "total");
  };
  auto s = do_(
      "main", {consts("init", {{"row", 0}, {"n", 4}, {"one", 1}, {"two", 2}, {"three", 3}, {"zero", 0}, {"total", 0}}),
               while_("rows", row_lt,
                      {consts("col0", {{"col", 0}}),
                       while_("cols", col_lt,
                              {classify,
                               if_("is0", binary("eq0", "EQ", "rem", "zero", "rem_is_0"), add_to("add1", "one"),
                                   body{if_("is1", binary("eq1", "EQ", "rem", "one", "rem_is_1"), add_to("add2", "two"),
                                            body{add_to("add3", "three")})}),
                               binary("col_inc", "Add", "col", "one", "col")}),
                       binary("row_inc", "Add", "row", "one", "row")})});
  REQUIRE(run_tree(s, ws));
  i64 expected = 0;
  for (i64 r = 0; r < 4; ++r) {
    for (i64 c = 0; c < 4; ++c) expected += (r + c) % 3 + 1;
  }
  CHECK(ws->read<i64>("total").value() == expected);
}

TEST_CASE("a loop counted by a blob reads its count on each entry", "[control][count_blob]") {
  net record("record");
  record.op("Append", {"seen", loop_iter_blob("l")}, {"seen"});
  SECTION("counts 0 .. n-1 for every n, none for n <= 0") {
    for (i64 n : {-2, 0, 1, 2, 5}) {
      INFO("n = " << n);
      auto ws = workspace::make("w");
      net init("init");
      init.op("ConstantFill", {}, {"seen"}, {{"value", std::vector<i64>{}}})
          .op("ConstantFill", {}, {"n"}, {{"value", n}});
      REQUIRE(run_tree(do_("main", {init, loop("l", "n", record)}), ws));
      std::vector<i64> want;
      for (i64 i = 0; i < n; ++i) want.push_back(i);
      CHECK(ws->read<std::vector<i64>>("seen").value() == want);
    }
  }
  SECTION("a body that changes the count changes the next entry only") {
    auto ws = workspace::make("w");
    net init("init");
    init.op("ConstantFill", {}, {"seen"}, {{"value", std::vector<i64>{}}})
        .op("ConstantFill", {}, {"n"}, {{"value", i64{2}}})
        .op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
    // Entry 1 runs 2 iterations and leaves n = 4; entry 2 runs 4 and
    // leaves n = 8.
    auto s = do_("main", {init, loop("outer", 2, loop("l", "n", {record, binary("grow", "Add", "n", "one", "n")}))});
    REQUIRE(run_tree(s, ws));
    CHECK(ws->read<std::vector<i64>>("seen").value() == std::vector<i64>{0, 1, 0, 1, 2, 3});
    CHECK(ws->read<i64>("n").value() == 8);
  }
  SECTION("a count blob that does not exist is an error naming it") {
    auto ws = workspace::make("w");
    auto st = run_tree(loop("l", "missing", consts("x", {{"x", 1}})), ws);
    REQUIRE_FALSE(st);
    CHECK(st.error().message.find("missing") != std::string::npos);
  }
  SECTION("a count blob that holds no int64 is an error") {
    auto ws = workspace::make("w");
    net init("init");
    init.op("ConstantFill", {}, {"n"}, {{"value", std::string("three")}});
    auto st = run_tree(do_("main", {init, loop("l", "n", consts("x", {{"x", 1}}))}), ws);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::type_mismatch);
  }
  SECTION("an unnamed count blob is refused") {
    auto ws = workspace::make("w");
    auto st = run_tree(loop("l", std::string(), consts("x", {{"x", 1}})), ws);
    REQUIRE_FALSE(st);
    CHECK(st.error().message.find("count blob") != std::string::npos);
  }
}
