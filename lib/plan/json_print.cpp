// Plan text out: a pretty printer, and level-by-level destruction for
// documents of the default storage (those the writer makes).
#include "plan/internal.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

// The text being printed, bounded: once it would pass `limit` nothing more
// is added (a string is measured before it is escaped, so a plan over the
// bound is refused without escaping its largest value).
struct printer {
  std::string out;
  std::size_t limit;
  bool over = false;

  void put(std::string_view s) {
    if (over) return;
    if (s.size() > limit - out.size()) {
      over = true;
      return;
    }
    out.append(s);
  }

  void scalar(const json::value& v) {
    if (v.is_double()) {
      // Shortest round-trip form, always with a '.' or an exponent so that
      // it reads back as a double (Boost.JSON would write 1.5E0). JSON has
      // no form for a non-finite double (the writer never holds one).
      if (!std::isfinite(v.get_double())) {
        put("null");
        return;
      }
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_double());
      const std::string_view text(buf, ec == std::errc() ? static_cast<std::size_t>(end - buf) : 0);
      put(text);
      if (text.find_first_of(".e") == std::string_view::npos) put(".0");
    } else if (v.is_string() && v.get_string().size() + 2 > limit - std::min(limit, out.size())) {
      over = true;  // its quotes alone would pass the bound
    } else {
      put(json::serialize(v));
    }
  }

  void one_line_value(const json::value& v) {
    if (v.is_object()) {
      put("{}");
    } else if (v.is_array()) {
      put("[");
      const auto& a = v.get_array();
      for (std::size_t i = 0; i < a.size() && !over; ++i) {
        if (i != 0) put(", ");
        scalar(a[i]);
      }
      put("]");
    } else {
      scalar(v);
    }
  }
};

// An empty container or an array of scalars is printed on one line.
bool one_line(const json::value& v) {
  if (v.is_object()) return v.get_object().empty();
  if (!v.is_array()) return true;
  const auto& a = v.get_array();
  return std::none_of(a.begin(), a.end(), [](const json::value& x) { return x.is_structured(); });
}

// Indentation stops growing past this nesting: a tree of 1,000 step levels
// would otherwise spend most of its text on spaces (its size quadratic in
// the depth).
constexpr std::size_t max_indent_depth = 64;

std::string_view indent(std::size_t depth) {
  static const std::string spaces(max_indent_depth * 2, ' ');
  return std::string_view(spaces).substr(0, std::min(depth, max_indent_depth) * 2);
}

}  // namespace

std::optional<std::string> pretty_text(const json::value& root, std::size_t limit) {
  printer p{{}, limit};
  struct frame {
    const json::value* v;
    std::size_t next;
  };
  std::vector<frame> stack;
  // Prints `v` or opens it (then its elements follow on the stack).
  auto open = [&](const json::value& v) {
    if (one_line(v)) {
      p.one_line_value(v);
      return;
    }
    p.put(v.is_object() ? "{\n" : "[\n");
    stack.push_back({&v, 0});
  };
  open(root);
  while (!stack.empty() && !p.over) {
    const std::size_t depth = stack.size();
    const json::value* v = stack.back().v;
    const std::size_t i = stack.back().next++;
    const std::size_t n = v->is_object() ? v->get_object().size() : v->get_array().size();
    if (i == n) {
      p.put("\n");
      p.put(indent(depth - 1));
      p.put(v->is_object() ? "}" : "]");
      stack.pop_back();
      continue;
    }
    if (i != 0) p.put(",\n");
    p.put(indent(depth));
    if (v->is_object()) {
      const auto& kv = *(v->get_object().begin() + static_cast<std::ptrdiff_t>(i));
      p.put(json::serialize(json::string(kv.key())));
      p.put(": ");
      open(kv.value());
    } else {
      open(v->get_array()[i]);
    }
  }
  p.put("\n");
  if (p.over) return std::nullopt;
  return std::move(p.out);
}

void destroy_flat(json::value& root) noexcept {
  // A moved-from value is null: each value is destroyed once its
  // structured children have been moved to the list.
  std::vector<json::value> pending;
  auto take = [&](json::value& v) {
    if (v.is_structured()) pending.push_back(std::move(v));
  };
  try {
    take(root);
    while (!pending.empty()) {
      json::value v = std::move(pending.back());
      pending.pop_back();
      if (v.is_object()) {
        for (auto& kv : v.get_object()) take(kv.value());
      } else {
        for (auto& x : v.get_array()) take(x);
      }
    }
  } catch (const std::bad_alloc&) {
    // The list could not grow: what is left is destroyed the usual way.
  }
}

}  // namespace taskgroup::plan_detail
