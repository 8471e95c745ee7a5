#include <taskgroup/net.hpp>

#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/workspace.hpp>

#include "support/run.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace taskgroup;
using i64 = std::int64_t;
namespace asio = boost::asio;

TEST_CASE("a net runs its ops in order", "[net]") {
  auto ws = workspace::make("w");
  net n("body");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{2}}});
  n.op("ConstantFill", {}, {"y"}, {{"value", i64{3}}});
  n.op("Mul", {"x", "y"}, {"z"});
  n.op("Add", {"z", "x"}, {"z"});
  auto inst = ws->create_net(n).value();
  CHECK(inst->size() == 4);
  CHECK_FALSE(inst->has_async());
  REQUIRE(inst->run_sync());
  CHECK(*ws->get<i64>("z").value() == 8);
}

TEST_CASE("instantiation fails on an input that does not exist", "[net]") {
  auto ws = workspace::make("w");
  ws->set("a", i64{1});
  net n("body");
  n.op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  n.op("Add", {"a", "one"}, {"b"});
  n.op("Add", {"b", "x"}, {"c"});
  auto r = ws->create_net(n);
  REQUIRE(r.has_error());
  CHECK(r.error().code == errc::blob_not_found);
  CHECK(r.error().message == "net \"body\" op #2 (Add): input blob \"x\" does not exist");
  CHECK(ws->find_net("body") == nullptr);
}

TEST_CASE("an unknown operator type is an error naming net and op", "[net][operator]") {
  auto ws = workspace::make("w");
  net n("body");
  n.op("NoSuchOp", {}, {"x"});
  auto r = ws->create_net(n);
  REQUIRE(r.has_error());
  CHECK(r.error().code == errc::unknown_operator);
  CHECK(r.error().message == "net \"body\" op #0 (NoSuchOp): unknown operator type \"NoSuchOp\"");
  CHECK(n.validate(operator_registry::global()).error().code == errc::unknown_operator);
}

TEST_CASE("the first failing op stops the net with net, index, type and message", "[net]") {
  auto ws = workspace::make("w");
  net n("body");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}});
  n.op("Fail", {}, {}, {{"message", std::string("boom")}});
  n.op("ConstantFill", {}, {"after"}, {{"value", i64{1}}});
  auto inst = ws->create_net(n).value();
  auto st = inst->run_sync();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::op_failed);
  CHECK(st.error().message == "net \"body\" op #1 (Fail): boom");
  CHECK_FALSE(ws->find("after")->has_value());
}

TEST_CASE("wrong arity, unknown and mistyped arguments are rejected at binding", "[net][operator]") {
  auto ws = workspace::make("w");
  ws->set("a", i64{1});
  SECTION("too many inputs") {
    net n("n");
    n.op("Negate", {"a", "a"}, {"b"});
    auto r = ws->create_net(n);
    CHECK(r.error().code == errc::arity_mismatch);
    CHECK(r.error().message == "net \"n\" op #0 (Negate): expects 1 input(s), got 2");
  }
  SECTION("unknown argument") {
    net n("n");
    n.op("Negate", {"a"}, {"b"}, {{"scale", 2.0}});
    auto r = ws->create_net(n);
    CHECK(r.error().code == errc::bad_argument);
    CHECK(r.error().message == "net \"n\" op #0 (Negate): unknown argument \"scale\"");
  }
  SECTION("argument of the wrong kind") {
    net n("n");
    n.op("Fail", {}, {}, {{"message", i64{3}}});
    auto r = ws->create_net(n);
    CHECK(r.error().code == errc::bad_argument);
    CHECK(r.error().message == "net \"n\" op #0 (Fail): argument \"message\": expected string, got int64");
  }
}

TEST_CASE("arguments are typed and report the expected kind", "[operator]") {
  arguments args{{"n", i64{3}}, {"x", 1.5}, {"flag", true}, {"s", std::string("t")}, {"list", std::vector<i64>{1, 2}}};
  CHECK(args.get<i64>("n").value() == 3);
  CHECK(args.get<double>("x").value() == 1.5);
  CHECK(args.get<bool>("flag").value());
  CHECK(args.get<std::string>("s").value() == "t");
  CHECK(args.get<std::vector<i64>>("list").value().size() == 2);
  CHECK(args.get_or<i64>("missing", 9).value() == 9);
  CHECK(args.get<i64>("missing").error().message == "missing argument \"missing\"");
  CHECK(args.get<i64>("s").error().message == "argument \"s\": expected int64, got string");
  args.set("n", i64{4});
  CHECK(args.size() == 5);
  CHECK(args.get<i64>("n").value() == 4);
}

