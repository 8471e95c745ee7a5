// Op arguments and node options in plans: plain JSON where its typing is
// enough, {"type": ..., "value": ...} where it is not.
#include "plan/internal.hpp"

#include <cmath>

namespace taskgroup::plan_detail {

namespace {

json::value plain(const argument& a) {
  return std::visit(
      [](const auto& v) -> json::value {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<bool>>) {
          json::array arr;
          for (bool b : v) arr.emplace_back(b);
          return arr;
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<double>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          json::array arr;
          for (const auto& x : v) arr.emplace_back(json::value_from(x));
          return arr;
        } else {
          return json::value_from(v);
        }
      },
      a);
}

// The first non-finite double of `a`, if any: JSON has no way to write it.
std::optional<double> non_finite(const argument& a) {
  if (const auto* d = std::get_if<double>(&a); d && !std::isfinite(*d)) return *d;
  if (const auto* l = std::get_if<std::vector<double>>(&a)) {
    for (double d : *l) {
      if (!std::isfinite(d)) return d;
    }
  }
  return std::nullopt;
}

}  // namespace

result<json::value> argument_to_json(const argument& a) {
  if (auto d = non_finite(a)) {
    return fail(errc::not_serializable, std::string("not a finite number (") +
                                            (std::isnan(*d) ? "nan"
                                             : *d > 0       ? "inf"
                                                            : "-inf") +
                                            "), which JSON cannot hold");
  }
  // Empty lists, whole-valued doubles and lists of doubles do not survive
  // plain JSON typing.
  const argument_kind k = kind_of(a);
  bool typed = false;
  if (k == argument_kind::float64) {
    const double d = std::get<double>(a);
    typed = std::trunc(d) == d;
  } else if (k == argument_kind::float64_list) {
    typed = true;
  } else if (k == argument_kind::int64_list || k == argument_kind::boolean_list || k == argument_kind::string_list) {
    typed = plain(a).as_array().empty();
  }
  if (!typed) return plain(a);
  return json::value(json::object{{"type", std::string(to_string(k))}, {"value", plain(a)}});
}

namespace {

template <class T, class Read>
result<argument> list_of(const json::array& arr, const pointer& ptr, Read read) {
  std::vector<T> out;
  out.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    TASKGROUP_TRY(auto x, read(arr[i], child(ptr, i)));
    out.push_back(std::move(x));
  }
  return argument(std::move(out));
}

result<argument> typed(const json::object& o, const pointer& ptr) {
  TASKGROUP_TRY(known_keys(o, ptr, {"type", "value"}));
  if (!o.contains("type") || !o.contains("value")) return bad(ptr, "a typed argument needs \"type\" and \"value\"");
  TASKGROUP_TRY(auto type, get_string(o.at("type"), child(ptr, "type")));
  const json::value& val = o.at("value");
  const pointer vp = child(ptr, "value");
  if (type == "double") {
    TASKGROUP_TRY(auto d, get_number(val, vp));
    return argument(d);
  }
  if (type == "int64") {
    TASKGROUP_TRY(auto i, get_integer(val, vp));
    return argument(i);
  }
  if (type == "bool") {
    TASKGROUP_TRY(auto b, get_bool(val, vp));
    return argument(b);
  }
  if (type == "string") {
    TASKGROUP_TRY(auto s, get_string(val, vp));
    return argument(std::move(s));
  }
  if (type == "list<int64>" || type == "list<double>" || type == "list<bool>" || type == "list<string>") {
    TASKGROUP_TRY(auto arr, get_array(val, vp));
    if (type == "list<int64>") return list_of<std::int64_t>(*arr, vp, get_integer);
    if (type == "list<double>") return list_of<double>(*arr, vp, get_number);
    if (type == "list<bool>") return list_of<bool>(*arr, vp, get_bool);
    return list_of<std::string>(*arr, vp, get_string);
  }
  return bad(child(ptr, "type"), "unknown argument type " + quote(type));
}

// A plain list: the first element fixes its type; every other must match.
result<argument> plain_list(const json::array& arr, const pointer& ptr) {
  if (arr.empty()) return bad(ptr, "an empty list needs a type: {\"type\": \"list<int64>\", \"value\": []}");
  auto like_first = [&](auto pred, const char* what, const char* hint) -> status {
    for (std::size_t i = 0; i < arr.size(); ++i) {
      if (!pred(arr[i])) {
        return bad(child(ptr, i), std::string("expected ") + what + " like the list's first element, got " +
                                      std::string(kind_name(arr[i])) + hint);
      }
    }
    return ok();
  };
  const json::value& first = arr.front();
  if (first.is_bool()) {
    TASKGROUP_TRY(like_first([](const json::value& x) { return x.is_bool(); }, "a bool", ""));
    return list_of<bool>(arr, ptr, get_bool);
  }
  if (first.is_int64() || first.is_uint64()) {
    TASKGROUP_TRY(like_first([](const json::value& x) { return x.is_int64() || x.is_uint64(); }, "an integer",
                             " (write a list of doubles as {\"type\": \"list<double>\", ...})"));
    return list_of<std::int64_t>(arr, ptr, get_integer);
  }
  if (first.is_double()) {
    TASKGROUP_TRY(like_first([](const json::value& x) { return x.is_number(); }, "a number", ""));
    return list_of<double>(arr, ptr, get_number);
  }
  if (first.is_string()) {
    TASKGROUP_TRY(like_first([](const json::value& x) { return x.is_string(); }, "a string", ""));
    return list_of<std::string>(arr, ptr, get_string);
  }
  return bad(child(ptr, 0), "a list holds bools, integers, numbers or strings");
}

}  // namespace

result<argument> argument_from_json(const json::value& v, const pointer& ptr) {
  switch (v.kind()) {
    case json::kind::object: return typed(v.get_object(), ptr);
    case json::kind::bool_: return argument(v.get_bool());
    case json::kind::int64:
    case json::kind::uint64: {
      TASKGROUP_TRY(auto i, get_integer(v, ptr));
      return argument(i);
    }
    case json::kind::double_: {
      TASKGROUP_TRY(auto d, get_number(v, ptr));
      return argument(d);
    }
    case json::kind::string: return argument(std::string(v.get_string()));
    case json::kind::array: return plain_list(v.get_array(), ptr);
    default: return bad(ptr, "an argument is a bool, number, string or list, got " + std::string(kind_name(v)));
  }
}

}  // namespace taskgroup::plan_detail
