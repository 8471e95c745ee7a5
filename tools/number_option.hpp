// taskgroup command: the one rule of its numeric options (--threads,
// --timeout, --poll-max, --grace): a finite number within the option's
// range, or a usage error saying what was expected and what was given.
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <string>
#include <utility>

namespace taskgroup::cli {

/// The values a numeric option takes.
struct number_range {
  double min = 0;                                        // the least value...
  bool above_min = false;                                // ...or, when set, the bound it must be above
  double max = std::numeric_limits<double>::infinity();  // the greatest (infinity: any finite number)
  bool whole = false;                                    // an integer
  std::string unit;                                      // "seconds", "microseconds" or none
};

/// A CLI11 transformer for an option whose values are `range`: text that
/// is not a number, nan, an infinity and numbers out of the range are
/// refused (a usage error, exit status 2) with the message
/// `--timeout: expected a number of seconds greater than 0, got "nan"`
/// (CLI11 puts the option's name first). A whole number is handed on in
/// integer form (`1e3` becomes `1000`). Add it with `->transform(...)`.
CLI::Validator number_in(const number_range& range);

/// `number_in` for whole numbers from `min` to `max` (of `unit`).
inline CLI::Validator whole_number_in(double min, double max, std::string unit = {}) {
  return number_in(number_range{min, false, max, true, std::move(unit)});
}

/// `number_in` for any finite number greater than 0 (of `unit`); a long
/// one is the caller's to cut.
inline CLI::Validator positive_number(std::string unit) {
  return number_in(number_range{0, true, std::numeric_limits<double>::infinity(), false, std::move(unit)});
}

}  // namespace taskgroup::cli
