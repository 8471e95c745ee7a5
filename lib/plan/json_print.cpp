// Plan text out: a pretty printer, and level-by-level destruction for
// documents of the default storage (those the writer makes).
#include "plan/internal.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

void scalar(std::ostream& os, const json::value& v) {
  if (v.is_double()) {
    // Shortest round-trip form, always with a '.' or an exponent so that it
    // reads back as a double (Boost.JSON would write 1.5E0). JSON has no
    // form for a non-finite double (the writer never holds one).
    if (!std::isfinite(v.get_double())) {
      os << "null";
      return;
    }
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_double());
    std::string text(buf, ec == std::errc() ? end : buf);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    os << text;
  } else {
    os << json::serialize(v);
  }
}

// An empty container or an array of scalars is printed on one line.
bool one_line(const json::value& v) {
  if (v.is_object()) return v.get_object().empty();
  if (!v.is_array()) return true;
  const auto& a = v.get_array();
  return std::none_of(a.begin(), a.end(), [](const json::value& x) { return x.is_structured(); });
}

void print_one_line(std::ostream& os, const json::value& v) {
  if (v.is_object()) {
    os << "{}";
  } else if (v.is_array()) {
    os << "[";
    const auto& a = v.get_array();
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i != 0) os << ", ";
      scalar(os, a[i]);
    }
    os << "]";
  } else {
    scalar(os, v);
  }
}

}  // namespace

namespace {

// Indentation stops growing past this nesting: a tree of 1,000 step levels
// would otherwise spend most of its text on spaces (its size quadratic in
// the depth).
constexpr std::size_t max_indent_depth = 64;

std::string indent(std::size_t depth) { return std::string(std::min(depth, max_indent_depth) * 2, ' '); }

}  // namespace

std::string pretty_text(const json::value& root) {
  std::ostringstream os;
  struct frame {
    const json::value* v;
    std::size_t next;
  };
  std::vector<frame> stack;
  // Prints `v` or opens it (then its elements follow on the stack).
  auto open = [&](const json::value& v) {
    if (one_line(v)) {
      print_one_line(os, v);
      return;
    }
    os << (v.is_object() ? "{\n" : "[\n");
    stack.push_back({&v, 0});
  };
  open(root);
  while (!stack.empty()) {
    const std::size_t depth = stack.size();
    const json::value* v = stack.back().v;
    const std::size_t i = stack.back().next++;
    const std::size_t n = v->is_object() ? v->get_object().size() : v->get_array().size();
    if (i == n) {
      os << "\n" << indent(depth - 1) << (v->is_object() ? "}" : "]");
      stack.pop_back();
      continue;
    }
    if (i != 0) os << ",\n";
    os << indent(depth);
    if (v->is_object()) {
      const auto& kv = *(v->get_object().begin() + static_cast<std::ptrdiff_t>(i));
      os << json::serialize(json::string(kv.key())) << ": ";
      open(kv.value());
    } else {
      open(v->get_array()[i]);
    }
  }
  os << "\n";
  return os.str();
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
