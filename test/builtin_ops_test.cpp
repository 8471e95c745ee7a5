// Tests of the built-in operators (include/taskgroup/builtin_ops.hpp).
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/queue.hpp>
#include <taskgroup/workspace.hpp>

#include <catch2/catch.hpp>

#include "ops/net_run.hpp"
#include "support/checks.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace asio = boost::asio;
using namespace taskgroup;
using test::message_of;
using test::require_error;
using test::sleep_left_ms;
using namespace std::chrono_literals;

using i64 = std::int64_t;

namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

bool has_code(const status& st, errc code) { return !st && st.error().code == code; }

// Rethrows an exception escaping a spawned coroutine out of io_context::run.
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

// Runs `inst` (synchronous or not) on a fresh io_context; returns its status.
status run_net(net_instance& inst) {
  asio::io_context io;
  std::optional<status> st;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { st = co_await inst.run(); }, rethrow);
  io.run();
  REQUIRE(st.has_value());
  return std::move(*st);
}

// Starts `inst` on a fresh io_context, requires it still pending once
// every ready handler has run, cancels it and returns its status.
status cancelled_while_pending(net_instance& inst) {
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<status> st;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { st = co_await inst.run(); },
      asio::bind_cancellation_slot(signal.slot(), rethrow));
  io.poll();
  REQUIRE_FALSE(st.has_value());
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE(st.has_value());
  return std::move(*st);
}

// A net of one op, named `name`.
net named(std::string name, std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
          arguments args = {}) {
  net n(std::move(name));
  n.op(std::move(type), std::move(inputs), std::move(outputs), std::move(args));
  return n;
}

// A net "n" of one op. Instantiating another net "n" in the same workspace
// replaces (destroys) the previous instance.
net one(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs, arguments args = {}) {
  return named("n", std::move(type), std::move(inputs), std::move(outputs), std::move(args));
}

// Instantiates `n` in `ws` (replacing a net of that name) and runs it once.
status run_once(workspace& ws, const net& n) {
  auto inst = ws.create_net(n, /*overwrite=*/true);
  if (!inst) return inst.error();
  return run_net(*inst.value());
}

// Instantiates `n` in `ws`, requiring success.
net_instance& instantiate(workspace& ws, const net& n) {
  auto inst = ws.create_net(n, /*overwrite=*/true);
  REQUIRE_OK(inst);
  return *inst.value();
}

template <class T>
T value_of(const workspace& ws, std::string_view name) {
  auto r = ws.read<T>(name);
  REQUIRE_OK(r);
  return r.value();
}

// A copyable type unknown to the built-ins.
struct opaque_point {
  int x = 0;
  int y = 0;
};

// Captures Print's lines for the life of the object.
class captured_lines {
 public:
  captured_lines() {
    previous_ = set_print_sink([this](std::string_view line) { lines.emplace_back(line); });
  }
  ~captured_lines() { set_print_sink(std::move(previous_)); }
  captured_lines(const captured_lines&) = delete;
  captured_lines& operator=(const captured_lines&) = delete;
  std::vector<std::string> lines;

 private:
  print_sink previous_;
};

struct arity {
  const char* type;
  std::size_t min_in, max_in, min_out, max_out;
};
constexpr std::size_t many = operator_schema::unbounded;

// The table of builtin_ops.hpp.
const std::vector<arity> table = {
    {"ConstantFill", 0, 0, 1, 1},
    {"Copy", 1, 1, 1, 1},
    {"Add", 2, 2, 1, 1},
    {"Sub", 2, 2, 1, 1},
    {"Mul", 2, 2, 1, 1},
    {"Div", 2, 2, 1, 1},
    {"Mod", 2, 2, 1, 1},
    {"Negate", 1, 1, 1, 1},
    {"LT", 2, 2, 1, 1},
    {"LE", 2, 2, 1, 1},
    {"GT", 2, 2, 1, 1},
    {"GE", 2, 2, 1, 1},
    {"EQ", 2, 2, 1, 1},
    {"NE", 2, 2, 1, 1},
    {"And", 2, 2, 1, 1},
    {"Or", 2, 2, 1, 1},
    {"Xor", 2, 2, 1, 1},
    {"Not", 1, 1, 1, 1},
    {"CreateCounter", 0, 0, 1, 1},
    {"CountDown", 1, 1, 1, 1},
    {"ResetCounter", 1, 1, 0, 0},
    {"Iter", 0, 1, 1, 1},
    {"AtomicIter", 0, 1, 1, 1},
    {"Print", 1, many, 0, 0},
    {"Sleep", 0, 1, 0, 0},
    {"Fail", 0, many, 0, 0},
    {"FailTimes", 0, many, 0, 0},
    {"Append", 2, 2, 1, 1},
    {"Size", 1, 1, 1, 1},
    {"Sum", 1, 1, 1, 1},
    {"Get", 1, 2, 1, 1},
    {"Concat", 1, many, 1, 1},
    {"CreateQueue", 0, 0, 1, 1},
    {"Enqueue", 2, 2, 0, 0},
    {"Dequeue", 1, 1, 2, 2},
    {"CloseQueue", 1, 1, 0, 0},
    {"Hash", 1, 1, 1, 1},
    {"RunNet", 0, 0, 0, 0},
};

std::vector<std::string> names(const char* prefix, std::size_t n) {
  std::vector<std::string> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

// The arguments an op of `type` needs to be valid.
arguments required_args(const std::string& type) {
  if (type == "ConstantFill") return {{"value", i64{1}}};
  if (type == "Sleep") return {{"ms", i64{1}}};
  if (type == "CreateQueue") return {{"capacity", i64{1}}};
  if (type == "Get") return {{"index", i64{0}}};
  if (type == "RunNet") return {{"net", std::string("other")}};
  if (type == "FailTimes") return {{"times", i64{1}}};
  return {};
}

op_def valid_def(const arity& a) {
  return op_def{a.type, names("in", a.min_in), names("out", a.min_out), required_args(a.type), nullptr};
}

}  // namespace

// --- registry and schemas ----------------------------------------------------

TEST_CASE("register_builtin_ops registers every operator of the table, and only once", "[builtin_ops]") {
  operator_registry registry;
  REQUIRE_OK(register_builtin_ops(registry));
  std::vector<std::string> expected;
  for (const auto& a : table) expected.emplace_back(a.type);
  std::sort(expected.begin(), expected.end());
  CHECK(registry.types() == expected);

  status again = register_builtin_ops(registry);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::duplicate_operator);
  CHECK(registry.types() == expected);

  for (const auto& a : table) CHECK(operator_registry::global().find(a.type) != nullptr);
}

TEST_CASE("register_builtin_ops registers the other types when one is already taken", "[builtin_ops]") {
  operator_registry registry;
  REQUIRE_OK(registry.add(operator_schema("Print").inputs(0).outputs(0).sync([](op_context&) { return ok(); })));
  status st = register_builtin_ops(registry);
  require_error(st, errc::duplicate_operator, "operator type \"Print\" is already registered");
  CHECK(registry.types().size() == table.size());
  CHECK(registry.find("Print")->input_bounds().first == 0);  // not replaced
}

TEST_CASE("Every built-in operator declares the arity of the table and rejects other counts", "[builtin_ops]") {
  for (const auto& a : table) {
    INFO(a.type);
    auto schema = operator_registry::global().find(a.type);
    REQUIRE(schema != nullptr);
    CHECK(schema->input_bounds() == std::pair{a.min_in, a.max_in});
    CHECK(schema->output_bounds() == std::pair{a.min_out, a.max_out});
    CHECK(schema->is_async() == (std::string(a.type) == "Sleep" || std::string(a.type) == "Enqueue" ||
                                 std::string(a.type) == "Dequeue" || std::string(a.type) == "RunNet"));

    op_def def = valid_def(a);
    REQUIRE_OK(schema->validate(def));

    op_def wrong = def;
    if (a.max_in != many) {
      wrong.inputs = names("in", a.max_in + 1);
      CHECK(has_code(schema->validate(wrong), errc::arity_mismatch));
    }
    if (a.min_in > 0) {
      wrong.inputs = names("in", a.min_in - 1);
      CHECK(has_code(schema->validate(wrong), errc::arity_mismatch));
    }

    wrong = def;
    wrong.outputs = names("out", a.max_out + 1);
    CHECK(has_code(schema->validate(wrong), errc::arity_mismatch));
    if (a.min_out > 0) {
      wrong.outputs = names("out", a.min_out - 1);
      CHECK(has_code(schema->validate(wrong), errc::arity_mismatch));
    }
  }
}

TEST_CASE("A wrong number of inputs fails instantiation naming the net and op", "[builtin_ops]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{1});
  net n("body");
  n.op("Copy", {"x"}, {"y"}).op("Add", {"x", "x", "x"}, {"z"});
  auto inst = ws->create_net(n);
  require_error(inst, errc::arity_mismatch, "net \"body\" op #1 (Add): expects 2 input(s), got 3");
  CHECK(ws->find_net("body") == nullptr);

  require_error(ws->create_net(one("Dequeue", {"x"}, {"v"})), errc::arity_mismatch,
                "net \"n\" op #0 (Dequeue): expects 2 output(s), got 1");
  require_error(ws->create_net(one("Print", {}, {})), errc::arity_mismatch,
                "net \"n\" op #0 (Print): expects at least 1 input(s), got 0");
}

