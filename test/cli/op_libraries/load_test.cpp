// load_op_library against real modules (their paths in the environment, set
// by tools/meson.build): what a loaded library adds, into which registry, and
// that a refused library adds nothing.
#include <taskgroup/net.hpp>
#include <taskgroup/op_library.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

using namespace taskgroup;

namespace {

std::string module(const char* var) {
  const char* p = std::getenv(var);
  REQUIRE(p != nullptr);
  return p;
}

}  // namespace

TEST_CASE("A loaded library's operators are registered in the registry given, and run", "[op_library]") {
  operator_registry registry;
  auto lib = load_op_library(module("STRING_OPS"), registry);
  INFO((lib ? std::string() : lib.error().message));
  REQUIRE(lib);
  CHECK(lib.value().path == module("STRING_OPS"));
  CHECK(lib.value().abi_version == op_library_abi_version);
  CHECK(lib.value().operators == std::vector<std::string>{"Repeat", "Upper"});
  CHECK(registry.types() == std::vector<std::string>{"Repeat", "Upper"});
  CHECK(operator_registry::global().find("Upper") == nullptr);  // only the registry given

  auto ws = workspace::make("strings");
  net n("n");
  n.op("ConstantFill", {}, {"w"}, {{"value", std::string("ab")}})
      .op("Upper", {"w"}, {"u"})
      .op("Repeat", {"u"}, {"r"}, {{"times", std::int64_t{2}}, {"separator", std::string("-")}});
  operator_registry both(operator_registry::global());
  REQUIRE(both.merge(registry));
  auto inst = ws->create_net(n, both);
  REQUIRE(inst);
  boost::asio::io_context io;
  std::optional<status> st;
  boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<void> { st = co_await inst.value()->run(); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  REQUIRE(st.has_value());
  REQUIRE(st->has_value());
  CHECK(*ws->get<std::string>("r").value() == "AB-AB");
}

TEST_CASE("A library refused for a clash adds none of its operators", "[op_library]") {
  operator_registry registry(operator_registry::global());
  const auto before = registry.types();
  auto lib = load_op_library(module("BAD_CLASH"), registry);
  REQUIRE_FALSE(lib);
  CHECK(lib.error().code == errc::duplicate_operator);
  CHECK(lib.error().message ==
        "op library \"" + module("BAD_CLASH") + "\": operator type \"Add\" is already registered");
  CHECK(registry.find("Lower") == nullptr);  // registered before Add in the library
  CHECK(registry.types() == before);
}

TEST_CASE("Each refused library fails with errc::op_library_failed naming the file", "[op_library]") {
  for (const char* var : {"BAD_NO_ENTRY", "BAD_WRONG_ABI", "BAD_THROWS"}) {
    INFO(var);
    operator_registry registry;
    auto lib = load_op_library(module(var), registry);
    REQUIRE_FALSE(lib);
    CHECK(lib.error().code == errc::op_library_failed);
    CHECK(lib.error().message.rfind("op library \"" + module(var) + "\": ", 0) == 0);
    CHECK(registry.types().empty());
  }
  operator_registry registry;
  auto missing = load_op_library("no/such/library.so", registry);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "op library \"no/such/library.so\": no such file");
}
