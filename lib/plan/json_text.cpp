// Plan text: a strict JSON parser (a Boost.JSON basic_parser whose handler
// refuses what the plan format does not allow) and a pretty printer.
#include "internal.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_set>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

// Offset of the first byte that does not start a valid UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included), or
// npos.
std::size_t invalid_utf8_at(std::string_view t) {
  const auto* p = reinterpret_cast<const unsigned char*>(t.data());
  const std::size_t n = t.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (n - i < len) return i;
    unsigned cp = c & (0x7Fu >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned b = p[i + k];
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// "line L, column C" of byte `at`; columns count characters (the text
// before `at` is valid UTF-8).
std::string position(std::string_view text, std::size_t at) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// The opening quote of the string whose closing quote is at `end`.
std::size_t token_start(std::string_view text, std::size_t end) {
  for (std::size_t j = std::min(end, text.size()); j-- > 0;) {
    if (text[j] != '"') continue;
    std::size_t backslashes = 0;
    while (backslashes < j && text[j - 1 - backslashes] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return j;
  }
  return end;
}

// Builds the document as Boost.JSON's own parser does, and stops at what a
// plan may not hold, saying why in `fault`.
class strict_handler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  explicit strict_handler(json::monotonic_resource* arena) noexcept : arena_(arena) {}

  json::value_stack st;
  // Why the handler stopped the parse, and where the offending token
  // starts: the parser stops at a key's closing quote or past a number.
  std::string fault;
  bool at_key = false;
  std::size_t number_length = 0;

  bool on_document_begin(boost::system::error_code&) {
    // A plan is read once and dropped whole: its values come from one
    // growing arena (a malloc per value was a quarter of reading a
    // 200,000-task plan, and its headers a third of the document's size),
    // held by the document, not shared (see plan_detail::document).
    st.reset(json::storage_ptr(arena_));
    return true;
  }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_array_begin(boost::system::error_code&) { return true; }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_object_begin(boost::system::error_code&) {
    // The key lists of closed objects are kept for reuse.
    if (depth_ == keys_.size()) keys_.emplace_back();
    keys_[depth_++].clear();
    return true;
  }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    --depth_;
    st.push_object(n);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_string(s);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, boost::system::error_code&) {
    key_.append(s.data(), s.size());
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, boost::system::error_code& ec) {
    // Whole in `s` unless parts came first.
    std::string_view key(s.data(), s.size());
    if (!key_.empty()) key = key_.append(key);
    if (!keys_[depth_ - 1].insert(key)) {
      at_key = true;
      return stop(ec, "duplicate key " + quote(printable(key)));
    }
    key_.clear();
    st.push_key(s);
    return true;
  }
  bool on_number_part(json::string_view s, boost::system::error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, boost::system::error_code&) {
    number_.clear();
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, boost::system::error_code&) {
    number_.clear();
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view s, boost::system::error_code& ec) {
    number_.append(s.data(), s.size());
    const std::string text = std::move(number_);
    number_.clear();
    number_length = text.size();
    if (text.find_first_of(".eE") == std::string::npos) {
      return stop(ec, "integer out of range (integers fit in 64 bits): " + text);
    }
    // Exactly rounded (Boost.JSON's own conversion may be off by an ulp,
    // and then a written plan would not read back the same).
    double exact = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), exact);
    if (err == std::errc::result_out_of_range && std::isfinite(d) && std::abs(d) < 1) {
      exact = std::copysign(0.0, d);  // underflow: the nearest double is zero
    } else if (err != std::errc() || end != text.data() + text.size() || !std::isfinite(exact)) {
      return stop(ec, "number out of range (not a finite double): " + text);
    }
    st.push_double(exact);
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }

 private:
  bool stop(boost::system::error_code& ec, std::string why) {
    fault = std::move(why);
    ec = json::error::syntax;
    return false;
  }

  // The keys seen in one open object. Plan objects hold a few keys, so
  // they are compared in a list whose strings keep their buffers from one
  // object to the next; an object of many keys (an "args" map) is hashed.
  class key_set {
   public:
    void clear() noexcept {
      count_ = 0;
      many_.clear();
    }
    // False when `k` was seen already.
    bool insert(std::string_view k) {
      if (count_ == few) return many_.insert(std::string(k)).second;
      const auto end = list_.begin() + static_cast<std::ptrdiff_t>(count_);
      if (std::find(list_.begin(), end, k) != end) return false;
      if (count_ == list_.size()) {
        list_.emplace_back(k);
      } else {
        list_[count_].assign(k);
      }
      if (++count_ == few) many_.insert(list_.begin(), list_.end());
      return true;
    }

   private:
    static constexpr std::size_t few = 16;
    std::vector<std::string> list_;
    std::size_t count_ = 0;
    std::unordered_set<std::string> many_;  // every key, once there are `few`
  };

  std::vector<key_set> keys_;  // of the open objects, innermost last
  json::monotonic_resource* arena_;
  std::size_t depth_ = 0;
  std::string key_;
  std::string number_;
};

}  // namespace

result<document> parse_text(std::string_view text) {
  if (text.size() > max_plan_size) {
    return fail(errc::invalid_plan, "the plan is " + std::to_string(text.size()) + " bytes, more than " +
                                        std::to_string(max_plan_size) + " (taskgroup::max_plan_size, 256 MiB)");
  }
  if (text.starts_with("\xEF\xBB\xBF")) {
    return fail(errc::invalid_plan,
                "line 1, column 1: a byte order mark (BOM) starts the text; plans are UTF-8 "
                "without one");
  }
  if (auto at = invalid_utf8_at(text); at != std::string_view::npos) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(text[at]);
    return fail(errc::invalid_plan,
                "invalid UTF-8 at " + position(text, at) + " (byte 0x" + hex[c >> 4] + hex[c & 15] + ")");
  }
  json::parse_options options;
  options.max_depth = max_json_depth;
  auto arena = std::make_unique<json::monotonic_resource>();
  json::basic_parser<strict_handler> p(options, arena.get());
  boost::system::error_code ec;
  const std::size_t consumed = p.write_some(false, text.data(), text.size(), ec);
  if (ec) {
    const strict_handler& h = p.handler();
    std::string what = h.fault;
    std::size_t at = consumed;
    if (h.at_key) {
      at = token_start(text, consumed);
    } else if (!what.empty()) {
      at = consumed - std::min(consumed, h.number_length);
    }
    if (what.empty()) {
      what = ec == json::error::too_deep ? "nested deeper than " + std::to_string(max_json_depth) +
                                               " levels (a step tree holds at most taskgroup::max_step_depth = " +
                                               std::to_string(max_step_depth) + " levels)"
                                         : ec.message();
    }
    return fail(errc::invalid_plan, position(text, at) + ": " + what);
  }
  if (text.substr(consumed).find_first_not_of(" \t\r\n") != std::string_view::npos) {
    return fail(errc::invalid_plan, position(text, consumed) + ": trailing characters after the JSON document");
  }
  // Constructed, not assigned: assigning a value to one of another
  // storage copies it.
  return document{std::move(arena), p.handler().st.release()};
}

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
      os << "\n" << std::string((depth - 1) * 2, ' ') << (v->is_object() ? "}" : "]");
      stack.pop_back();
      continue;
    }
    if (i != 0) os << ",\n";
    os << std::string(depth * 2, ' ');
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