TEST_CASE("a registry rejects a second registration of a type", "[operator]") {
  operator_registry reg;
  REQUIRE(reg.add(operator_schema("Mine").inputs(0).outputs(0).sync([](op_context&) { return ok(); })));
  auto again = reg.add(operator_schema("Mine"));
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::duplicate_operator);
  CHECK(reg.types() == std::vector<std::string>{"Mine"});
  CHECK(reg.get("Other").error().code == errc::unknown_operator);
}

TEST_CASE("user operators registered in a registry run as sync and async kernels", "[operator][net]") {
  operator_registry reg(operator_registry::global());
  REQUIRE(reg.add(operator_schema("Twice").inputs(1).outputs(1).sync([](op_context& ctx) {
    ctx.set_output(0, 2 * ctx.input<i64>(0));
    return ok();
  })));
  REQUIRE(reg.add(operator_schema("LaterInc")
                      .inputs(1)
                      .outputs(1)
                      .required_arg("by", argument_kind::int64)
                      .async([](op_context& ctx) -> asio::awaitable<status> {
                        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
                        ctx.set_output(0, ctx.input<i64>(0) + ctx.arg<i64>("by"));
                        co_return ok();
                      })));
  auto ws = workspace::make("w");
  ws->set("x", i64{5});
  net n("n");
  n.op("Twice", {"x"}, {"y"});
  n.op("LaterInc", {"y"}, {"y"}, {{"by", i64{1}}});
  n.op("Twice", {"y"}, {"z"});
  auto inst = ws->create_net(n, reg).value();
  CHECK(inst->has_async());
  REQUIRE(test::run(inst->run()));
  CHECK(*ws->get<i64>("z").value() == 22);
  auto st = inst->run_sync();
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message, Catch::Contains("op #1 (LaterInc)"));
}

TEST_CASE("inline lambda ops run and make the net unserializable", "[net][operator]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{20});
  net n("n");
  n.op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  n.lambda("halve", {"x"}, {"x"}, [](op_context& ctx) {
    ctx.output<i64>(0) /= 2;
    return ok();
  });
  n.lambda("async_add_one", {"x", "one"}, {"x"}, [](op_context& ctx) -> asio::awaitable<status> {
    ctx.output<i64>(0) += ctx.input<i64>(1);
    co_return ok();
  });
  CHECK(n.first_inline_op() == std::optional<std::string>("halve"));
  CHECK(n.validate(operator_registry::global()));
  auto inst = ws->create_net(n).value();
  REQUIRE(test::run(inst->run()));
  CHECK(*ws->get<i64>("x").value() == 11);
  net plain("p");
  plain.op("ConstantFill", {}, {"a"}, {{"value", i64{1}}});
  CHECK_FALSE(plain.first_inline_op());
}

TEST_CASE("exceptions thrown by ops become the op's error", "[net]") {
  auto ws = workspace::make("w");
  ws->set("s", std::string("text"));
  net n("n");
  n.lambda("reads_int", {"s"}, {}, [](op_context& ctx) {
    (void)ctx.input<i64>(0);
    return ok();
  });
  n.lambda("throws", {}, {}, [](op_context&) -> status { throw std::runtime_error("bad thing"); });
  auto inst = ws->create_net(n).value();
  auto st = inst->run_sync();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::type_mismatch);
  CHECK(st.error().message == "net \"n\" op #0 (reads_int): input #0 \"s\": expected int64, got string");

  net m("m");
  m.lambda("throws", {}, {}, [](op_context&) -> status { throw std::runtime_error("bad thing"); });
  auto st2 = ws->create_net(m).value()->run_sync();
  CHECK(st2.error().message == "net \"m\" op #0 (throws): bad thing");
  CHECK(st2.error().code == errc::op_failed);
}

TEST_CASE("a net instance is a snapshot of its definition", "[net]") {
  auto ws = workspace::make("w");
  net n("n");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}});
  auto inst = ws->create_net(n).value();
  n.op("Fail", {}, {});
  CHECK(inst->size() == 1);
  CHECK(inst->run_sync());
  net copy = n;
  CHECK(copy.same(n));
  CHECK_FALSE(net("n").same(n));
}

