// taskgroup command: the outputs of a run, as a table or as JSON.
//
// Threading: pure functions (reentrant).
#pragma once

#include <taskgroup/blob.hpp>
#include <taskgroup/run_report.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::cli {

/// `a, b, c`: a list joined with ", " (summaries, graph labels). With
/// `most`, a longer list shows its first `most` items and then `... (k
/// more)`: a summary line of 10^5 names helps nobody.
std::string join(const std::vector<std::string>& v, std::size_t most = SIZE_MAX);

/// `s` with its control characters shown as escapes, for text that a
/// person reads (the outputs table, graph labels): `\n`, `\t` and `\r`,
/// and `\u00XX` for the others (U+0000 to U+001F, U+007F, and U+0080 to
/// U+009F, the C1 controls, as UTF-8), so that it never sends a terminal a
/// control sequence, never ends a line and never stops at a NUL. The rest,
/// backslashes included, is kept as is (--json gives values exactly).
std::string escape_controls(std::string_view s);

/// A blob's value as JSON: int64, double, bool, string and vectors of them
/// as JSON values; anything else (and non-finite doubles) as its display
/// string (`taskgroup::to_display_string`).
boost::json::value blob_to_json(const blob& b);

/// `{"<task full name>": {"<blob>": <value>, ...}, ...}`: every task of the
/// run in group order, with its declared outputs (empty when it has none or
/// did not succeed).
boost::json::value outputs_json(const run_report& report);

/// `v` as pretty-printed JSON text (two-space indent, arrays of scalars on
/// one line) ending in a newline. Doubles are written in their shortest
/// round-trip form and always look like doubles (`2.5`, `3.0`, `1e+300`),
/// not Boost.JSON's `2.5E0`.
std::string json_text(const boost::json::value& v);

/// The outputs as an aligned text table with a header (task, blob, value);
/// a task without outputs has one row whose blob is "-" and whose value is
/// its status in parentheses. Every cell is shown through
/// `escape_controls`.
std::string outputs_table(const run_report& report);

}  // namespace taskgroup::cli
