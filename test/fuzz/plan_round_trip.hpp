// The plan format's round-trip property, checked by the fuzz target and by
// the unit tests over the regression corpus: for any text that reads,
// writing it succeeds, the written text reads back, and writing that again
// gives the same text (the canonical form).
#pragma once

#include <taskgroup/plan.hpp>

#include <string>
#include <string_view>

namespace taskgroup::test {

/// Empty when `text` keeps the property (or does not read at all); else
/// what broke.
inline std::string plan_round_trip_fault(std::string_view text) {
  auto g = read_plan(text);
  if (!g) return {};
  auto written = write_plan(g.value());
  if (!written) return "a plan that reads cannot be written: " + written.error().message;
  auto again = read_plan(written.value());
  if (!again) return "a written plan does not read back: " + again.error().message + "\n" + written.value();
  auto rewritten = write_plan(again.value());
  if (!rewritten) return "a written plan, read back, cannot be written: " + rewritten.error().message;
  if (rewritten.value() != written.value()) {
    return "writing a written plan again changes it:\n" + written.value() + "\n---\n" + rewritten.value();
  }
  return {};
}

}  // namespace taskgroup::test