TEST_CASE("instances share one frozen copy of their net until it is edited", "[net]") {
  auto ws = workspace::make("w");
  auto other = workspace::make("v");
  net n("n");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}});
  auto first = n.freeze();
  CHECK(n.freeze() == first);  // made once
  auto a = ws->create_net(n).value();
  auto b = other->create_net(n).value();
  CHECK(&a->ops() == &first->ops);
  CHECK(&b->ops() == &first->ops);
  CHECK(a->name() == "n");
  n.op("ConstantFill", {}, {"y"}, {{"value", i64{2}}});  // an edit: a new copy for later bindings
  auto second = n.freeze();
  CHECK(second != first);
  CHECK(second->ops.size() == 2);
  CHECK(first->ops.size() == 1);
  CHECK(a->size() == 1);
  auto third = workspace::make("u");
  auto c = third->create_net(n).value();
  CHECK(c->size() == 2);
}

TEST_CASE("freezing a net copies nothing until the net is edited (copy on write)", "[net]") {
  net n("n");
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}});
  const std::vector<op_def>* own = &n.ops();
  auto first = n.freeze();
  CHECK(&first->ops == own);  // the definition itself, not a copy
  CHECK(&n.ops() == own);
  // The first edit after a freeze copies; the frozen definition keeps its op.
  n.op("ConstantFill", {}, {"y"}, {{"value", i64{2}}});
  CHECK(&n.ops() != own);
  CHECK(first->ops.size() == 1);
  CHECK(first->ops[0].outputs == std::vector<std::string>{"x"});
  CHECK(n.ops().size() == 2);
  // Edits with no freeze in between write in place.
  const std::vector<op_def>* copied = &n.ops();
  n.op("ConstantFill", {}, {"z"}, {{"value", i64{3}}});
  CHECK(&n.ops() == copied);
  CHECK(n.ops().size() == 3);
  // A copy of the handle sees the edits; a freeze made from it is shared.
  net alias = n;
  CHECK(alias.ops().size() == 3);
  CHECK(alias.freeze() == n.freeze());
  CHECK(first->ops.size() == 1);
}

namespace {
// Counts which path of a fast kernel ran.
struct path_counts {
  int fast = 0;
  int general = 0;
};

// "Inc": y = x + 1 for an int64 `x` and an `y` already holding an int64 on
// the fast path (state: three pointers, so it is copied into the net's run
// array); a double `x` or a fresh `y` on the general path; a string is an
// error. "IncFar" does the same with a fourth captured pointer, so its fast
// path is reached through the kernel.
operator_registry fast_registry(path_counts* counts, path_counts* far_counts) {
  operator_registry reg(operator_registry::global());
  auto general = [](const blob* in, blob* out, path_counts* c) -> status {
    ++c->general;
    if (const i64* x = in->try_get<i64>()) {
      out->set(*x + 1);
      return ok();
    }
    if (const double* d = in->try_get<double>()) {
      out->set(static_cast<i64>(*d) + 1);
      return ok();
    }
    return fail(errc::type_mismatch, "Inc wants a number, got " + in->type_name());
  };
  REQUIRE(reg.add(operator_schema("Inc").inputs(1).outputs(1).factory(
      [counts, general](op_context& ctx) -> result<std::unique_ptr<op_kernel>> {
        const blob* in = &ctx.input_blob(0);
        blob* out = &ctx.output_blob(0);
        auto fast = [in, out, counts]() noexcept {
          const i64* x = in->exact<i64>();
          i64* y = out->exact<i64>();
          if (x == nullptr || y == nullptr) return false;
          *y = *x + 1;
          ++counts->fast;
          return true;
        };
        static_assert(sizeof(fast) <= sizeof(op_kernel::fast_path::state));
        return make_fast_kernel(fast, [in, out, counts, general] { return general(in, out, counts); });
      })));
  REQUIRE(reg.add(operator_schema("IncFar").inputs(1).outputs(1).factory(
      [far_counts, general](op_context& ctx) -> result<std::unique_ptr<op_kernel>> {
        const blob* in = &ctx.input_blob(0);
        blob* out = &ctx.output_blob(0);
        i64 step = 1;  // a fourth captured value (not a constant, which needs no capture)
        auto fast = [in, out, far_counts, step]() noexcept {
          const i64* x = in->exact<i64>();
          i64* y = out->exact<i64>();
          if (x == nullptr || y == nullptr) return false;
          *y = *x + step;
          ++far_counts->fast;
          return true;
        };
        static_assert(sizeof(fast) > sizeof(op_kernel::fast_path::state));
        return make_fast_kernel(fast, [in, out, far_counts, general] { return general(in, out, far_counts); });
      })));
  return reg;
}
}  // namespace