TEST_CASE("Every built-in operator rejects an unknown argument", "[builtin_ops]") {
  for (const auto& a : table) {
    INFO(a.type);
    op_def def = valid_def(a);
    def.args.set("bogus", i64{1});
    status st = operator_registry::global().find(a.type)->validate(def);
    require_error(st, errc::bad_argument, "unknown argument \"bogus\"");
  }
  auto ws = workspace::make();
  require_error(ws->create_net(one("Fail", {}, {}, {{"mesage", std::string("typo")}})), errc::bad_argument,
                "net \"n\" op #0 (Fail): unknown argument \"mesage\"");
}

TEST_CASE("Arguments of the wrong kind are rejected when a net is instantiated", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{1});
  ws->set("v", std::vector<i64>{1});
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", std::string("10")}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\": expected int64 or double, got string");
  require_error(ws->create_net(one("CreateQueue", {}, {"q"}, {{"capacity", 2.0}})), errc::bad_argument,
                "net \"n\" op #0 (CreateQueue): argument \"capacity\": expected int64, got double");
  require_error(ws->create_net(one("CreateCounter", {}, {"c"}, {{"init", true}})), errc::bad_argument,
                "net \"n\" op #0 (CreateCounter): argument \"init\": expected int64, got bool");
  require_error(ws->create_net(one("ResetCounter", {"x"}, {}, {{"init", std::string("1")}})), errc::bad_argument,
                "net \"n\" op #0 (ResetCounter): argument \"init\": expected int64, got string");
  require_error(ws->create_net(one("Print", {"x"}, {}, {{"prefix", i64{1}}})), errc::bad_argument,
                "net \"n\" op #0 (Print): argument \"prefix\": expected string, got int64");
  require_error(ws->create_net(one("Fail", {}, {}, {{"message", std::vector<std::string>{"a"}}})), errc::bad_argument,
                "net \"n\" op #0 (Fail): argument \"message\": expected string, got list<string>");
  require_error(ws->create_net(one("Get", {"v"}, {"e"}, {{"index", 1.0}})), errc::bad_argument,
                "net \"n\" op #0 (Get): argument \"index\": expected int64, got double");
  require_error(ws->create_net(one("Concat", {"x"}, {"s"}, {{"separator", std::vector<bool>{true}}})),
                errc::bad_argument,
                "net \"n\" op #0 (Concat): argument \"separator\": expected string, got list<bool>");
}

TEST_CASE("Missing required arguments are rejected when a net is instantiated", "[builtin_ops]") {
  auto ws = workspace::make();
  require_error(ws->create_net(one("ConstantFill", {}, {"x"})), errc::bad_argument,
                "net \"n\" op #0 (ConstantFill): missing required argument \"value\"");
  require_error(ws->create_net(one("Sleep", {}, {})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): missing argument \"ms\" (or input #0, a blob holding the duration)");
  require_error(ws->create_net(one("CreateQueue", {}, {"q"})), errc::bad_argument,
                "net \"n\" op #0 (CreateQueue): missing required argument \"capacity\"");
}

// --- ConstantFill and Copy -----------------------------------------------------

TEST_CASE("ConstantFill stores a value of each of the eight argument kinds", "[builtin_ops]") {
  auto ws = workspace::make();
  net n("fill");
  n.op("ConstantFill", {}, {"i"}, {{"value", i64{-7}}})
      .op("ConstantFill", {}, {"d"}, {{"value", 2.5}})
      .op("ConstantFill", {}, {"b"}, {{"value", true}})
      .op("ConstantFill", {}, {"s"}, {{"value", std::string("hello")}})
      .op("ConstantFill", {}, {"vi"}, {{"value", std::vector<i64>{1, 2, 3}}})
      .op("ConstantFill", {}, {"vd"}, {{"value", std::vector<double>{0.5, 1.5}}})
      .op("ConstantFill", {}, {"vb"}, {{"value", std::vector<bool>{true, false}}})
      .op("ConstantFill", {}, {"vs"}, {{"value", std::vector<std::string>{"a", "b"}}});
  net_instance& inst = instantiate(*ws, n);
  CHECK_FALSE(inst.has_async());
  REQUIRE_OK(inst.run_sync());

  CHECK(value_of<i64>(*ws, "i") == -7);
  CHECK(value_of<double>(*ws, "d") == 2.5);
  CHECK(value_of<bool>(*ws, "b") == true);
  CHECK(value_of<std::string>(*ws, "s") == "hello");
  CHECK(value_of<std::vector<i64>>(*ws, "vi") == std::vector<i64>{1, 2, 3});
  CHECK(value_of<std::vector<double>>(*ws, "vd") == std::vector<double>{0.5, 1.5});
  CHECK(value_of<std::vector<bool>>(*ws, "vb") == std::vector<bool>{true, false});
  CHECK(value_of<std::vector<std::string>>(*ws, "vs") == std::vector<std::string>{"a", "b"});

  // Each run stores the value again.
  ws->set("i", i64{100});
  REQUIRE_OK(inst.run_sync());
  CHECK(value_of<i64>(*ws, "i") == -7);
}

TEST_CASE("ConstantFill replaces an output of another type", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", std::string("text"));
  REQUIRE_OK(run_once(*ws, one("ConstantFill", {}, {"x"}, {{"value", i64{3}}})));
  CHECK(value_of<i64>(*ws, "x") == 3);
}

TEST_CASE("Copy copies built-in and other copyable values, independently of the source", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("i", i64{4});
  ws->set("s", std::string("abc"));
  ws->set("v", std::vector<double>{1.0, 2.0});
  ws->set("p", opaque_point{1, 2});
  net n("copy");
  n.op("Copy", {"i"}, {"i2"}).op("Copy", {"s"}, {"s2"}).op("Copy", {"v"}, {"v2"}).op("Copy", {"p"}, {"p2"});
  REQUIRE_OK(instantiate(*ws, n).run_sync());

  CHECK(value_of<i64>(*ws, "i2") == 4);
  CHECK(value_of<std::string>(*ws, "s2") == "abc");
  CHECK(value_of<std::vector<double>>(*ws, "v2") == std::vector<double>{1.0, 2.0});
  CHECK(value_of<opaque_point>(*ws, "p2").y == 2);

  ws->get<std::vector<double>>("v").value()->push_back(3.0);
  ws->get<opaque_point>("p").value()->y = 5;
  CHECK(value_of<std::vector<double>>(*ws, "v2").size() == 2);
  CHECK(value_of<opaque_point>(*ws, "p2").y == 2);
}

TEST_CASE("Copy of a move-only blob fails naming the input", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->create("m").emplace<std::unique_ptr<int>>(std::make_unique<int>(3));
  status st = run_once(*ws, one("Copy", {"m"}, {"c"}));
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::type_mismatch);
  CHECK_THAT(st.error().message, StartsWith("net \"n\" op #0 (Copy): input #0 \"m\": a blob of type "));
  CHECK_THAT(st.error().message, EndsWith("cannot be copied (move-only type)"));
  CHECK_FALSE(ws->find("c")->has_value());
}

TEST_CASE("Copy of an empty blob fails with blob_empty naming the input", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->create("e");
  require_error(run_once(*ws, one("Copy", {"e"}, {"c"})), errc::blob_empty,
                "net \"n\" op #0 (Copy): input #0 \"e\": the blob has no value");
}

TEST_CASE("Copy of a blob onto itself keeps its value", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("s", std::string("same"));
  REQUIRE_OK(run_once(*ws, one("Copy", {"s"}, {"s"})));
  CHECK(value_of<std::string>(*ws, "s") == "same");
}

// --- arithmetic ----------------------------------------------------------------

TEST_CASE("Add Sub Mul Div Mod compute on int64, truncating like C++", "[builtin_ops]") {
  auto ws = workspace::make();
  auto check = [&](i64 x, i64 y, i64 add, i64 sub, i64 mul, i64 div, i64 mod) {
    ws->set("x", x);
    ws->set("y", y);
    net n("arith");
    n.op("Add", {"x", "y"}, {"add"})
        .op("Sub", {"x", "y"}, {"sub"})
        .op("Mul", {"x", "y"}, {"mul"})
        .op("Div", {"x", "y"}, {"div"})
        .op("Mod", {"x", "y"}, {"mod"});
    REQUIRE_OK(run_once(*ws, n));
    CHECK(value_of<i64>(*ws, "add") == add);
    CHECK(value_of<i64>(*ws, "sub") == sub);
    CHECK(value_of<i64>(*ws, "mul") == mul);
    CHECK(value_of<i64>(*ws, "div") == div);
    CHECK(value_of<i64>(*ws, "mod") == mod);
  };
  check(17, 5, 22, 12, 85, 3, 2);
  check(-17, 5, -12, -22, -85, -3, -2);
  check(17, -5, 12, 22, -85, -3, 2);
  check(0, 3, 3, -3, 0, 0, 0);
}

