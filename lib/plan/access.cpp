// JSON pointers and typed access to plan values, each failure naming the
// pointer of the fault.
#include "plan/internal.hpp"

#include "model/limits.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cmath>

namespace taskgroup::plan_detail {

std::string printable(std::string_view s) {
  // quote's escapes, without its quotes (one rule for names in messages).
  std::string q = quote(s);
  return q.substr(1, q.size() - 2);
}

std::string pointer::str() const {
  // Root first: the chain is walked from the leaf, so it is gathered first.
  boost::container::small_vector<const pointer*, 16> chain;
  for (const pointer* p = this; p != nullptr; p = p->parent_) chain.push_back(p);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const pointer& p = **it;
    if (p.root_text_) {
      out += p.key_;
    } else if (p.parent_ == nullptr) {
      continue;  // the document's root
    } else if (p.index_ != no_index) {
      out += '/';
      out += std::to_string(p.index_);
    } else {
      out += '/';
      for (char c : printable(p.key_)) {
        if (c == '~') {
          out += "~0";
        } else if (c == '/') {
          out += "~1";
        } else {
          out += c;
        }
      }
    }
  }
  return out;
}

error bad(const pointer& ptr, const std::string& what) {
  std::string at = ptr.str();
  return {errc::invalid_plan, (at.empty() ? std::string("/") : at) + ": " + what};
}

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "bool";
    case json::kind::int64:
    case json::kind::uint64: return "integer";
    case json::kind::double_: return "number";
    case json::kind::string: return "string";
    case json::kind::array: return "array";
    case json::kind::object: return "object";
  }
  return "value";
}

result<const json::object*> get_object(const json::value& v, const pointer& ptr) {
  if (!v.is_object()) return bad(ptr, "expected an object, got " + std::string(kind_name(v)));
  return &v.get_object();
}

result<const json::array*> get_array(const json::value& v, const pointer& ptr) {
  if (!v.is_array()) return bad(ptr, "expected an array, got " + std::string(kind_name(v)));
  return &v.get_array();
}

result<std::string> get_string(const json::value& v, const pointer& ptr) {
  if (!v.is_string()) return bad(ptr, "expected a string, got " + std::string(kind_name(v)));
  return std::string(v.get_string());
}

std::string name_fault(std::string_view s) {
  auto it = std::find_if(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
  if (it == s.end()) return {};
  return "a name cannot hold control characters, got " + quote(s);
}

result<std::string> get_name(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto s, get_string(v, ptr));
  if (std::string f = name_fault(s); !f.empty()) return bad(ptr, f);
  return s;
}

result<std::vector<std::string>> get_names(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto arr, get_array(v, ptr));
  std::vector<std::string> out;
  out.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    TASKGROUP_TRY(auto s, get_name((*arr)[i], child(ptr, i)));
    out.push_back(std::move(s));
  }
  return out;
}

result<std::int64_t> get_integer(const json::value& v, const pointer& ptr) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    if (v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(v.get_uint64());
    return bad(ptr, "integer out of range (at most 9223372036854775807), got " + std::to_string(v.get_uint64()));
  }
  return bad(ptr, "expected an integer, got " + std::string(kind_name(v)));
}

result<double> get_number(const json::value& v, const pointer& ptr) {
  if (!v.is_number()) return bad(ptr, "expected a number, got " + std::string(kind_name(v)));
  // Text never holds one (the parser refuses it); a document built in C++ may.
  if (v.is_double() && !std::isfinite(v.get_double())) return bad(ptr, "not a finite number");
  return v.to_number<double>();
}

result<bool> get_bool(const json::value& v, const pointer& ptr) {
  if (!v.is_bool()) return bad(ptr, "expected true or false, got " + std::string(kind_name(v)));
  return v.get_bool();
}

result<std::chrono::milliseconds> get_duration(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto ms, get_integer(v, ptr));
  if (auto f = detail::duration_fault(ms); !f.empty()) return bad(ptr, f);
  return std::chrono::milliseconds(ms);
}

result<std::int64_t> get_instances(const json::value& v, const pointer& ptr) {
  TASKGROUP_TRY(auto n, get_integer(v, ptr));
  if (auto f = detail::instances_fault(n); !f.empty()) return bad(ptr, f);
  return n;
}

error unknown_key(const pointer& ptr, std::string_view k) { return bad(child(ptr, k), "unknown key " + quote(k)); }

status known_keys(const json::object& o, const pointer& ptr, std::span<const std::string_view> keys) {
  for (const auto& [k, v] : o) {
    if (std::find(keys.begin(), keys.end(), std::string_view(k)) == keys.end()) {
      return unknown_key(ptr, k);
    }
  }
  return ok();
}

status known_keys(const json::object& o, const pointer& ptr, std::initializer_list<std::string_view> keys) {
  return known_keys(o, ptr, std::span<const std::string_view>(keys.begin(), keys.size()));
}

}  // namespace taskgroup::plan_detail
