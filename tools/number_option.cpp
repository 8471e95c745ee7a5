// taskgroup command: the numeric options' rule (number_option.hpp).
#include "number_option.hpp"

#include <taskgroup/error.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>

namespace taskgroup::cli {

namespace {

// A bound as it is written: 1024, 10000000, 0.5.
std::string number_text(double v) {
  if (std::trunc(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "a whole number of microseconds from 1 to 10000000", "a number of
// seconds greater than 0".
std::string expected_text(const number_range& r) {
  std::string out = r.whole ? "a whole number" : "a number";
  if (!r.unit.empty()) out += " of " + r.unit;
  const bool has_max = std::isfinite(r.max);
  if (r.above_min) {
    out += " greater than " + number_text(r.min);
    if (has_max) out += " and at most " + number_text(r.max);
  } else if (has_max) {
    out += " from " + number_text(r.min) + " to " + number_text(r.max);
  } else {
    out += " of at least " + number_text(r.min);
  }
  return out;
}

// The help's short form: "in [1, 1024]", "> 0".
std::string description(const number_range& r) {
  const std::string low = number_text(r.min);
  if (!std::isfinite(r.max)) return (r.above_min ? "> " : ">= ") + low;
  return "in " + std::string(r.above_min ? "(" : "[") + low + ", " + number_text(r.max) + "]";
}

}  // namespace

CLI::Validator number_in(const number_range& range) {
  auto check = [range](std::string& text) -> std::string {
    const char* first = text.data();
    const char* last = text.data() + text.size();
    if (first != last && *first == '+') ++first;
    double v = 0;
    const auto [end, ec] = std::from_chars(first, last, v);
    const bool in_range = ec == std::errc{} && end == last && first != last && std::isfinite(v) &&
                          (range.above_min ? v > range.min : v >= range.min) && v <= range.max &&
                          (!range.whole || std::trunc(v) == v);
    if (!in_range) return "expected " + expected_text(range) + ", got " + quote(text);
    if (range.whole) text = number_text(v);
    return {};
  };
  return CLI::Validator(check, description(range));
}

}  // namespace taskgroup::cli
