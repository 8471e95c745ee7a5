#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/workspace.hpp>

#include "detail/errors.hpp"
#include "support/run.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <catch2/catch.hpp>

#include <system_error>

#include <exception>
#include <stdexcept>
#include <string>

using namespace taskgroup;

TEST_CASE("errors belong to the taskgroup category", "[error]") {
  boost::system::error_code ec = errc::blob_not_found;
  CHECK(std::string(ec.category().name()) == "taskgroup");
  CHECK(ec.message() == "blob not found");
  CHECK(ec == errc::blob_not_found);
}

TEST_CASE("every error code has its own message", "[error]") {
  for (int i = 1; i <= static_cast<int>(errc::overloaded); ++i) {
    boost::system::error_code ec(i, error_category());
    CHECK(ec.message() != "unknown taskgroup error");
  }
}

TEST_CASE("codes compare equal to the standard conditions they stand for, and only those", "[error]") {
  namespace generic = boost::system::errc;
  struct mapping {
    errc code;
    generic::errc_t boost_condition;
    std::errc std_condition;
  };
  const mapping mapped[] = {
      {errc::cancelled, generic::operation_canceled, std::errc::operation_canceled},
      {errc::timeout, generic::timed_out, std::errc::timed_out},
      {errc::session_closed, generic::bad_file_descriptor, std::errc::bad_file_descriptor},
      {errc::session_busy, generic::device_or_resource_busy, std::errc::device_or_resource_busy},
      {errc::overloaded, generic::resource_unavailable_try_again, std::errc::resource_unavailable_try_again},
  };
  for (int i = 1; i <= static_cast<int>(errc::overloaded); ++i) {
    const boost::system::error_code ec = static_cast<errc>(i);
    INFO(ec.message());
    for (const mapping& m : mapped) {
      const bool same = m.code == static_cast<errc>(i);
      CHECK((ec == m.boost_condition) == same);
      CHECK((ec == std::error_code(ec) && std::error_code(ec) == m.std_condition) == same);
      CHECK((ec == m.std_condition) == same);
    }
    // The code itself stays the library's: Asio's operation_aborted is
    // another code.
    CHECK(ec != boost::asio::error::operation_aborted);
    CHECK(ec.category() == error_category());
  }
}

TEST_CASE("context is prefixed as an error travels up", "[error]") {
  error e(errc::op_failed, "division by zero");
  error up = e.with_context("net \"body\" op #2 (Div)").with_context("step \"train\"");
  CHECK(up.message == "step \"train\": net \"body\" op #2 (Div): division by zero");
  CHECK(up.code == errc::op_failed);
}

TEST_CASE("value() on a failed result throws a system_error carrying the message", "[error]") {
  result<int> r = fail(errc::bad_argument, "argument \"x\" is bad");
  try {
    (void)r.value();
    FAIL("value() did not throw");
  } catch (const system_error& e) {
    CHECK(std::string(e.what()).find("argument \"x\" is bad") != std::string::npos);
    CHECK(e.error().code == errc::bad_argument);
  }
}

TEST_CASE("cancellation is recognised from our code and from Asio's", "[error]") {
  CHECK(error(errc::cancelled, "x").is_cancelled());
  CHECK(error(boost::asio::error::operation_aborted, "x").is_cancelled());
  CHECK_FALSE(error(errc::op_failed, "x").is_cancelled());
}

TEST_CASE("a default-constructed result holds the no_result error", "[error]") {
  status st;
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::no_result);
  result<int> r;
  CHECK(r.error().code == errc::no_result);
  result<int> good = 3;
  CHECK(good.value() == 3);
}

namespace {

[[noreturn]] void throw_aborted() { throw boost::system::system_error(boost::asio::error::operation_aborted); }

// A net whose one op throws what a cancelled Asio operation throws:
// synchronously, or from inside its coroutine.
net aborting_net(bool async, const std::string& name) {
  net n(name);
  if (async) {
    n.lambda("aborts", {}, {}, [](op_context&) -> boost::asio::awaitable<status> {
      throw_aborted();
      co_return ok();
    });
  } else {
    n.lambda("aborts", {}, {}, [](op_context&) -> status { throw_aborted(); });
  }
  return n;
}

}  // namespace

TEST_CASE("one conversion turns an exception into an error", "[error]") {
  auto convert = [](auto ex) { return detail::error_from_exception(std::make_exception_ptr(ex)); };
  error aborted = convert(boost::system::system_error(boost::asio::error::operation_aborted));
  CHECK(aborted.code == errc::cancelled);
  CHECK(aborted.message == "cancelled");
  error other = convert(boost::system::system_error(boost::asio::error::connection_refused));
  CHECK(other.code == boost::asio::error::connection_refused);
  CHECK(convert(system_error(error(errc::bad_argument, "x"))).code == errc::bad_argument);
  error std_ex = convert(std::runtime_error("bad thing"));
  CHECK(std_ex.code == errc::op_failed);
  CHECK(std_ex.message == "bad thing");
  CHECK(convert(42).message == "unknown exception");
}

TEST_CASE("an op throwing Asio's operation_aborted fails its net with errc::cancelled", "[error]") {
  auto ws = workspace::make("w");
  status sync = ws->create_net(aborting_net(false, "sync")).value()->run_sync();
  REQUIRE_FALSE(sync);
  CHECK(sync.error().code == errc::cancelled);
  CHECK(sync.error().message == "net \"sync\" op #0 (aborts): cancelled");

  status async = test::run(ws->create_net(aborting_net(true, "async")).value()->run());
  REQUIRE_FALSE(async);
  CHECK(async.error().code == errc::cancelled);
  CHECK(async.error().message == "net \"async\" op #0 (aborts): cancelled");
}

TEST_CASE("a step child throwing Asio's operation_aborted fails the step with errc::cancelled", "[error]") {
  for (bool async : {false, true}) {
    INFO((async ? "asynchronous op" : "synchronous op"));
    auto ws = workspace::make("w");
    execution_step plan = execution_step("plan")
                              .substeps({execution_step("a").add_net(aborting_net(async, "a")),
                                         execution_step("b").add_net(aborting_net(async, "b"))})
                              .concurrent_substeps(true);
    status st = test::run(run_step(plan, ws));
    REQUIRE_FALSE(st);
    INFO(st.error().message);
    CHECK(st.error().code == errc::cancelled);
  }
}

TEST_CASE("a quoted name shows its control characters as \\u00XX, every one of them", "[error]") {
  // Every byte: the C0 controls and DEL escaped, the rest (UTF-8 included) kept.
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const std::string q = quote(std::string("a") + c + "b");
    INFO("byte " << b);
    if (b < 0x20 || b == 0x7F) {
      static constexpr char hex[] = "0123456789ABCDEF";
      CHECK(q == std::string("\"a\\u00") + hex[b >> 4] + hex[b & 15] + "b\"");
    } else {
      CHECK(q == std::string("\"a") + c + "b\"");
    }
  }
  // A NUL no longer ends the message that holds the name.
  auto ws = workspace::make("w");
  net n("n");
  n.op("Print", {"x"}, {}, {{std::string("pre\0fix", 7), std::string("x")}});
  auto made = ws->create_net(n);
  REQUIRE_FALSE(made);
  CHECK(made.error().message == "net \"n\" op #0 (Print): unknown argument \"pre\\u0000fix\"");
}