TEST_CASE("Add Sub Mul Div Mod compute on double, Mod being fmod", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", 7.5);
  ws->set("y", -2.0);
  ws->set("zero", 0.0);
  net n("arith");
  n.op("Add", {"x", "y"}, {"add"})
      .op("Sub", {"x", "y"}, {"sub"})
      .op("Mul", {"x", "y"}, {"mul"})
      .op("Div", {"x", "y"}, {"div"})
      .op("Mod", {"x", "y"}, {"mod"})
      .op("Div", {"x", "zero"}, {"inf"})
      .op("Mod", {"x", "zero"}, {"nan"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<double>(*ws, "add") == 5.5);
  CHECK(value_of<double>(*ws, "sub") == 9.5);
  CHECK(value_of<double>(*ws, "mul") == -15.0);
  CHECK(value_of<double>(*ws, "div") == -3.75);
  CHECK(value_of<double>(*ws, "mod") == std::fmod(7.5, -2.0));
  CHECK(value_of<double>(*ws, "mod") == 1.5);
  CHECK(std::isinf(value_of<double>(*ws, "inf")));
  CHECK(std::isnan(value_of<double>(*ws, "nan")));
}

TEST_CASE("Div of int64 by zero fails naming the net and op", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{10});
  ws->set("zero", i64{0});
  net n("body");
  n.op("Add", {"x", "x"}, {"y"}).op("Div", {"y", "zero"}, {"q"}).op("Add", {"x", "x"}, {"after"});
  net_instance& inst = instantiate(*ws, n);
  status st = inst.run_sync();
  require_error(st, errc::op_failed, "net \"body\" op #1 (Div): division by zero");
  CHECK(value_of<i64>(*ws, "y") == 20);
  CHECK_FALSE(ws->find("q")->has_value());
  CHECK_FALSE(ws->find("after")->has_value());
}

TEST_CASE("Mod of int64 by zero fails with division by zero", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{10});
  ws->set("zero", i64{0});
  require_error(run_once(*ws, one("Mod", {"x", "zero"}, {"r"})), errc::op_failed,
                "net \"n\" op #0 (Mod): division by zero");
}

