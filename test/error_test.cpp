#include <taskgroup/error.hpp>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

using namespace taskgroup;

TEST_CASE("errors belong to the taskgroup category", "[error]") {
  boost::system::error_code ec = errc::blob_not_found;
  CHECK(std::string(ec.category().name()) == "taskgroup");
  CHECK(ec.message() == "blob not found");
  CHECK(ec == errc::blob_not_found);
}

TEST_CASE("every error code has its own message", "[error]") {
  for (int i = 1; i <= static_cast<int>(errc::mpi_failed); ++i) {
    boost::system::error_code ec(i, error_category());
    CHECK(ec.message() != "unknown taskgroup error");
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
