// taskgroup: plan files, task groups as JSON data.
//
// A task group built from registered operators can be written to a JSON
// plan and read back into a group that runs identically; the `taskgroup`
// command runs plan files. The format is documented in docs/plan-format.md.
// Control-flow helpers are written as the plain steps and nets they build.
// Setup objects are written as the init and exit work they return.
//
// Errors name the location as a JSON pointer and what is wrong, e.g.
// `/tasks/2/step/substeps/0: both "nets" and "substeps"`,
// `/nets/1/ops/0: unknown operator type "Ad"`, or for malformed JSON
// `line 3, column 14: syntax error`. A bad plan never crashes the reader.
//
// Plans are strict (docs/plan-format.md, Errors): UTF-8 without a BOM, at
// most `max_plan_size` bytes, no duplicate keys, finite numbers, integers
// within 64 bits, names without control characters, durations within
// `max_duration`, instance counts within `max_instances`, step trees
// within `max_step_depth` levels (execution_step.hpp). Step trees and
// documents are walked with explicit stacks; only Boost.JSON's parser
// recurses, once per nesting level with small frames: the deepest plan
// reads and writes on a 256 KiB stack (optimized build).
//
// Threading: pure functions (reentrant); the registry is thread-safe.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/json/value.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace taskgroup {

/// The plan format version written and accepted.
inline constexpr int plan_format_version = 1;

/// The largest plan text accepted, in bytes (256 MiB): `read_plan` and
/// `read_plan_file` refuse longer text with `errc::invalid_plan` naming the
/// size and this limit; so do `read_feeds` and `read_feeds_file`. A file is
/// never read past it: a regular file is refused before it is read, any
/// other (a pipe, a device) once it gave one byte more.
inline constexpr std::size_t max_plan_size = std::size_t{256} << 20;

/// `group` as a JSON plan. Errors: `errc::not_serializable` naming an
/// inline operator (`task "local/t": net "n" op #2 (halve): an inline
/// operator cannot be written to a plan`) or an argument or node option
/// that JSON cannot hold (a non-finite double: `... op #0 (ConstantFill):
/// argument "value": not a finite number (inf), which JSON cannot hold`),
/// or text that `read_plan` would refuse, at its JSON pointer: a name with
/// a control character (`/tasks/0/name: a name cannot hold control
/// characters, got "a\u0001b"`), a string that is not valid UTF-8;
/// `errc::duplicate_net` for two different nets sharing a name. A group
/// that would not run is not written: the errors of `task::validate`, of
/// each step tree's `execution_step::validate` (a builder's misuse, a
/// limit, a tree deeper than `max_step_depth`), prefixed with the task or
/// report step, and a group report step's (an interval out of range, a
/// node with no task).
TASKGROUP_API result<boost::json::value> plan_to_json(const task_group& group);

/// `group` as JSON text, pretty-printed (see `pretty_json`). Errors: those
/// of `plan_to_json`; `errc::not_serializable` when the text would be
/// longer than `max_plan_size`. What it writes, `read_plan` reads back.
TASKGROUP_API result<std::string> write_plan(const task_group& group);

/// A group from a JSON plan (a new, unused group). Every op is checked
/// against `registry` (type, arity, arguments). Errors:
/// `errc::invalid_plan` with the JSON pointer of the fault.
TASKGROUP_API result<task_group> read_plan(const boost::json::value& plan,
                                           const operator_registry& registry = operator_registry::global());

/// Same, from JSON text. Malformed or out-of-limit text reports line and
/// column (`line 3, column 2: duplicate key "tasks"`, `invalid UTF-8 at
/// line 2, column 23 (byte 0xFF)`); text longer than `max_plan_size` is
/// refused before it is parsed. The text is read in two passes and is
/// never whole in memory as a JSON document: the first checks all of it
/// (so a malformed plan fails before any of it is read), the second reads
/// its members, the `"nets"` and `"tasks"` arrays element by element, in
/// the order the format needs (nets first), whatever their order in the
/// text; the result and the errors are those of the overload above given
/// the same text parsed whole.
TASKGROUP_API result<task_group> read_plan(std::string_view text,
                                           const operator_registry& registry = operator_registry::global());