TEST_CASE("int64 arithmetic wraps around instead of overflowing", "[builtin_ops]") {
  constexpr i64 max = std::numeric_limits<i64>::max();
  constexpr i64 min = std::numeric_limits<i64>::min();
  auto ws = workspace::make();
  ws->set("max", max);
  ws->set("min", min);
  ws->set("one", i64{1});
  ws->set("minus_one", i64{-1});
  ws->set("two", i64{2});
  ws->set("v", std::vector<i64>{max, 1});
  net n("wrap");
  n.op("Add", {"max", "one"}, {"add"})
      .op("Sub", {"min", "one"}, {"sub"})
      .op("Mul", {"max", "two"}, {"mul"})
      .op("Div", {"min", "minus_one"}, {"div"})
      .op("Mod", {"min", "minus_one"}, {"mod"})
      .op("Negate", {"min"}, {"neg"})
      .op("Sum", {"v"}, {"sum"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<i64>(*ws, "add") == min);
  CHECK(value_of<i64>(*ws, "sub") == max);
  CHECK(value_of<i64>(*ws, "mul") == -2);
  CHECK(value_of<i64>(*ws, "div") == min);
  CHECK(value_of<i64>(*ws, "mod") == 0);
  CHECK(value_of<i64>(*ws, "neg") == min);
  CHECK(value_of<i64>(*ws, "sum") == min);
}

TEST_CASE("Arithmetic on mixed int64 and double fails naming both types", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("i", i64{1});
  ws->set("d", 1.0);
  require_error(run_once(*ws, one("Add", {"i", "d"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Add): inputs must have the same type, got int64 and double");
  require_error(run_once(*ws, one("Mul", {"d", "i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Mul): inputs must have the same type, got double and int64");
}

TEST_CASE("Arithmetic on a non-numeric input fails naming the input index, blob and types", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{1});
  ws->set("y", std::string("2"));
  ws->set("flag", true);
  require_error(run_once(*ws, one("Sub", {"x", "y"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Sub): input #1 \"y\": expected int64 or double, got string");
  require_error(run_once(*ws, one("Div", {"flag", "x"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Div): input #0 \"flag\": expected int64 or double, got bool");
}

TEST_CASE("Arithmetic on an empty input fails with blob_empty naming the input", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{1});
  ws->create("e");
  require_error(run_once(*ws, one("Add", {"e", "x"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (Add): input #0 \"e\": expected int64 or double, but the blob has no value");
  require_error(run_once(*ws, one("Mod", {"x", "e"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (Mod): input #1 \"e\": expected int64 or double, but the blob has no value");
}

TEST_CASE("An arithmetic output may be one of its inputs", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{0});
  ws->set("one", i64{1});
  net_instance& inst = instantiate(*ws, one("Add", {"x", "one"}, {"x"}));
  for (int i = 0; i < 5; ++i) REQUIRE_OK(inst.run_sync());
  CHECK(value_of<i64>(*ws, "x") == 5);

  ws->set("d", 1.5);
  REQUIRE_OK(run_once(*ws, one("Mul", {"d", "d"}, {"d"})));
  CHECK(value_of<double>(*ws, "d") == 2.25);
  REQUIRE_OK(run_once(*ws, one("Sub", {"one", "x"}, {"x"})));
  CHECK(value_of<i64>(*ws, "x") == -4);
}

TEST_CASE("Negate negates int64 and double and rejects other types", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("i", i64{5});
  ws->set("d", -0.5);
  ws->set("s", std::string("x"));
  REQUIRE_OK(run_once(*ws, one("Negate", {"i"}, {"i"})));
  CHECK(value_of<i64>(*ws, "i") == -5);
  REQUIRE_OK(run_once(*ws, one("Negate", {"d"}, {"nd"})));
  CHECK(value_of<double>(*ws, "nd") == 0.5);
  require_error(run_once(*ws, one("Negate", {"s"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Negate): input #0 \"s\": expected int64 or double, got string");
}

// --- comparisons and logic -------------------------------------------------------

TEST_CASE("Comparisons output a bool for int64 and double pairs", "[builtin_ops]") {
  auto ws = workspace::make();
  struct row {
    const char* type;
    bool less, equal, greater;  // result for x < y, x == y, x > y
  };
  const row rows[] = {{"LT", true, false, false}, {"LE", true, true, false},  {"GT", false, false, true},
                      {"GE", false, true, true},  {"EQ", false, true, false}, {"NE", true, false, true}};
  for (const row& r : rows) {
    INFO(r.type);
    for (int kind = 0; kind < 2; ++kind) {
      auto set = [&](i64 x, i64 y) {
        if (kind == 0) {
          ws->set("x", x);
          ws->set("y", y);
        } else {
          ws->set("x", static_cast<double>(x) / 4);
          ws->set("y", static_cast<double>(y) / 4);
        }
      };
      set(0, 0);
      net_instance& inst = instantiate(*ws, one(r.type, {"x", "y"}, {"out"}));
      set(1, 2);
      REQUIRE_OK(inst.run_sync());
      CHECK(value_of<bool>(*ws, "out") == r.less);
      set(2, 2);
      REQUIRE_OK(inst.run_sync());
      CHECK(value_of<bool>(*ws, "out") == r.equal);
      set(3, 2);
      REQUIRE_OK(inst.run_sync());
      CHECK(value_of<bool>(*ws, "out") == r.greater);
    }
  }
}

TEST_CASE("EQ and NE also compare bools and strings, the other comparisons do not", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("a", std::string("apple"));
  ws->set("b", std::string("apple"));
  ws->set("c", std::string("pear"));
  ws->set("t", true);
  ws->set("f", false);
  net n("cmp");
  n.op("EQ", {"a", "b"}, {"ab"})
      .op("EQ", {"a", "c"}, {"ac"})
      .op("NE", {"a", "c"}, {"nac"})
      .op("EQ", {"t", "f"}, {"tf"})
      .op("NE", {"t", "f"}, {"ntf"})
      .op("EQ", {"t", "t"}, {"tt"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<bool>(*ws, "ab"));
  CHECK_FALSE(value_of<bool>(*ws, "ac"));
  CHECK(value_of<bool>(*ws, "nac"));
  CHECK_FALSE(value_of<bool>(*ws, "tf"));
  CHECK(value_of<bool>(*ws, "ntf"));
  CHECK(value_of<bool>(*ws, "tt"));

  require_error(run_once(*ws, one("LT", {"a", "c"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (LT): input #0 \"a\": expected int64 or double, got string");
  require_error(run_once(*ws, one("GE", {"t", "f"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (GE): input #0 \"t\": expected int64 or double, got bool");
}

TEST_CASE("Comparisons of mismatched or unsupported types fail", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("i", i64{1});
  ws->set("d", 1.0);
  ws->set("s", std::string("1"));
  ws->set("v", std::vector<i64>{1});
  ws->create("e");
  require_error(run_once(*ws, one("EQ", {"i", "d"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (EQ): inputs must have the same type, got int64 and double");
  require_error(run_once(*ws, one("NE", {"s", "i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (NE): inputs must have the same type, got string and int64");
  require_error(run_once(*ws, one("EQ", {"v", "v"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (EQ): input #0 \"v\": expected int64, double, bool or string, got vector<int64>");
  require_error(run_once(*ws, one("LE", {"i", "e"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (LE): input #1 \"e\": expected int64 or double, but the blob has no value");
}

TEST_CASE("And Or Xor Not follow the truth tables", "[builtin_ops]") {
  auto ws = workspace::make();
  net n("logic");
  n.op("And", {"x", "y"}, {"and"})
      .op("Or", {"x", "y"}, {"or"})
      .op("Xor", {"x", "y"}, {"xor"})
      .op("Not", {"x"}, {"not"});
  ws->set("x", false);
  ws->set("y", false);
  net_instance& inst = instantiate(*ws, n);
  for (bool x : {false, true}) {
    for (bool y : {false, true}) {
      ws->set("x", x);
      ws->set("y", y);
      REQUIRE_OK(inst.run_sync());
      CHECK(value_of<bool>(*ws, "and") == (x && y));
      CHECK(value_of<bool>(*ws, "or") == (x || y));
      CHECK(value_of<bool>(*ws, "xor") == (x != y));
      CHECK(value_of<bool>(*ws, "not") == !x);
    }
  }
}

TEST_CASE("Boolean ops reject non-bool inputs naming the input", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("t", true);
  ws->set("i", i64{1});
  ws->create("e");
  require_error(run_once(*ws, one("And", {"t", "i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (And): input #1 \"i\": expected bool, got int64");
  require_error(run_once(*ws, one("Or", {"i", "t"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Or): input #0 \"i\": expected bool, got int64");
  require_error(run_once(*ws, one("Xor", {"e", "t"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (Xor): input #0 \"e\": expected bool, but the blob has no value");
  require_error(run_once(*ws, one("Not", {"i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Not): input #0 \"i\": expected bool, got int64");
}

// --- counters --------------------------------------------------------------------

TEST_CASE("CreateCounter, CountDown and ResetCounter follow Caffe2 semantics", "[builtin_ops]") {
  auto ws = workspace::make();
  REQUIRE_OK(run_once(*ws, one("CreateCounter", {}, {"c"}, {{"init", i64{2}}})));
  CHECK(value_of<i64>(*ws, "c") == 2);

  net_instance& down = instantiate(*ws, one("CountDown", {"c"}, {"done"}));
  const bool expected_done[] = {false, false, true, true};
  const i64 expected_count[] = {1, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    REQUIRE_OK(down.run_sync());
    CHECK(value_of<bool>(*ws, "done") == expected_done[i]);
    CHECK(value_of<i64>(*ws, "c") == expected_count[i]);
  }

  net reset("reset");
  reset.op("ResetCounter", {"c"}, {}, {{"init", i64{1}}});
  REQUIRE_OK(run_once(*ws, reset));
  CHECK(value_of<i64>(*ws, "c") == 1);
  REQUIRE_OK(down.run_sync());
  CHECK_FALSE(value_of<bool>(*ws, "done"));
  REQUIRE_OK(down.run_sync());
  CHECK(value_of<bool>(*ws, "done"));

  // Defaults: init = 0.
  REQUIRE_OK(run_once(*ws, one("ResetCounter", {"c"}, {})));
  CHECK(value_of<i64>(*ws, "c") == 0);
  REQUIRE_OK(run_once(*ws, one("CreateCounter", {}, {"c0"})));
  CHECK(value_of<i64>(*ws, "c0") == 0);
}

TEST_CASE("CountDown and ResetCounter reject a counter that is not an int64", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("s", std::string("3"));
  ws->create("e");
  require_error(run_once(*ws, one("CountDown", {"s"}, {"done"})), errc::type_mismatch,
                "net \"n\" op #0 (CountDown): input #0 \"s\": expected int64, got string");
  require_error(run_once(*ws, one("CountDown", {"e"}, {"done"})), errc::blob_empty,
                "net \"n\" op #0 (CountDown): input #0 \"e\": expected int64, but the blob has no value");
  require_error(run_once(*ws, one("ResetCounter", {"s"}, {})), errc::type_mismatch,
                "net \"n\" op #0 (ResetCounter): input #0 \"s\": expected int64, got string");
}

TEST_CASE("Iter and AtomicIter start at 0 and add 1 per run", "[builtin_ops]") {
  for (const char* type : {"Iter", "AtomicIter"}) {
    INFO(type);
    auto ws = workspace::make();
    net_instance& inst = instantiate(*ws, one(type, {}, {"it"}));
    CHECK(value_of<i64>(*ws, "it") == 0);  // set at instantiation
    REQUIRE_OK(inst.run_sync());
    CHECK(value_of<i64>(*ws, "it") == 1);
    REQUIRE_OK(inst.run_sync());
    REQUIRE_OK(inst.run_sync());
    CHECK(value_of<i64>(*ws, "it") == 3);

    // In place, as Caffe2 writes it: Iter(it) -> it. An existing value is kept.
    net_instance& in_place = instantiate(*ws, one(type, {"it"}, {"it"}));
    CHECK(value_of<i64>(*ws, "it") == 3);
    REQUIRE_OK(in_place.run_sync());
    CHECK(value_of<i64>(*ws, "it") == 4);

    // Emptied after instantiation: counts from 0 again.
    ws->find("it")->reset();
    REQUIRE_OK(in_place.run_sync());
    CHECK(value_of<i64>(*ws, "it") == 1);
  }
}

TEST_CASE("Iter rejects a non-int64 counter and an input that is not its output", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("s", std::string("x"));
  ws->set("a", i64{0});
  require_error(ws->create_net(one("Iter", {}, {"s"})), errc::type_mismatch,
                "net \"n\" op #0 (Iter): output #0 \"s\": expected int64, got string");
  require_error(ws->create_net(one("AtomicIter", {"a"}, {"b"})), errc::bad_argument,
                "net \"n\" op #0 (AtomicIter): input 0 \"a\" must be output 0 \"b\" (the counter is updated in place)");

  net_instance& inst = instantiate(*ws, one("Iter", {}, {"it"}));
  ws->set("it", 1.5);
  require_error(inst.run_sync(), errc::type_mismatch,
                "net \"n\" op #0 (Iter): output #0 \"it\": expected int64, got double");
}

// --- Print and display -------------------------------------------------------------

TEST_CASE("Print writes one line per input with its prefix through the print sink", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("count", i64{3});
  ws->set("ratio", 0.25);
  ws->set("name", std::string("taskgroup"));
  ws->set("list", std::vector<i64>{1, 2, 3});
  ws->set("ok", true);
  ws->create("nothing");
  captured_lines captured;
  REQUIRE_OK(run_once(
      *ws, one("Print", {"count", "ratio", "name", "list", "ok", "nothing"}, {}, {{"prefix", std::string("> ")}})));
  CHECK(captured.lines == std::vector<std::string>{"> count: 3", "> ratio: 0.25", "> name: taskgroup",
                                                   "> list: [1, 2, 3]", "> ok: true", "> nothing: <empty>"});

  captured.lines.clear();
  REQUIRE_OK(run_once(*ws, one("Print", {"count"}, {})));
  CHECK(captured.lines == std::vector<std::string>{"count: 3"});
}

TEST_CASE("set_print_sink returns the previous sink, and an empty sink means stdout", "[builtin_ops]") {
  std::vector<std::string> a_lines, b_lines;
  print_sink original = set_print_sink([&](std::string_view l) { a_lines.emplace_back(l); });
  print_line("one");
  print_sink a = set_print_sink([&](std::string_view l) { b_lines.emplace_back(l); });
  print_line("two");
  REQUIRE(a);
  a("direct");
  CHECK(a_lines == std::vector<std::string>{"one", "direct"});
  CHECK(b_lines == std::vector<std::string>{"two"});

  print_sink b = set_print_sink({});
  REQUIRE(b);
  print_sink none = set_print_sink(std::move(original));
  CHECK_FALSE(none);  // the default (stdout) is the empty sink
  CHECK(a_lines.size() == 2);
  CHECK(b_lines.size() == 1);
}

TEST_CASE("print_line may be called from several threads at once", "[builtin_ops]") {
  std::vector<std::string> lines;  // guarded by the sink's lock
  print_sink previous = set_print_sink([&](std::string_view l) { lines.emplace_back(l); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) print_line("thread " + std::to_string(t));
    });
  }
  for (auto& t : threads) t.join();
  set_print_sink(std::move(previous));
  CHECK(lines.size() == 800);
}

TEST_CASE("to_display_string renders every built-in type", "[builtin_ops]") {
  CHECK(to_display_string(blob(i64{-42})) == "-42");
  CHECK(to_display_string(blob(0.1)) == "0.1");
  CHECK(to_display_string(blob(2.0)) == "2");
  CHECK(to_display_string(blob(1e300)) == "1e+300");
  CHECK(to_display_string(blob(1.0 / 3)) == "0.3333333333333333");
  CHECK(to_display_string(blob(true)) == "true");
  CHECK(to_display_string(blob(false)) == "false");
  CHECK(to_display_string(blob(std::string("as is, \"quoted\""))) == "as is, \"quoted\"");
  CHECK(to_display_string(blob(std::vector<i64>{1, 2, 3})) == "[1, 2, 3]");
  CHECK(to_display_string(blob(std::vector<i64>{})) == "[]");
  CHECK(to_display_string(blob(std::vector<double>{0.5, -1.25})) == "[0.5, -1.25]");
  CHECK(to_display_string(blob(std::vector<bool>{true, false})) == "[true, false]");
  CHECK(to_display_string(blob(std::vector<std::string>{"a", "b"})) == "[a, b]");
  CHECK(to_display_string(blob()) == "<empty>");
  CHECK(to_display_string(blob(opaque_point{})) == "<" + type_name<opaque_point>() + ">");

  auto q = std::make_shared<blob_queue>(3);
  blob item(i64{1});
  REQUIRE(q->try_push(item));
  CHECK(to_display_string(blob(q)) == "queue(1/3)");
  q->close();
  CHECK(to_display_string(blob(q)) == "queue(1/3, closed)");
  CHECK(to_display_string(blob(queue_ptr())) == "queue(null)");
}

// --- Sleep and Fail ----------------------------------------------------------------

TEST_CASE("Sleep waits for its duration in int64 or double milliseconds", "[builtin_ops]") {
  auto ws = workspace::make();
  net n("sleepy");
  n.op("Sleep", {}, {}, {{"ms", i64{20}}}).op("Sleep", {}, {}, {{"ms", 5.5}}).op("Sleep", {}, {}, {{"ms", i64{0}}});
  net_instance& inst = instantiate(*ws, n);
  CHECK(inst.has_async());
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_OK(run_net(inst));
  CHECK(std::chrono::steady_clock::now() - start >= 25ms);

  status st = inst.run_sync();  // an asynchronous op cannot run synchronously
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::op_failed);
}

TEST_CASE("Sleep with an input reads its duration from the blob at each run", "[builtin_ops]") {
  auto ws = workspace::make();
  net n("sleepy");
  n.op("Sleep", {"delay"}, {}).op("ConstantFill", {}, {"after"}, {{"value", true}});
  ws->set<i64>("delay", 30);
  net_instance& inst = instantiate(*ws, n);
  CHECK(inst.has_async());
  auto start = std::chrono::steady_clock::now();
  REQUIRE_OK(run_net(inst));
  CHECK(std::chrono::steady_clock::now() - start >= 30ms);
  ws->set<double>("delay", 12.5);
  start = std::chrono::steady_clock::now();
  REQUIRE_OK(run_net(inst));
  CHECK(std::chrono::steady_clock::now() - start >= 12ms);

  // A long duration set after binding is what the next run waits for: it
  // is still pending when every ready handler has run, until cancelled.
  ws->set<i64>("delay", 3'600'000);
  ws->set<bool>("after", false);
  // The message says how far the wait was from its end.
  CHECK(sleep_left_ms(cancelled_while_pending(inst), "net \"sleepy\" op #0 (Sleep): ", 3'600'000) > 3'500'000);
  CHECK_FALSE(value_of<bool>(*ws, "after"));

  ws->set<i64>("delay", 0);
  REQUIRE_OK(run_net(inst));
  CHECK(value_of<bool>(*ws, "after"));
}

namespace {
// Where a callback-form run reports its end, and when.
struct recording_target final : op_completion::target {
  std::optional<status> ended;
  void complete(status st) noexcept override { ended = std::move(st); }
  void abandon() noexcept override { ended = fail(errc::op_failed, "abandoned"); }
};
}  // namespace

TEST_CASE("a Sleep of zero ends inside start, a longer one through the timer", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set<i64>("delay", 0);
  net n("sleepy");
  n.op("Sleep", {}, {}, {{"ms", i64{0}}}).op("Sleep", {"delay"}, {}).op("Sleep", {}, {}, {{"ms", 1.0}});
  net_instance& inst = instantiate(*ws, n);
  asio::io_context io;
  const asio::any_io_executor ex = io.get_executor();  // outlives the waits (sleep_until)
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("op #" << i);
    op_kernel& k = detail::net_access::kernel(inst, i);
    REQUIRE(k.has_start());
    recording_target t;
    k.start(ex, op_completion(t, {}));
    if (i < 2) {
      REQUIRE(t.ended);  // at once: no handler, no timer entry
      CHECK(t.ended->has_value());
      CHECK(io.poll() == 0);
      io.restart();  // out of work: poll() stopped it
    } else {
      CHECK_FALSE(t.ended);  // 1 ms: queued, ends when the context runs
      io.run();
      REQUIRE(t.ended);
      CHECK(t.ended->has_value());
    }
  }
}

TEST_CASE("Sleep's input must hold a duration in range when the op runs", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->create("delay");  // an empty blob: it is read at run time, not at bind time
  net n = one("Sleep", {"delay"}, {});
  net_instance& inst = instantiate(*ws, n);
  require_error(run_net(inst), errc::blob_empty,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": expected int64 or double milliseconds, but the blob "
                "has no value");
  ws->set<std::string>("delay", "10");
  require_error(run_net(inst), errc::type_mismatch,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": expected int64 or double milliseconds, got string");
  ws->set<i64>("delay", -1);
  require_error(run_net(inst), errc::bad_argument,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": the duration must be between 0 and 1e12 "
                "milliseconds, got -1");
  ws->set<i64>("delay", std::numeric_limits<i64>::max());
  require_error(run_net(inst), errc::bad_argument,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": the duration must be between 0 and 1e12 "
                "milliseconds, got 9223372036854775807");
  ws->set<double>("delay", std::nan(""));
  require_error(run_net(inst), errc::bad_argument,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": the duration must be between 0 and 1e12 "
                "milliseconds, got nan");
  ws->set<double>("delay", 2e12);
  require_error(run_net(inst), errc::bad_argument,
                "net \"n\" op #0 (Sleep): input #0 \"delay\": the duration must be between 0 and 1e12 "
                "milliseconds, got 2e+12");
  require_error(ws->create_net(one("Sleep", {"delay"}, {}, {{"ms", i64{5}}}), /*overwrite=*/true), errc::bad_argument,
                "net \"n\" op #0 (Sleep): the duration is either argument \"ms\" or input #0, not both");
}

TEST_CASE("Sleep cancelled from outside completes with errc::cancelled", "[builtin_ops]") {
  auto ws = workspace::make();
  net n("sleepy");
  n.op("Sleep", {}, {}, {{"ms", i64{60'000}}}).op("ConstantFill", {}, {"after"}, {{"value", true}});
  net_instance& inst = instantiate(*ws, n);

  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<status> st;
  asio::steady_timer later(io);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // Armed by a handler that runs once the Sleep below has started
        // (the coroutine goes on to its wait first): the cancellation
        // comes 20 ms or more after the Sleep's start, whatever the load.
        asio::post(io, [&] {
          later.expires_after(20ms);
          later.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
        });
        st = co_await inst.run();
      },
      asio::bind_cancellation_slot(signal.slot(), rethrow));

  const auto start = std::chrono::steady_clock::now();
  io.run();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  REQUIRE(st.has_value());
  CHECK(sleep_left_ms(*st, "net \"sleepy\" op #0 (Sleep): ", 60'000 - 20) > 50'000);
  CHECK(st->error().is_cancelled());
  CHECK_FALSE(ws->find("after")->has_value());
}

// The Sleeps of one execution context share one queue and one Asio timer
// (lib/ops/sleep_queue.cpp): what follows checks its ordering, cancellation,
// threads and teardown.

// A net of one Sleep of `ms`, bound in its own workspace.
struct sleeper {
  explicit sleeper(double d) : ms(d), ws(workspace::make()), n("sleep") {
    n.op("Sleep", {}, {}, {{"ms", ms}});
    inst = &instantiate(*ws, n);
  }
  double ms;
  std::shared_ptr<workspace> ws;
  net n;
  net_instance* inst = nullptr;
};

TEST_CASE("Sleeps of one context end in deadline order, whatever order they started in", "[builtin_ops][sleep]") {
  asio::io_context io;
  std::vector<sleeper> sleeps;
  for (double ms : {60.0, 20.0, 40.0, 0.0}) sleeps.emplace_back(ms);
  std::vector<double> ended;
  for (std::size_t i = 0; i < sleeps.size(); ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          status st = co_await sleeps[i].inst->run();
          REQUIRE_OK(st);
          ended.push_back(sleeps[i].ms);
        },
        rethrow);
  }
  const auto start = std::chrono::steady_clock::now();
  io.run();
  CHECK(std::chrono::steady_clock::now() - start >= 60ms);
  CHECK(ended == std::vector<double>{0.0, 20.0, 40.0, 60.0});
}

TEST_CASE("Cancelling one of several pending Sleeps ends that one only, and the loop does not wait for it",
          "[builtin_ops][sleep]") {
  asio::io_context io;
  // The cancelled one (at 10 ms) has the latest deadline (started first,
  // or last, after a Sleep that has ended), the earliest pending one (the
  // timer then fires with nothing due), or is the only one.
  const auto which = GENERATE(0, 1, 2, 3);
  const std::vector<std::vector<double>> cases = {{600'000, 30, 50}, {5, 30, 600'000}, {100, 150, 200}, {600'000}};
  const std::vector<double>& durations = cases[static_cast<std::size_t>(which)];
  const std::size_t victim = which == 1 ? 2 : 0;
  std::vector<sleeper> sleeps;
  for (double ms : durations) sleeps.emplace_back(ms);
  std::vector<std::optional<status>> results(sleeps.size());
  asio::cancellation_signal signal;
  asio::steady_timer later(io);
  for (std::size_t i = 0; i < sleeps.size(); ++i) {
    auto body = [&, i]() -> asio::awaitable<void> {
      if (i == victim) {
        // Armed once the victim's Sleep has started (as above): 10 ms or
        // more after it, whatever the load.
        asio::post(io, [&] {
          later.expires_after(10ms);
          later.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
        });
      }
      results[i] = co_await sleeps[i].inst->run();
    };
    if (i == victim) {
      asio::co_spawn(io, body, asio::bind_cancellation_slot(signal.slot(), rethrow));
    } else {
      asio::co_spawn(io, body, rethrow);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  io.run();
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  for (std::size_t i = 0; i < sleeps.size(); ++i) {
    INFO("sleep " << i << " of " << durations[i] << " ms");
    REQUIRE(results[i].has_value());
    if (i == victim) {
      // Cancelled at 10 ms or later.
      CHECK(sleep_left_ms(*results[i], "net \"sleep\" op #0 (Sleep): ", static_cast<long long>(durations[i]) - 10) >=
            0);
    } else {
      REQUIRE_OK(*results[i]);
    }
  }
}

TEST_CASE("Sleeps from several strands on a multi-threaded context all end, cancelled or not", "[builtin_ops][sleep]") {
  asio::io_context io(4);
  constexpr std::size_t count = 400;
  std::vector<sleeper> sleeps;
  sleeps.reserve(count);
  for (std::size_t i = 0; i < count; ++i) sleeps.emplace_back(static_cast<double>(i % 4));
  std::vector<asio::strand<asio::io_context::executor_type>> strands;
  for (int k = 0; k < 4; ++k) strands.push_back(asio::make_strand(io));
  // Each odd sleep is 10 minutes and cancelled from its own strand.
  std::vector<sleeper> long_sleeps;
  long_sleeps.reserve(count / 2);
  for (std::size_t i = 0; i < count / 2; ++i) long_sleeps.emplace_back(600'000.0);
  std::vector<asio::cancellation_signal> signals(count / 2);
  // Set on the coroutine's strand just before its Sleep starts (in the
  // same handler): a canceller on that strand that sees it set finds the
  // wait pending.
  std::vector<char> started(count / 2, 0);
  std::atomic<std::size_t> ok_count{0};
  std::atomic<std::size_t> cancelled_count{0};
  for (std::size_t i = 0; i < count; ++i) {
    asio::co_spawn(
        strands[i % 4],
        [&, i]() -> asio::awaitable<void> {
          if ((co_await sleeps[i].inst->run())) ++ok_count;
        },
        rethrow);
  }
  for (std::size_t i = 0; i < count / 2; ++i) {
    auto& strand = strands[i % 4];
    asio::co_spawn(
        strand,
        [&, i]() -> asio::awaitable<void> {
          started[i] = 1;
          status st = co_await long_sleeps[i].inst->run();
          if (!st && st.error().is_cancelled()) ++cancelled_count;
        },
        asio::bind_cancellation_slot(signals[i].slot(), rethrow));
    // The emit runs on the coroutine's own strand, once its wait pends.
    auto t = std::make_shared<asio::steady_timer>(strand, std::chrono::milliseconds(1 + i % 5));
    auto poke = std::make_shared<std::function<void(boost::system::error_code)>>();
    *poke = [t, poke, &signals, &started, i](boost::system::error_code) {
      if (started[i] == 0) {
        t->expires_after(1ms);
        t->async_wait(*poke);
        return;
      }
      signals[i].emit(asio::cancellation_type::terminal);
      *poke = nullptr;  // breaks the cycle
    };
    t->async_wait(*poke);
  }
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k) threads.emplace_back([&] { io.run(); });
  io.run();
  for (auto& t : threads) t.join();
  CHECK(ok_count == count);
  CHECK(cancelled_count == count / 2);
}

TEST_CASE("Sleeps of two contexts are independent: one context's waits end only with it", "[builtin_ops][sleep]") {
  asio::io_context a;
  asio::io_context b;
  sleeper on_a(1);
  sleeper on_b(1);
  std::optional<status> ra;
  std::optional<status> rb;
  asio::co_spawn(
      a, [&]() -> asio::awaitable<void> { ra = co_await on_a.inst->run(); }, rethrow);
  asio::co_spawn(
      b, [&]() -> asio::awaitable<void> { rb = co_await on_b.inst->run(); }, rethrow);
  a.run();
  REQUIRE(ra.has_value());
  REQUIRE_OK(*ra);
  CHECK_FALSE(rb.has_value());
  b.run();
  REQUIRE(rb.has_value());
  REQUIRE_OK(*rb);
}

TEST_CASE("A context destroyed with Sleeps pending abandons them: no completion runs, nothing leaks",
          "[builtin_ops][sleep]") {
  std::vector<sleeper> sleeps;
  for (double ms : {600'000.0, 0.0, 600'000.0}) sleeps.emplace_back(ms);
  std::vector<std::optional<status>> results(sleeps.size());
  {
    asio::io_context io;
    for (std::size_t i = 0; i < sleeps.size(); ++i) {
      asio::co_spawn(
          io, [&, i]() -> asio::awaitable<void> { results[i] = co_await sleeps[i].inst->run(); }, rethrow);
    }
    // Starts every wait; the 0 ms one may have come due, not yet delivered.
    (void)io.poll_one();
    (void)io.poll_one();
    (void)io.poll_one();
  }
  CHECK_FALSE(results[0].has_value());
  CHECK_FALSE(results[2].has_value());
  // The instances are still usable on a new context.
  asio::io_context again;
  std::optional<status> r;
  sleeper quick(1);
  asio::co_spawn(
      again, [&]() -> asio::awaitable<void> { r = co_await quick.inst->run(); }, rethrow);
  again.run();
  REQUIRE(r.has_value());
  REQUIRE_OK(*r);
}

TEST_CASE("Sleep rejects a negative or absurd duration at instantiation", "[builtin_ops]") {
  auto ws = workspace::make();
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", i64{-1}}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\" must be between 0 and 1e12 milliseconds, got -1");
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", std::nan("")}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\" must be between 0 and 1e12 milliseconds, got nan");
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", 1e300}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\" must be between 0 and 1e12 milliseconds, got 1e+300");
  // An int64 is named as given, not as its nearest double.
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", std::numeric_limits<i64>::max()}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\" must be between 0 and 1e12 milliseconds, got "
                "9223372036854775807");
  require_error(ws->create_net(one("Sleep", {}, {}, {{"ms", i64{1'000'000'000'001}}})), errc::bad_argument,
                "net \"n\" op #0 (Sleep): argument \"ms\" must be between 0 and 1e12 milliseconds, got "
                "1000000000001");
}

TEST_CASE("Fail fails with errc::op_failed and its message", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("x", i64{1});
  require_error(run_once(*ws, one("Fail", {}, {})), errc::op_failed, "net \"n\" op #0 (Fail): Fail operator");
  require_error(run_once(*ws, one("Fail", {"x", "x"}, {}, {{"message", std::string("boom")}})), errc::op_failed,
                "net \"n\" op #0 (Fail): boom");
}

// --- vectors -------------------------------------------------------------------------

TEST_CASE("Append adds an element or a vector to a vector of each element type", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("vi", std::vector<i64>{1, 2});
  ws->set("i", i64{3});
  ws->set("more_i", std::vector<i64>{4, 5});
  ws->set("vd", std::vector<double>{0.5});
  ws->set("d", 1.5);
  ws->set("vb", std::vector<bool>{true});
  ws->set("b", false);
  ws->set("vs", std::vector<std::string>{"a"});
  ws->set("s", std::string("b"));
  net n("append");
  n.op("Append", {"vi", "i"}, {"vi_i"})
      .op("Append", {"vi", "more_i"}, {"vi_more"})
      .op("Append", {"vd", "d"}, {"vd_d"})
      .op("Append", {"vb", "b"}, {"vb_b"})
      .op("Append", {"vs", "s"}, {"vs_s"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<std::vector<i64>>(*ws, "vi_i") == std::vector<i64>{1, 2, 3});
  CHECK(value_of<std::vector<i64>>(*ws, "vi_more") == std::vector<i64>{1, 2, 4, 5});
  CHECK(value_of<std::vector<i64>>(*ws, "vi") == std::vector<i64>{1, 2});  // input untouched
  CHECK(value_of<std::vector<double>>(*ws, "vd_d") == std::vector<double>{0.5, 1.5});
  CHECK(value_of<std::vector<bool>>(*ws, "vb_b") == std::vector<bool>{true, false});
  CHECK(value_of<std::vector<std::string>>(*ws, "vs_s") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("Append to a blob with no value starts from an empty vector of the element's type", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->create("acc");
  ws->create("acc2");
  ws->set("i", i64{7});
  ws->set("words", std::vector<std::string>{"x", "y"});
  REQUIRE_OK(run_once(*ws, one("Append", {"acc", "i"}, {"out"})));
  CHECK(value_of<std::vector<i64>>(*ws, "out") == std::vector<i64>{7});
  CHECK_FALSE(ws->find("acc")->has_value());
  REQUIRE_OK(run_once(*ws, one("Append", {"acc2", "words"}, {"acc2"})));
  CHECK(value_of<std::vector<std::string>>(*ws, "acc2") == std::vector<std::string>{"x", "y"});
}

TEST_CASE("Append into its first input grows the vector in place without copying it", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("v", std::vector<i64>{});
  ws->get<std::vector<i64>>("v").value()->reserve(16);
  const i64* data = ws->get<std::vector<i64>>("v").value()->data();
  ws->set("x", i64{0});
  net n("loop");
  n.op("Append", {"v", "x"}, {"v"}).op("Iter", {"x"}, {"x"});
  net_instance& inst = instantiate(*ws, n);
  for (int i = 0; i < 10; ++i) REQUIRE_OK(inst.run_sync());
  const auto& v = *ws->get<std::vector<i64>>("v").value();
  CHECK(v == std::vector<i64>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(v.data() == data);
}

TEST_CASE("Append of a vector to itself doubles it", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("v", std::vector<std::string>{"a", "b"});
  REQUIRE_OK(run_once(*ws, one("Append", {"v", "v"}, {"w"})));
  CHECK(value_of<std::vector<std::string>>(*ws, "w") == std::vector<std::string>{"a", "b", "a", "b"});
  REQUIRE_OK(run_once(*ws, one("Append", {"v", "v"}, {"v"})));
  CHECK(value_of<std::vector<std::string>>(*ws, "v") == std::vector<std::string>{"a", "b", "a", "b"});
  ws->set("bits", std::vector<bool>{true, false, true});
  REQUIRE_OK(run_once(*ws, one("Append", {"bits", "bits"}, {"bits"})));
  CHECK(value_of<std::vector<bool>>(*ws, "bits") == std::vector<bool>{true, false, true, true, false, true});
}

TEST_CASE("Append into its second input stores the head followed by the old value", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("head", std::vector<double>{1.0});
  ws->set("tail", std::vector<double>{2.0, 3.0});
  ws->set("e", 4.0);
  REQUIRE_OK(run_once(*ws, one("Append", {"head", "tail"}, {"tail"})));
  CHECK(value_of<std::vector<double>>(*ws, "tail") == std::vector<double>{1.0, 2.0, 3.0});
  REQUIRE_OK(run_once(*ws, one("Append", {"head", "e"}, {"e"})));
  CHECK(value_of<std::vector<double>>(*ws, "e") == std::vector<double>{1.0, 4.0});
}

TEST_CASE("Append rejects mismatched elements, non-vector heads and empty elements", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("v", std::vector<i64>{1});
  ws->set("s", std::string("x"));
  ws->set("vd", std::vector<double>{1.0});
  ws->set("i", i64{1});
  ws->set("p", opaque_point{});
  ws->create("e");
  require_error(run_once(*ws, one("Append", {"v", "s"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Append): input #1 \"s\": expected int64 or vector<int64>, got string");
  require_error(run_once(*ws, one("Append", {"v", "vd"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Append): input #1 \"vd\": expected int64 or vector<int64>, got vector<double>");
  require_error(run_once(*ws, one("Append", {"i", "i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Append): input #0 \"i\": expected a vector, got int64");
  require_error(run_once(*ws, one("Append", {"v", "e"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (Append): input #1 \"e\": expected int64 or vector<int64>, but the blob has no value");
  require_error(run_once(*ws, one("Append", {"e", "e"}, {"r"})), errc::blob_empty,
                "net \"n\" op #0 (Append): input #1 \"e\": expected int64, double, bool, string or a vector of them, "
                "but the blob has no value");
  status st = run_once(*ws, one("Append", {"e", "p"}, {"r"}));
  require_error(st, errc::type_mismatch,
                "net \"n\" op #0 (Append): input #1 \"p\": expected int64, double, bool, string or a vector of them, "
                "got " +
                    type_name<opaque_point>());
  CHECK(value_of<std::vector<i64>>(*ws, "v") == std::vector<i64>{1});
}

TEST_CASE("Size counts the elements of a vector or the characters of a string", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("vi", std::vector<i64>{1, 2, 3});
  ws->set("vd", std::vector<double>{});
  ws->set("vb", std::vector<bool>{true, false});
  ws->set("vs", std::vector<std::string>{"a"});
  ws->set("s", std::string("hello"));
  ws->set("i", i64{5});
  net n("size");
  n.op("Size", {"vi"}, {"n_vi"})
      .op("Size", {"vd"}, {"n_vd"})
      .op("Size", {"vb"}, {"n_vb"})
      .op("Size", {"vs"}, {"n_vs"})
      .op("Size", {"s"}, {"n_s"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<i64>(*ws, "n_vi") == 3);
  CHECK(value_of<i64>(*ws, "n_vd") == 0);
  CHECK(value_of<i64>(*ws, "n_vb") == 2);
  CHECK(value_of<i64>(*ws, "n_vs") == 1);
  CHECK(value_of<i64>(*ws, "n_s") == 5);
  require_error(run_once(*ws, one("Size", {"i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Size): input #0 \"i\": expected a vector or string, got int64");
}

TEST_CASE("Sum adds the elements of a vector<int64> or vector<double>", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("vi", std::vector<i64>{1, 2, 3, -10});
  ws->set("vd", std::vector<double>{0.5, 0.25});
  ws->set("none", std::vector<i64>{});
  ws->set("vs", std::vector<std::string>{"a"});
  net n("sum");
  n.op("Sum", {"vi"}, {"si"}).op("Sum", {"vd"}, {"sd"}).op("Sum", {"none"}, {"s0"});
  REQUIRE_OK(run_once(*ws, n));
  CHECK(value_of<i64>(*ws, "si") == -4);
  CHECK(value_of<double>(*ws, "sd") == 0.75);
  CHECK(value_of<i64>(*ws, "s0") == 0);
  require_error(run_once(*ws, one("Sum", {"vs"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Sum): input #0 \"vs\": expected vector<int64> or vector<double>, got vector<string>");
}

TEST_CASE("Get reads the element at the index argument or at an int64 input", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("vi", std::vector<i64>{10, 20, 30});
  ws->set("vb", std::vector<bool>{false, true});
  ws->set("vs", std::vector<std::string>{"a", "b", "c"});
  ws->set("vd", std::vector<double>{0.5});
  ws->set("k", i64{2});
  net n("get");
  n.op("Get", {"vi"}, {"first"}, {{"index", i64{0}}})
      .op("Get", {"vi", "k"}, {"third"})
      .op("Get", {"vb"}, {"b"}, {{"index", i64{1}}})
      .op("Get", {"vs", "k"}, {"s"})
      .op("Get", {"vd"}, {"d"}, {{"index", i64{0}}});
  net_instance& inst = instantiate(*ws, n);
  REQUIRE_OK(inst.run_sync());
  CHECK(value_of<i64>(*ws, "first") == 10);
  CHECK(value_of<i64>(*ws, "third") == 30);
  CHECK(value_of<bool>(*ws, "b") == true);
  CHECK(value_of<std::string>(*ws, "s") == "c");
  CHECK(value_of<double>(*ws, "d") == 0.5);

  ws->set("k", i64{1});
  REQUIRE_OK(inst.run_sync());
  CHECK(value_of<i64>(*ws, "third") == 20);
  CHECK(value_of<std::string>(*ws, "s") == "b");

  // Into its own input: the vector is replaced by the element.
  REQUIRE_OK(run_once(*ws, one("Get", {"vs"}, {"vs"}, {{"index", i64{2}}})));
  CHECK(value_of<std::string>(*ws, "vs") == "c");
}

TEST_CASE("Get fails when the index is out of range, negative indexes included", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("v", std::vector<i64>{1, 2, 3});
  ws->set("k", i64{-1});
  ws->set("d", 1.0);
  require_error(run_once(*ws, one("Get", {"v"}, {"e"}, {{"index", i64{7}}})), errc::op_failed,
                "net \"n\" op #0 (Get): index 7 out of range for a vector of size 3");
  require_error(run_once(*ws, one("Get", {"v"}, {"e"}, {{"index", i64{3}}})), errc::op_failed,
                "net \"n\" op #0 (Get): index 3 out of range for a vector of size 3");
  require_error(run_once(*ws, one("Get", {"v", "k"}, {"e"})), errc::op_failed,
                "net \"n\" op #0 (Get): index -1 out of range for a vector of size 3");
  require_error(run_once(*ws, one("Get", {"v"}, {"e"}, {{"index", i64{-3}}})), errc::op_failed,
                "net \"n\" op #0 (Get): index -3 out of range for a vector of size 3");
  require_error(run_once(*ws, one("Get", {"v", "d"}, {"e"})), errc::type_mismatch,
                "net \"n\" op #0 (Get): input #1 \"d\": expected int64, got double");
  require_error(run_once(*ws, one("Get", {"d"}, {"e"}, {{"index", i64{0}}})), errc::type_mismatch,
                "net \"n\" op #0 (Get): input #0 \"d\": expected a vector, got double");
  CHECK_FALSE(ws->find("e")->has_value());
}

TEST_CASE("Get needs exactly one index source, checked at instantiation", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("v", std::vector<i64>{1});
  ws->set("k", i64{0});
  require_error(ws->create_net(one("Get", {"v"}, {"e"})), errc::bad_argument,
                "net \"n\" op #0 (Get): missing argument \"index\" (or an int64 input 1)");
  require_error(ws->create_net(one("Get", {"v", "k"}, {"e"}, {{"index", i64{0}}})), errc::bad_argument,
                "net \"n\" op #0 (Get): give the index either as argument \"index\" or as input 1, not both");
}

// --- Concat ----------------------------------------------------------------------------

TEST_CASE("Concat joins strings with an optional separator", "[builtin_ops]") {
  auto ws = workspace::make();
  ws->set("a", std::string("x"));
  ws->set("b", std::string("y"));
  ws->set("c", std::string(""));
  ws->set("i", i64{1});
  net n("concat");
  n.op("Concat", {"a", "b", "c"}, {"plain"})
      .op("Concat", {"a", "b", "c"}, {"sep"}, {{"separator", std::string(", ")}})
      .op("Concat", {"a"}, {"single"}, {{"separator", std::string("-")}});
  net_instance& inst = instantiate(*ws, n);
  REQUIRE_OK(inst.run_sync());
  CHECK(value_of<std::string>(*ws, "plain") == "xy");
  CHECK(value_of<std::string>(*ws, "sep") == "x, y, ");
  CHECK(value_of<std::string>(*ws, "single") == "x");

  // Into one of its inputs.
  REQUIRE_OK(run_once(*ws, one("Concat", {"a", "b", "a"}, {"a"}, {{"separator", std::string("+")}})));
  CHECK(value_of<std::string>(*ws, "a") == "x+y+x");

  require_error(run_once(*ws, one("Concat", {"a", "i"}, {"r"})), errc::type_mismatch,
                "net \"n\" op #0 (Concat): input #1 \"i\": expected string, got int64");
}

// --- queue ops -----------------------------------------------------------------------

TEST_CASE("CreateQueue rejects a capacity below 1 at instantiation", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  require_error(ws->create_net(one("CreateQueue", {}, {"q"}, {{"capacity", i64{0}}})), errc::bad_argument,
                "net \"n\" op #0 (CreateQueue): argument \"capacity\" must be at least 1, got 0");
  require_error(ws->create_net(one("CreateQueue", {}, {"q"}, {{"capacity", i64{-3}}})), errc::bad_argument,
                "net \"n\" op #0 (CreateQueue): argument \"capacity\" must be at least 1, got -3");
}

TEST_CASE("Queue ops move copies of values through a queue until it is closed", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  REQUIRE_OK(run_once(*ws, one("CreateQueue", {}, {"q"}, {{"capacity", i64{4}}})));
  auto q = value_of<queue_ptr>(*ws, "q");
  REQUIRE(q != nullptr);
  CHECK(q->capacity() == 4);

  ws->set("v", std::vector<i64>{1});
  net_instance& enqueue = instantiate(*ws, named("enqueue", "Enqueue", {"q", "v"}, {}));
  CHECK(enqueue.has_async());
  REQUIRE_OK(run_net(enqueue));
  ws->get<std::vector<i64>>("v").value()->push_back(2);  // the queue holds a copy
  REQUIRE_OK(run_net(enqueue));
  CHECK(q->size() == 2);

  net_instance& dequeue = instantiate(*ws, named("dequeue", "Dequeue", {"q"}, {"item", "ok"}));
  REQUIRE_OK(run_net(dequeue));
  CHECK(value_of<bool>(*ws, "ok"));
  CHECK(value_of<std::vector<i64>>(*ws, "item") == std::vector<i64>{1});

  REQUIRE_OK(run_once(*ws, one("CloseQueue", {"q"}, {})));
  CHECK(q->closed());
  REQUIRE_OK(run_net(dequeue));  // drains what is left
  CHECK(value_of<bool>(*ws, "ok"));
  CHECK(value_of<std::vector<i64>>(*ws, "item") == std::vector<i64>{1, 2});
  REQUIRE_OK(run_net(dequeue));  // closed and drained: value untouched
  CHECK_FALSE(value_of<bool>(*ws, "ok"));
  CHECK(value_of<std::vector<i64>>(*ws, "item") == std::vector<i64>{1, 2});

  // A second CreateQueue run makes a new queue.
  REQUIRE_OK(run_once(*ws, one("CreateQueue", {}, {"q"}, {{"capacity", i64{4}}})));
  CHECK(value_of<queue_ptr>(*ws, "q") != q);
}

TEST_CASE("A waiting Enqueue cancelled says the queue was full", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  ws->set("v", i64{1});
  net fill("fill");
  fill.op("CreateQueue", {}, {"q"}, {{"capacity", i64{1}}}).op("Enqueue", {"q", "v"}, {});
  REQUIRE_OK(run_once(*ws, fill));
  net_instance& enqueue = instantiate(*ws, one("Enqueue", {"q", "v"}, {}));
  require_error(cancelled_while_pending(enqueue), errc::cancelled,
                "net \"n\" op #0 (Enqueue): input #0 \"q\": cancelled while waiting for room: the queue is full (1 of "
                "1)");
}

TEST_CASE("Enqueue after CloseQueue fails with errc::queue_closed", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  ws->set("v", i64{1});
  net n("pipeline");
  n.op("CreateQueue", {}, {"q"}, {{"capacity", i64{1}}}).op("CloseQueue", {"q"}, {}).op("Enqueue", {"q", "v"}, {});
  status st = run_once(*ws, n);
  require_error(st, errc::queue_closed, "net \"pipeline\" op #2 (Enqueue): input #0 \"q\": the queue is closed");
}

TEST_CASE("Enqueue rejects move-only and empty values naming the input", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  ws->set("q", std::make_shared<blob_queue>(2));
  ws->create("m").emplace<std::unique_ptr<int>>();
  ws->create("e");
  status st = run_once(*ws, one("Enqueue", {"q", "m"}, {}));
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::type_mismatch);
  CHECK_THAT(st.error().message, StartsWith("net \"n\" op #0 (Enqueue): input #1 \"m\": a blob of type "));
  CHECK_THAT(st.error().message, Contains("cannot be copied"));
  require_error(run_once(*ws, one("Enqueue", {"q", "e"}, {})), errc::blob_empty,
                "net \"n\" op #0 (Enqueue): input #1 \"e\": the blob has no value");
  CHECK(value_of<queue_ptr>(*ws, "q")->size() == 0);
}

TEST_CASE("Queue ops reject an input that is not a queue", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  ws->set("x", i64{1});
  ws->create("e");
  ws->set("null", queue_ptr());
  require_error(run_once(*ws, one("Enqueue", {"x", "x"}, {})), errc::type_mismatch,
                "net \"n\" op #0 (Enqueue): input #0 \"x\": expected queue, got int64");
  require_error(run_once(*ws, one("Dequeue", {"e"}, {"v", "ok"})), errc::blob_empty,
                "net \"n\" op #0 (Dequeue): input #0 \"e\": expected queue, but the blob has no value");
  require_error(run_once(*ws, one("CloseQueue", {"x"}, {})), errc::type_mismatch,
                "net \"n\" op #0 (CloseQueue): input #0 \"x\": expected queue, got int64");
  require_error(run_once(*ws, one("CloseQueue", {"null"}, {})), errc::blob_empty,
                "net \"n\" op #0 (CloseQueue): input #0 \"null\": the queue blob is null");
}

TEST_CASE("An Enqueue waiting on a full queue keeps the queue alive when its blob is overwritten",
          "[builtin_ops][queue]") {
  auto ws = workspace::make();
  auto q = std::make_shared<blob_queue>(1);
  std::weak_ptr<blob_queue> weak = q;
  ws->set("q", std::move(q));
  ws->set("v", i64{1});
  net_instance& enqueue = instantiate(*ws, one("Enqueue", {"q", "v"}, {}));
  REQUIRE_OK(run_net(enqueue));

  asio::io_context io;
  std::optional<status> st;
  ws->set("v", i64{2});
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { st = co_await enqueue.run(); }, rethrow);
  io.poll();
  CHECK_FALSE(st.has_value());  // waiting: the queue is full

  ws->set("q", std::string("gone"));
  CHECK(weak.use_count() == 1);  // only the waiting Enqueue holds the queue now
  auto alive = weak.lock();
  REQUIRE(alive != nullptr);
  auto first = alive->try_pop();
  REQUIRE(first.has_value());
  CHECK(first->as<i64>() == 1);
  io.run();
  REQUIRE(st.has_value());
  REQUIRE_OK(*st);
  CHECK(alive->size() == 1);
  CHECK(alive->try_pop()->as<i64>() == 2);
  alive.reset();
  CHECK(weak.expired());
}

TEST_CASE("A waiting Dequeue cancelled from outside completes with errc::cancelled", "[builtin_ops][queue]") {
  auto ws = workspace::make();
  REQUIRE_OK(run_once(*ws, one("CreateQueue", {}, {"q"}, {{"capacity", i64{1}}})));
  ws->set("ok", true);
  net_instance& dequeue = instantiate(*ws, one("Dequeue", {"q"}, {"item", "ok"}));

  const status st = cancelled_while_pending(dequeue);
  REQUIRE_FALSE(st);
  require_error(st, errc::cancelled,
                "net \"n\" op #0 (Dequeue): input #0 \"q\": cancelled while waiting for an item: the queue is empty "
                "(0 of 1, open)");
  CHECK(value_of<bool>(*ws, "ok"));  // outputs untouched
  CHECK_FALSE(ws->find("item")->has_value());
}
