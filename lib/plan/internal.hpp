// Internal: the pieces of plan reading and writing (lib/plan/*.cpp).
#pragma once

#include <taskgroup/plan.hpp>
#include <taskgroup/retry_policy.hpp>

#include "model/limits.hpp"

#include <boost/json.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace taskgroup::plan_detail {

namespace json = boost::json;

// --- JSON text (json_text.cpp) ----------------------------------------------

/// JSON nesting levels the parser accepts: a step level takes two (the
/// step object and its "substeps" array); the deepest step tree (a task's
/// report step) starts at level 6 and a step's "nets" array adds one, so
/// this is enough for `max_step_depth` step levels, with room to spare.
inline constexpr std::size_t max_json_depth = 2 * max_step_depth + 8;

/// A parsed document. Its values come from an arena of its own, which
/// nothing else shares: Boost.JSON's destructors then skip the elements,
/// so dropping a document frees the arena's blocks and touches no value
/// (and does not recurse, however deep it nests).
struct document {
  std::unique_ptr<json::monotonic_resource> arena;
  json::value v;  // from `arena`, after it: destroyed first
};

/// What a text holds, for the words of its errors.
enum class text_kind { plan, inputs, json };

/// Parses plan text (or inputs or other JSON text: `kind`) strictly (see
/// docs/plan-format.md, Errors): at most `max_plan_size` bytes of UTF-8
/// without a BOM, no duplicate keys, finite numbers, integers within 64
/// bits, at most `max_json_depth` levels. Errors: `errc::invalid_plan`,
/// "line L, column C: what".
result<document> parse_text(std::string_view text, text_kind kind = text_kind::plan);

/// A large plan is read in two passes over its text, so that it is never
/// whole in memory as a document: the first checks the text as
/// `parse_text` does and finds where each top-level member's value
/// starts; the second reads the members from there, the long arrays
/// element by element.
struct outline {
  std::vector<std::pair<std::string, std::size_t>> members;  // key, where its value starts
};

/// The first pass: `parse_text`'s checks and errors, and the outline of
/// the root object; none when the root is not an object or a top-level
/// key holds an escape (the caller then parses the text whole).
result<std::optional<outline>> outline_text(std::string_view text);

/// The value that starts at `at` in text the first pass accepted; `whole`:
/// it is the whole text.
result<document> parse_value_at(std::string_view text, std::size_t at, bool whole = false);

/// Calls `f` with each element of the array that starts at `at` in text
/// the first pass accepted, and its index, each built in an arena reused
/// for the next. Stops at `f`'s first error, which it returns.
using element_fn = std::function<status(const json::value&, std::size_t)>;
status each_element(std::string_view text, std::size_t at, const element_fn& f);

/// `v` as pretty-printed text (no recursion: plans may nest deeply).
// `v` as indented text, or nothing when the text would be longer than
// `limit` bytes (printing stops there).
std::optional<std::string> pretty_text(const json::value& v, std::size_t limit);

/// Destroys `v` level by level: Boost.JSON's own destructor recurses once
/// per nesting level, too deep for a small stack at `max_json_depth` (a
/// document made by the writer; a parsed one needs no such care).
void destroy_flat(json::value& v) noexcept;

/// Holds a document and destroys it with `destroy_flat`.
struct flat_value {
  json::value v;
  flat_value() = default;
  explicit flat_value(json::value x) noexcept : v(std::move(x)) {}
  flat_value(const flat_value&) = delete;
  flat_value& operator=(const flat_value&) = delete;
  ~flat_value() { destroy_flat(v); }
};

// --- files (file_text.cpp) ---------------------------------------------------

/// The text of the file at `path`, at most `max_plan_size` bytes, whatever
/// the file is (a regular file, a pipe, a device): a regular file larger
/// than that is refused before it is read, any other file once it gave
/// one byte more. `what` names the file in errors ("plan file", "inputs
/// file"), with `errc::invalid_plan`: `cannot open plan file "p": No such
/// file or directory`, `cannot read plan file "p": it is a directory`,
/// `plan file "p" is 300000000 bytes, more than 268435456
/// (taskgroup::max_plan_size, 256 MiB)`, `inputs file "p" holds more than
/// 268435456 bytes (...)`.
result<std::string> read_file_text(const std::filesystem::path& path, std::string_view what);

