// Test harness: checks of a status or result, showing its error message.
#pragma once

#include <taskgroup/error.hpp>

#include <catch2/catch.hpp>

#include <string>

namespace taskgroup::test {

/// "ok", or the error's message.
inline std::string message_of(const status& st) { return st ? std::string("ok") : st.error().message; }
template <class T>
std::string message_of(const result<T>& r) {
  return r ? std::string("ok") : r.error().message;
}

/// Requires a failure with this code and exactly this message.
template <class R>
void require_error(const R& r, errc code, const std::string& message) {
  INFO("expected: " << message);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == code);
  CHECK(r.error().message == message);
}

}  // namespace taskgroup::test

/// Requires a successful status or result, showing the error message if not.
#define REQUIRE_OK(expr)                             \
  do {                                               \
    const auto& tg_result_ = (expr);                 \
    INFO(::taskgroup::test::message_of(tg_result_)); \
    REQUIRE(tg_result_.has_value());                 \
  } while (false)
