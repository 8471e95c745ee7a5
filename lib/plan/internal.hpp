// Internal: the pieces of plan reading and writing (lib/plan/*.cpp).
#pragma once

#include <taskgroup/plan.hpp>

#include <boost/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace taskgroup::plan_detail {

namespace json = boost::json;

// --- JSON text (json_text.cpp) ----------------------------------------------

/// JSON nesting levels the parser accepts: a step level takes two (the
/// step object and its "substeps" array); the deepest step tree (a task's
/// report step) starts at level 6 and a step's "nets" array adds one, so
/// this is enough for `max_step_depth` step levels, with room to spare.
inline constexpr std::size_t max_json_depth = 2 * max_step_depth + 8;

/// Parses plan text strictly (see docs/plan-format.md, Errors): at most
/// `max_plan_size` bytes of UTF-8 without a BOM, no duplicate keys, finite
/// numbers, integers within 64 bits, at most `max_json_depth` levels.
/// Errors: `errc::invalid_plan`, "line L, column C: what".
result<json::value> parse_text(std::string_view text);

/// `v` as pretty-printed text (no recursion: plans may nest deeply).
std::string pretty_text(const json::value& v);

/// Destroys `v` level by level: Boost.JSON's own destructor recurses once
/// per nesting level, too deep for a small stack at `max_json_depth`.
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

// --- JSON pointers and typed access (access.cpp) ----------------------------

/// Pointer `ptr` extended by a key (RFC 6901 escaping; control characters
/// shown as \u00XX so that a message never carries them raw).
std::string child(const std::string& ptr, std::string_view key);
std::string child(const std::string& ptr, std::size_t i);
/// `s` with control characters shown as \u00XX.
std::string printable(std::string_view s);
/// An `errc::invalid_plan` error at `ptr`.
error bad(const std::string& ptr, const std::string& what);
std::string_view kind_name(const json::value& v);

result<const json::object*> get_object(const json::value& v, const std::string& ptr);
result<const json::array*> get_array(const json::value& v, const std::string& ptr);
result<std::string> get_string(const json::value& v, const std::string& ptr);
/// A name (of a net, step, task, node or blob): a string without control
/// characters.
result<std::string> get_name(const json::value& v, const std::string& ptr);
result<std::vector<std::string>> get_names(const json::value& v, const std::string& ptr);
/// An integer that fits in int64 ("integer out of range" otherwise).
result<std::int64_t> get_integer(const json::value& v, const std::string& ptr);
result<bool> get_bool(const json::value& v, const std::string& ptr);
/// A duration in ms, in (0, max_duration].
result<std::chrono::milliseconds> get_duration(const json::value& v, const std::string& ptr);
/// An instance count, in [1, max_instances].
result<std::int64_t> get_instances(const json::value& v, const std::string& ptr);
/// Refuses keys of `o` outside `keys` (a typo must not pass silently).
status known_keys(const json::object& o, const std::string& ptr, std::span<const std::string_view> keys);
status known_keys(const json::object& o, const std::string& ptr, std::initializer_list<std::string_view> keys);

// --- arguments (arguments.cpp) -----------------------------------------------

/// `a` as JSON, typed where plain JSON would lose its kind. Errors:
/// `errc::not_serializable`, "not a finite number (inf)", for the caller to
/// prefix with the argument's place.
result<json::value> argument_to_json(const argument& a);
/// An argument from JSON at `ptr`.
result<argument> argument_from_json(const json::value& v, const std::string& ptr);

// --- inputs (inputs.cpp) ----------------------------------------------------

/// Declares the inputs of plan array `v` (at `ptr`) on `g`.
status read_inputs(task_group& g, const json::value& v, const std::string& ptr);
/// `g`'s inputs as a plan's "inputs" array. Errors: `errc::not_serializable`
/// for an input of a type a plan cannot name.
result<json::value> inputs_json(const task_group& g);

// --- step trees (steps.cpp) --------------------------------------------------

/// The nets of a plan, by name.
using net_table = std::map<std::string, net, std::less<>>;

/// A step tree from JSON at `ptr`, its nets resolved in `nets`; at most
/// `max_step_depth` levels. Iterative (no recursion per level).
result<execution_step> read_step_tree(const json::value& v, const std::string& ptr, const net_table& nets);

/// `s` as JSON; `add_net` is called for each net the tree runs. Iterative.
result<json::value> write_step_tree(const execution_step& s, const std::function<status(const net&)>& add_net);

/// The keys of a step object, in written order.
std::span<const std::string_view> step_keys();

}  // namespace taskgroup::plan_detail