// --- a plan's top-level members (members.cpp) ----------------------------------

/// A plan's top-level members: those of a document, or read from text as
/// they are asked for (see `outline`), its long arrays element by
/// element. The reader asks for them in the order its rules need,
/// whatever their order in the text.
class plan_members {
 public:
  virtual ~plan_members() = default;
  /// The keys, in the plan's order.
  [[nodiscard]] virtual std::vector<std::string_view> keys() const = 0;
  [[nodiscard]] virtual bool has(std::string_view key) const = 0;
  /// Member `key`'s value (null when absent), alive as long as this is.
  virtual result<const json::value*> value(std::string_view key) = 0;
  /// Calls `f` with each element of member `key` and its index; nothing
  /// when absent. Errors: "expected an array" at the member's pointer,
  /// `f`'s first error.
  virtual status each(std::string_view key, const element_fn& f) = 0;
};

/// The members of document `root` (an object, or the error naming it).
result<std::unique_ptr<plan_members>> document_members(const json::value& root);
/// The members of `text` as `outline_text` found them (`text` must
/// outlive the result).
std::unique_ptr<plan_members> text_members(std::string_view text, outline found);

// --- JSON pointers and typed access (access.cpp) ----------------------------

/// Where a value is in the document, as a JSON pointer (RFC 6901) made
/// into text only when an error names it: reading a plan descends through
/// a dozen values per task, and a string for each was a tenth of the
/// read. A pointer views its parent and its key, which must outlive it:
/// the reader's nested calls and frames hold them.
class pointer {
 public:
  /// The document's root ("").
  constexpr pointer() noexcept = default;
  /// A root that is already text (e.g. "/inputs"); `rendered` must outlive it.
  constexpr explicit pointer(std::string_view rendered) noexcept : key_(rendered), root_text_(true) {}
  /// `parent` extended by an object key or an array index.
  constexpr pointer(const pointer& parent, std::string_view key) noexcept : parent_(&parent), key_(key) {}
  constexpr pointer(const pointer& parent, std::size_t index) noexcept : parent_(&parent), index_(index) {}

  /// The pointer as text: keys escaped (~0, ~1) and control characters
  /// shown as \u00XX, so that a message never carries them raw.
  [[nodiscard]] std::string str() const;

 private:
  static constexpr std::size_t no_index = std::size_t(-1);
  const pointer* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = no_index;
  bool root_text_ = false;
};

/// The document's root.
inline constexpr pointer document_root{};

/// `ptr` extended by a key or an index (the result views `ptr` and `key`).
inline pointer child(const pointer& ptr, std::string_view key) noexcept { return {ptr, key}; }
inline pointer child(const pointer& ptr, std::size_t i) noexcept { return {ptr, i}; }
/// How errors name the size limit of plan and inputs text.
inline constexpr std::string_view max_plan_size_named = " (taskgroup::max_plan_size, 256 MiB)";
/// `s` with control characters shown as \u00XX.
std::string printable(std::string_view s);
/// What makes `s` no name in a plan (a control character), or empty.
std::string name_fault(std::string_view s);
/// Offset of the first byte of `t` that does not start a valid UTF-8
/// sequence, or npos (model/limits.hpp: group names are checked alike).
using detail::invalid_utf8_at;
/// An `errc::invalid_plan` error at `ptr` ("/" for the root).
error bad(const pointer& ptr, const std::string& what);
std::string_view kind_name(const json::value& v);

