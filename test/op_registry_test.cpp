// Registry merges (all or nothing) and argument defaults in schemas, the
// pieces op libraries and `taskgroup ops` rest on.
#include "support/run.hpp"

#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/workspace.hpp>

#include <catch2/catch.hpp>

#include "support/checks.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

using namespace taskgroup;
using test::message_of;
using test::require_error;

namespace {

// Instantiates `n` in `ws` and runs it once on a fresh io_context.
status run_net_now(workspace& ws, const net& n) {
  auto inst = ws.create_net(n, /*overwrite=*/true);
  if (!inst) return inst.error();
  net_instance* i = inst.value();
  return test::run([i]() -> boost::asio::awaitable<status> { co_return co_await i->run(); }());
}

operator_schema noop(std::string type) {
  return std::move(operator_schema(std::move(type)).inputs(0).outputs(0).sync([](op_context&) { return ok(); }));
}

const argument_spec* spec_of(const operator_schema& s, std::string_view name) {
  for (const auto& a : s.argument_specs()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("merge adds every schema of another registry", "[operator]") {
  operator_registry target;
  REQUIRE_OK(target.add(noop("A")));
  operator_registry staged;
  REQUIRE_OK(staged.add(noop("B")));
  REQUIRE_OK(staged.add(noop("C")));
  REQUIRE_OK(target.merge(staged));
  CHECK(target.types() == std::vector<std::string>{"A", "B", "C"});
  CHECK(target.find("B") == staged.find("B"));  // the same immutable schema
}

TEST_CASE("merge adds nothing when one type is already registered, naming the first clash", "[operator]") {
  operator_registry target;
  REQUIRE_OK(target.add(noop("M")));
  REQUIRE_OK(target.add(noop("Z")));
  operator_registry staged;
  for (const char* t : {"A", "Z", "M", "Q"}) REQUIRE_OK(staged.add(noop(t)));
  status st = target.merge(staged);
  require_error(st, errc::duplicate_operator, "operator type \"M\" is already registered");
  CHECK(target.types() == std::vector<std::string>{"M", "Z"});
}

TEST_CASE("arg_with_default declares an optional argument of its value's kind", "[operator]") {
  operator_schema s("T");
  s.arg_with_default("n", std::int64_t{3}, "count").arg_with_default("sep", std::string(","));
  const argument_spec* n = spec_of(s, "n");
  REQUIRE(n != nullptr);
  CHECK_FALSE(n->required);
  CHECK(n->kinds == std::vector{argument_kind::int64});
  CHECK(n->default_value == argument{std::int64_t{3}});
  CHECK(n->doc == "count");
  const argument_spec* sep = spec_of(s, "sep");
  REQUIRE(sep != nullptr);
  CHECK(sep->kinds == std::vector{argument_kind::string});  // a literal is a string, not a bool
  CHECK(sep->default_value == argument{std::string(",")});

  // Validation treats it as any optional argument of that kind.
  CHECK(s.validate(op_def{"T", {}, {}, {}, nullptr}));
  op_def wrong{"T", {}, {}, {{"n", std::string("x")}}, nullptr};
  require_error(s.validate(wrong), errc::bad_argument, "argument \"n\": expected int64, got string");
  CHECK(spec_of(operator_schema("U").arg("x", argument_kind::int64), "x")->default_value == std::nullopt);
}

TEST_CASE("Built-in defaults are the values their kernels use without the argument", "[operator]") {
  // For each: the op without the argument, and with the schema's default.
  struct probe {
    const char* type;
    const char* arg;
    std::vector<std::string> inputs;
  };
  for (const probe& p : {probe{"CreateCounter", "init", {}}, probe{"Concat", "separator", {"a", "b"}}}) {
    INFO(p.type);
    auto schema = operator_registry::global().find(p.type);
    REQUIRE(schema != nullptr);
    const argument_spec* spec = spec_of(*schema, p.arg);
    REQUIRE(spec != nullptr);
    REQUIRE(spec->default_value.has_value());
    std::vector<std::string> shown;
    for (int with_default = 0; with_default < 2; ++with_default) {
      auto ws = workspace::make("defaults");
      net n("probe");
      std::vector<std::string> ins;
      for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        ins.push_back("in" + std::to_string(i));
        n.op("ConstantFill", {}, {ins.back()}, {{"value", p.inputs[i]}});
      }
      arguments args;
      if (with_default != 0) args.set(p.arg, *spec->default_value);
      n.op(p.type, ins, {"out"}, std::move(args));
      REQUIRE_OK(run_net_now(*ws, n));
      shown.push_back(to_display_string(*ws->get_blob("out").value()));
    }
    CHECK(shown[0] == shown[1]);
  }
  // Print's prefix and Fail's message have defaults too.
  CHECK(spec_of(*operator_registry::global().find("Print"), "prefix")->default_value == argument{std::string()});
  CHECK(spec_of(*operator_registry::global().find("Fail"), "message")->default_value ==
        argument{std::string("Fail operator")});
}
