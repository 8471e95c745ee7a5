#include "results.hpp"

#include <taskgroup/builtin_ops.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <vector>

namespace taskgroup::cli {

namespace json = boost::json;

namespace {

template <class T>
json::value vector_json(const std::vector<T>& v) {
  json::array a;
  a.reserve(v.size());
  for (const auto& x : v) a.emplace_back(x);
  return a;
}

json::value double_json(double d, const blob& b) {
  if (std::isfinite(d)) return d;
  return json::string(to_display_string(b));
}

std::string double_text(double d) {
  if (!std::isfinite(d)) return "null";  // JSON has no inf or nan
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string out(buf, ec == std::errc() ? end : buf);
  if (out.find_first_of(".eE") == std::string::npos) out += ".0";
  return out;
}

void write_json(std::string& out, const json::value& v, std::size_t indent) {
  const std::string pad(indent * 2, ' ');
  const std::string inner((indent + 1) * 2, ' ');
  switch (v.kind()) {
    case json::kind::double_: out += double_text(v.get_double()); return;
    case json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      bool first = true;
      for (const auto& [k, x] : o) {
        if (!first) out += ",\n";
        first = false;
        out += inner + json::serialize(json::string(k)) + ": ";
        write_json(out, x, indent + 1);
      }
      out += "\n" + pad + "}";
      return;
    }
    case json::kind::array: {
      const auto& a = v.get_array();
      const bool scalars = std::all_of(a.begin(), a.end(), [](const json::value& x) { return !x.is_structured(); });
      if (a.empty() || scalars) {
        out += "[";
        for (std::size_t i = 0; i < a.size(); ++i) {
          if (i > 0) out += ", ";
          write_json(out, a[i], indent + 1);
        }
        out += "]";
        return;
      }
      out += "[\n";
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += ",\n";
        out += inner;
        write_json(out, a[i], indent + 1);
      }
      out += "\n" + pad + "]";
      return;
    }
    default: out += json::serialize(v);
  }
}

}  // namespace

std::string json_text(const json::value& v) {
  std::string out;
  write_json(out, v, 0);
  out += '\n';
  return out;
}

json::value blob_to_json(const blob& b) {
  if (const auto* v = b.try_get<std::int64_t>()) return *v;
  if (const auto* v = b.try_get<double>()) return double_json(*v, b);
  if (const auto* v = b.try_get<bool>()) return *v;
  if (const auto* v = b.try_get<std::string>()) return json::string(*v);
  if (const auto* v = b.try_get<std::vector<std::int64_t>>()) return vector_json(*v);
  if (const auto* v = b.try_get<std::vector<double>>()) {
    if (std::all_of(v->begin(), v->end(), [](double d) { return std::isfinite(d); })) return vector_json(*v);
    return json::string(to_display_string(b));
  }
  if (const auto* v = b.try_get<std::vector<bool>>()) {
    json::array a;
    for (bool x : *v) a.emplace_back(x);
    return a;
  }
  if (const auto* v = b.try_get<std::vector<std::string>>()) {
    json::array a;
    for (const auto& x : *v) a.emplace_back(json::string(x));
    return a;
  }
  return json::string(to_display_string(b));
}

json::value outputs_json(const run_report& report) {
  json::object out;
  for (const auto& t : report.tasks) {
    json::object blobs;
    for (const auto& [name, value] : t.outputs) blobs[name] = blob_to_json(*value);
    out[t.name] = std::move(blobs);
  }
  return out;
}

std::string outputs_table(const run_report& report) {
  std::vector<std::array<std::string, 3>> rows;
  rows.push_back({"task", "blob", "value"});
  for (const auto& t : report.tasks) {
    if (t.outputs.empty()) {
      rows.push_back({escape_controls(t.name), "-", "(" + std::string(to_string(t.status)) + ")"});
      continue;
    }
    for (const auto& [name, value] : t.outputs)
      rows.push_back({escape_controls(t.name), escape_controls(name), escape_controls(to_display_string(*value))});
  }
  std::array<std::size_t, 2> width{0, 0};
  for (const auto& r : rows) {
    width[0] = std::max(width[0], r[0].size());
    width[1] = std::max(width[1], r[1].size());
  }
  std::string out;
  for (const auto& r : rows) {
    out += r[0] + std::string(width[0] - r[0].size() + 2, ' ');
    out += r[1] + std::string(width[1] - r[1].size() + 2, ' ');
    out += r[2];
    // No trailing blanks on rows whose value is empty.
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  }
  return out;
}

std::string escape_controls(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  auto code = [&](unsigned u) {
    out += "\\u00";
    out += hex[u >> 4];
    out += hex[u & 15];
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u == '\n') {
      out += "\\n";
    } else if (u == '\t') {
      out += "\\t";
    } else if (u == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7F) {
      code(u);
    } else if (u == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      code(static_cast<unsigned char>(s[++i]));  // U+0080 to U+009F, a C1 control
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& v, std::size_t most) {
  std::string out;
  const std::size_t shown = std::min(v.size(), most);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += v[i];
  }
  if (shown < v.size()) out += ", ... (" + std::to_string(v.size() - shown) + " more)";
  return out;
}

}  // namespace taskgroup::cli