result<const json::object*> get_object(const json::value& v, const pointer& ptr);
result<const json::array*> get_array(const json::value& v, const pointer& ptr);
result<std::string> get_string(const json::value& v, const pointer& ptr);
/// A name (of a net, step, task, node or blob): a string without control
/// characters.
result<std::string> get_name(const json::value& v, const pointer& ptr);
result<std::vector<std::string>> get_names(const json::value& v, const pointer& ptr);
/// An integer that fits in int64 ("integer out of range" otherwise).
result<std::int64_t> get_integer(const json::value& v, const pointer& ptr);
/// A number (an integer or a double, as a double); a non-finite double
/// (which a document built in C++ may hold, never text) is refused.
result<double> get_number(const json::value& v, const pointer& ptr);
result<bool> get_bool(const json::value& v, const pointer& ptr);
/// A duration in ms, in (0, max_duration].
result<std::chrono::milliseconds> get_duration(const json::value& v, const pointer& ptr);
/// An instance count, in [1, max_instances].
result<std::int64_t> get_instances(const json::value& v, const pointer& ptr);
/// The error of key `k` of the object at `ptr`, which the format does not
/// know (a typo must not pass silently).
error unknown_key(const pointer& ptr, std::string_view k);
/// Refuses keys of `o` outside `keys` (a typo must not pass silently).
status known_keys(const json::object& o, const pointer& ptr, std::span<const std::string_view> keys);
status known_keys(const json::object& o, const pointer& ptr, std::initializer_list<std::string_view> keys);

// --- arguments (arguments.cpp) -----------------------------------------------

/// `a` as JSON, typed where plain JSON would lose its kind. Errors:
/// `errc::not_serializable`, "not a finite number (inf)", for the caller to
/// prefix with the argument's place.
result<json::value> argument_to_json(const argument& a);
/// An argument from JSON at `ptr`.
result<argument> argument_from_json(const json::value& v, const pointer& ptr);

// --- inputs (inputs.cpp) ----------------------------------------------------

/// Declares the inputs of plan array `v` (at `ptr`) on `g`; each on a node
/// of `task_nodes` (the nodes with a task).
status read_inputs(task_group& g, const json::value& v, const pointer& ptr, const std::set<std::string>& task_nodes);
/// `g`'s inputs as a plan's "inputs" array. Errors: `errc::not_serializable`
/// for an input of a type a plan cannot name.
result<json::value> inputs_json(const task_group& g);

// --- retry policies (retry.cpp) ----------------------------------------------

/// The "retry" object of a task or a step at `ptr`: every member optional
/// (the defaults are `retry_policy{}`'s). Errors (`errc::invalid_plan`) at
/// the member's pointer: an unknown member, a value of the wrong JSON
/// type, a `retry_on` entry naming no `errc` or one never retried, and a
/// value outside the policy's limits in `retry_policy::fault`'s words
/// (`/tasks/0/retry/max_attempts: max_attempts must be in [1, 1000], got 0`).
result<retry_policy> read_retry(const json::value& v, const pointer& ptr);
/// True when `p` is written: it differs from the default `retry_policy{}`.
bool writes_retry(const retry_policy& p);
/// Valid policy `p` as a "retry" object, every member written (so that
/// what it reads back is `p`, whatever the defaults become).
json::value retry_json(const retry_policy& p);

// --- step trees (steps.cpp) --------------------------------------------------

/// The nets of a plan, by name (open addressing: a plan may hold 10^5
/// nets, and a node per entry was a cache miss per lookup). The key views
/// the net's own name (`net::name()`, which stays where it is while the
/// net is not edited, and the reader edits no net it has filed): a
/// string's room less per entry, alive until the whole group is built.
using net_table = boost::unordered_flat_map<std::string_view, net, std::hash<std::string_view>>;

/// A step tree from JSON at `ptr`, its nets resolved in `nets`; at most
/// `max_step_depth` levels, run `outer` times at once (a task's
/// num_instances for its step, report steps and instance init/exit work; 1
/// elsewhere): a step whose count takes `outer` times the counts along its
/// path past `max_instances` is refused at its "num_concurrent_instances".
/// Iterative (no recursion per level).
result<execution_step> read_step_tree(const json::value& v, const pointer& ptr, const net_table& nets,
                                      std::int64_t outer = 1);

/// `s` as JSON; `add_net` is called for each net the tree runs. Iterative.
result<json::value> write_step_tree(const execution_step& s, const std::function<status(const net&)>& add_net);

}  // namespace taskgroup::plan_detail