/// Same, from a file (of any type: a regular file, a pipe, a device).
/// Errors also, naming the file: it cannot be opened (`cannot open plan
/// file "p": No such file or directory`) or read (`cannot read plan file
/// "p": it is a directory`), or is larger than `max_plan_size` (`plan file
/// "p" is 300000000 bytes, more than 268435456 (taskgroup::max_plan_size,
/// 256 MiB)`, checked before reading; a file of no known size: `plan file
/// "p" holds more than 268435456 bytes (...)`, after reading one byte past
/// the limit). Errors in the text have the path before them (`p: line 1,
/// column 1: ...`).
TASKGROUP_API result<task_group> read_plan_file(const std::filesystem::path& path,
                                                const operator_registry& registry = operator_registry::global());

/// Feeds for a run of `group` from JSON: an object whose keys are
/// `"node/blob"` and whose values are written as op arguments are in plans
/// (a number, a string, a bool, a list, or `{"type": "list<double>",
/// "value": []}`); an integer fed to a `double` input becomes a double
/// (likewise lists). Node and blob names may hold `/`: a key names the
/// declared input (`group.inputs()`) whose node, `/` and blob it spells
/// (`"p/q/r"` is node `p/q`, blob `r` when that is declared); a key that
/// spells none is split at its first `/`. Errors: `errc::invalid_plan`
/// with the key's JSON pointer: not an object, a key without a node or a
/// blob, a key that spells several declared inputs (`/a~1b~1c: feed
/// "a/b/c" is ambiguous: it names node "a", blob "b/c" and node "a/b",
/// blob "c"`), a value no input type holds. Whether each feed matches a
/// declared input is the run's check (`errc::invalid_feed`).
TASKGROUP_API result<feeds> read_feeds(const boost::json::value& v, const task_group& group);
/// Same, from JSON text (parsed as strictly as plans are).
TASKGROUP_API result<feeds> read_feeds(std::string_view text, const task_group& group);
/// Same, from a file, read as `read_plan_file` reads one (the same limit):
/// its errors name it as the inputs file (`cannot read inputs file "p": it
/// is a directory`, `inputs file "p": line 1, column 1: ...`).
TASKGROUP_API result<feeds> read_feeds_file(const std::filesystem::path& path, const task_group& group);
/// One feed, as `read_feeds` reads each member of its object: `name` is
/// `"node/blob"` (matched against the declared inputs as there) and
/// `value` a value as there (the command's `--input NODE/BLOB=JSON`).
/// Errors: `errc::invalid_plan`; those of the name without a place (`a
/// feed is named "node/blob", got "x"`, `feed "a/b/c" is ambiguous: ...`),
/// those of the value with a JSON pointer into the value (`/: an argument
/// is a bool, number, string or list, got null`, `/1: expected an integer
/// like the list's first element, ...`).
TASKGROUP_API result<feeds::entry> read_feed(std::string_view name, const boost::json::value& value,
                                             const task_group& group);

/// JSON text parsed as strictly as a plan's text (docs/plan-format.md,
/// Errors): UTF-8 without a BOM, at most `max_plan_size` bytes, no
/// duplicate keys, finite numbers, integers within 64 bits, nesting within
/// the plan's limit. Errors: `errc::invalid_plan`, with the place in `text`
/// (`line 1, column 7: syntax error`).
TASKGROUP_API result<boost::json::value> parse_json(std::string_view text);

/// Pretty-prints JSON (two spaces per level, up to 64 levels: deeper lines
/// are indented as the 64th, so the text stays linear in a tree's depth),
/// as `write_plan` does, without recursion. A non-finite double, which JSON cannot hold, prints as null.
TASKGROUP_API std::string pretty_json(const boost::json::value& v);

}  // namespace taskgroup