TEST_CASE("a kernel's fast path runs when it takes the case, its general path when it declines", "[net][operator]") {
  path_counts near;
  path_counts far;
  operator_registry reg = fast_registry(&near, &far);
  auto ws = workspace::make("w");
  net n("chain");
  n.op("Inc", {"x"}, {"y"});
  n.op("IncFar", {"y"}, {"z"});
  n.op("Inc", {"z"}, {"w"});
  n.op("Add", {"w", "x"}, {"sum"});  // a built-in fast kernel after them

  SECTION("every op on its fast path once the outputs hold their types") {
    ws->set("x", i64{1});
    for (const char* b : {"y", "z", "w", "sum"}) ws->set(b, i64{0});
    auto inst = ws->create_net(n, reg).value();
    REQUIRE(inst->run_sync());
    CHECK(near.fast == 2);
    CHECK(far.fast == 1);
    CHECK(near.general + far.general == 0);
    CHECK(*ws->get<i64>("w").value() == 4);
    CHECK(*ws->get<i64>("sum").value() == 5);
    ws->set("x", i64{10});
    REQUIRE(inst->run_sync());
    CHECK(*ws->get<i64>("sum").value() == 23);
    CHECK(near.fast == 4);
    CHECK(far.fast == 2);
  }
  SECTION("a decline runs the general path, and the ops after it keep their fast paths") {
    ws->set("x", 1.5);  // a double: Inc's fast path declines
    for (const char* b : {"y", "z", "w"}) ws->set(b, i64{0});
    ws->set("sum", 0.0);
    auto inst = ws->create_net(n, reg).value();
    // Add(int64 w, double x) is Add's general path: a type error.
    auto st = inst->run_sync();
    REQUIRE_FALSE(st);
    CHECK(st.error().message.rfind("net \"chain\" op #3 (Add): ", 0) == 0);
    CHECK(near.general == 1);
    CHECK(far.fast == 1);
    CHECK(near.fast == 1);
    CHECK(*ws->get<i64>("w").value() == 4);
  }
  SECTION("a fresh output takes the general path on the first run and the fast path after") {
    ws->set("x", i64{2});
    auto inst = ws->create_net(n, reg).value();
    REQUIRE(inst->run_sync());
    CHECK(near.general == 2);
    CHECK(far.general == 1);
    CHECK(*ws->get<i64>("sum").value() == 7);
    REQUIRE(inst->run_sync());
    CHECK(near.general == 2);
    CHECK(far.general == 1);
    CHECK(near.fast == 2);
    CHECK(far.fast == 1);
  }
  SECTION("an error of the general path names the net, the op and its type") {
    ws->set("x", std::string("seven"));
    auto inst = ws->create_net(n, reg).value();
    auto st = inst->run_sync();
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::type_mismatch);
    CHECK(st.error().message == "net \"chain\" op #0 (Inc): Inc wants a number, got string");
    CHECK_FALSE(ws->find("y")->has_value());
  }
  SECTION("the awaited run of a net with an asynchronous op takes the same fast paths") {
    REQUIRE(reg.add(operator_schema("Yield").inputs(0).outputs(0).async([](op_context&) -> asio::awaitable<status> {
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
      co_return ok();
    })));
    net m("mixed");
    m.op("Inc", {"x"}, {"y"});
    m.op("Yield", {}, {});
    m.op("IncFar", {"y"}, {"z"});
    ws->set("x", i64{5});
    ws->set("y", i64{0});
    ws->set("z", i64{0});
    auto inst = ws->create_net(m, reg).value();
    REQUIRE(test::run(inst->run()));
    CHECK(near.fast == 1);
    CHECK(far.fast == 1);
    CHECK(near.general + far.general == 0);
    CHECK(*ws->get<i64>("z").value() == 7);
  }
}
