// Test harness: checks of a status or result, showing its error message.
#pragma once

#include <taskgroup/error.hpp>

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <string_view>
#include <vector>

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

/// Requires a failure with this code whose whole message matches
/// `pattern` (std::regex, ECMAScript); returns the matched groups
/// (group k at [k - 1]).
template <class R>
std::vector<std::string> require_error_matching(const R& r, errc code, const std::string& pattern) {
  INFO("expected to match: " << pattern);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == code);
  std::smatch m;
  const std::string& message = r.error().message;
  INFO("message: " << message);
  REQUIRE(std::regex_match(message, m, std::regex(pattern)));
  std::vector<std::string> groups;
  for (std::size_t k = 1; k < m.size(); ++k) groups.push_back(m[k].str());
  return groups;
}

/// The milliseconds a cancelled Sleep (or `sleep_until`) had left, from the
/// whole message `prefix` + "wait cancelled N ms before it was due",
/// required to be at most `at_most`.
template <class R>
long long sleep_left_ms(const R& r, const std::string& prefix, long long at_most) {
  std::string escaped;
  for (char c : prefix) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  const auto groups =
      require_error_matching(r, errc::cancelled, escaped + "wait cancelled ([0-9]+) ms before it was due");
  const long long left = std::stoll(groups.at(0));
  CHECK(left <= at_most);
  return left;
}

}  // namespace taskgroup::test

/// Requires a successful status or result, showing the error message if not.
#define REQUIRE_OK(expr)                             \
  do {                                               \
    const auto& tg_result_ = (expr);                 \
    INFO(::taskgroup::test::message_of(tg_result_)); \
    REQUIRE(tg_result_.has_value());                 \
  } while (false)
