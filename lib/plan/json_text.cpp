// Plan text in: a strict JSON parser (a Boost.JSON basic_parser whose handler
// refuses what the plan format does not allow), whole or streamed.
#include "plan/internal.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

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

// What a parse builds: the whole document, nothing (a check and an
// outline), or each element of an array in turn.
enum class build { document, nothing, elements };

// Stops the parse at what a plan may not hold, saying why in `fault`, and
// builds what `build` asks for, as Boost.JSON's own parser does.
class strict_handler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  // `arena`: where values are built (null when nothing is).
  strict_handler(build b, json::monotonic_resource* arena) noexcept : build_(b), arena_(arena) {}

  json::value_stack st;
  // Why the handler stopped the parse, and where the offending token
  // starts: the parser stops at a key's closing quote or past a number.
  std::string fault;
  bool at_key = false;
  std::size_t number_length = 0;
  // build::nothing: the text, the outline of a root object (set at its
  // start), and whether a top-level key could not be located in the text.
  std::string_view text;
  std::optional<outline>* found = nullptr;
  bool unlocated = false;
  // build::elements: called with each element; its error, which stopped the parse.
  const element_fn* each = nullptr;
  std::optional<error> failure;

  bool on_document_begin(boost::system::error_code&) {
    // A plan is read once and dropped whole: its values come from one
    // growing arena (a malloc per value was a quarter of reading a
    // 200,000-task plan, and its headers a third of the document's size),
    // held by the document, not shared (see plan_detail::document).
    if (build_ == build::document) st.reset(json::storage_ptr(arena_));
    return true;
  }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_array_begin(boost::system::error_code&) {
    open();
    return true;
  }
  bool on_array_end(std::size_t n, boost::system::error_code& ec) {
    if (building()) st.push_array(n);  // at the array's own level
    --level_;
    return element_end(ec);
  }
  bool on_object_begin(boost::system::error_code&) {
    if (build_ == build::nothing && level_ == 0) found->emplace();
    open();
    if (checks_keys()) {
      // The key lists of closed objects are kept for reuse.
      if (depth_ == keys_.size()) keys_.emplace_back();
      keys_[depth_++].clear();
    }
    return true;
  }
  bool on_object_end(std::size_t n, boost::system::error_code& ec) {
    if (building()) st.push_object(n);  // at the object's own level
    --level_;
    if (checks_keys()) --depth_;
    return element_end(ec);
  }
  bool on_string_part(json::string_view s, std::size_t, boost::system::error_code&) {
    if (starts_element()) begin_scalar_part();
    if (building() || in_scalar_) st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, boost::system::error_code& ec) {
    return scalar(ec, [&] { st.push_string(s); });
  }
  bool on_key_part(json::string_view s, std::size_t, boost::system::error_code&) {
    if (checks_keys()) key_.append(s.data(), s.size());
    if (building()) st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, boost::system::error_code& ec) {
    if (checks_keys()) {
      // Whole in `s` unless parts came first.
      std::string_view key(s.data(), s.size());
      const bool parts = !key_.empty();
      if (parts) key = key_.append(key);
      if (!keys_[depth_ - 1].insert(key)) {
        at_key = true;
        return stop(ec, "duplicate key " + quote(key));
      }
      key_.clear();
      if (build_ == build::nothing && level_ == 1) locate(key, s, parts);
    }
    if (building()) st.push_key(s);
    return true;
  }
  bool on_number_part(json::string_view s, boost::system::error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, boost::system::error_code& ec) {
    number_.clear();
    return scalar(ec, [&] { st.push_int64(i); });
  }
  bool on_uint64(std::uint64_t u, json::string_view, boost::system::error_code& ec) {
    number_.clear();
    return scalar(ec, [&] { st.push_uint64(u); });
  }
  bool on_double(double d, json::string_view s, boost::system::error_code& ec) {
    number_.append(s.data(), s.size());
    const std::string digits = std::move(number_);
    number_.clear();
    number_length = digits.size();
    if (digits.find_first_of(".eE") == std::string::npos) {
      return stop(ec, "integer out of range (integers fit in 64 bits): " + digits);
    }
    // Exactly rounded (Boost.JSON's own conversion may be off by an ulp,
    // and then a written plan would not read back the same).
    double exact = 0;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), exact);
    if (err == std::errc::result_out_of_range && std::isfinite(d) && std::abs(d) < 1) {
      exact = std::copysign(0.0, d);  // underflow: the nearest double is zero
    } else if (err != std::errc() || end != digits.data() + digits.size() || !std::isfinite(exact)) {
      return stop(ec, "number out of range (not a finite double): " + digits);
    }
    return scalar(ec, [&] { st.push_double(exact); });
  }
  bool on_bool(bool b, boost::system::error_code& ec) {
    return scalar(ec, [&] { st.push_bool(b); });
  }
  bool on_null(boost::system::error_code& ec) {
    return scalar(ec, [&] { st.push_null(); });
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }

 private:
  // Values are built at this level: everywhere for a document, inside an
  // element (the array itself is level 1) for elements.
  [[nodiscard]] bool building() const noexcept {
    return build_ == build::document || (build_ == build::elements && level_ >= 2);
  }
  // A value at this level is an element (of the array being streamed).
  [[nodiscard]] bool starts_element() const noexcept { return build_ == build::elements && level_ == 1; }
  // Duplicate keys are looked for in the first pass over the text (a
  // streamed array's second pass reads checked text).
  [[nodiscard]] bool checks_keys() const noexcept { return build_ != build::elements; }

  void open() {
    if (starts_element()) st.reset(json::storage_ptr(arena_));
    ++level_;
  }
  // A part of a string split by the parser: an element may start with it.
  void begin_scalar_part() {
    if (!in_scalar_) {
      st.reset(json::storage_ptr(arena_));
      in_scalar_ = true;
    }
  }
  template <class Push>
  bool scalar(boost::system::error_code& ec, Push push) {
    if (building()) {
      push();
      return true;
    }
    if (!starts_element()) return true;
    if (!std::exchange(in_scalar_, false)) st.reset(json::storage_ptr(arena_));
    push();
    return finish_element(ec);
  }
  bool element_end(boost::system::error_code& ec) { return !starts_element() || finish_element(ec); }
  // Hands the element built to `each`, then drops it and its arena's
  // blocks before the next one.
  bool finish_element(boost::system::error_code& ec) {
    status r = ok();
    {
      const json::value v = st.release();
      r = (*each)(v, next_++);
    }
    arena_->release();
    if (r) return true;
    failure = r.error();
    ec = json::error::syntax;
    return false;
  }
  // Where the value of top-level key `key` (seen as `s`) starts in `text`.
  void locate(std::string_view key, json::string_view s, bool parts) {
    const char* begin = text.data();
    const char* end = begin + text.size();
    if (parts || s.data() < begin || s.data() + s.size() >= end) {
      unlocated = true;  // an escaped key: not a view of the text
      return;
    }
    std::size_t i = static_cast<std::size_t>(s.data() + s.size() - begin) + 1;  // past the closing quote
    auto blanks = [&] {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    };
    blanks();
    if (i < text.size() && text[i] == ':') ++i;
    blanks();
    (*found)->members.emplace_back(std::string(key), i);
  }
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

  build build_;
  json::monotonic_resource* arena_;
  std::size_t level_ = 0;      // open arrays and objects
  bool in_scalar_ = false;     // an element string begun in parts
  std::size_t next_ = 0;       // the next element's index
  std::vector<key_set> keys_;  // of the open objects, innermost last
  std::size_t depth_ = 0;
  std::string key_;
  std::string number_;
};

json::parse_options strict_options() {
  json::parse_options options;
  options.max_depth = max_json_depth;
  return options;
}

// What any plan, inputs or JSON text must be before it is parsed.
status check_text(std::string_view text, text_kind kind) {
  // What the text is, and what such texts are, in its errors.
  const std::string_view subject = kind == text_kind::plan     ? "the plan"
                                   : kind == text_kind::inputs ? "the inputs text"
                                                               : "the JSON text";
  const std::string_view texts = kind == text_kind::plan     ? "plans are"
                                 : kind == text_kind::inputs ? "inputs are"
                                                             : "JSON text is";
  if (text.size() > max_plan_size) {
    return fail(errc::invalid_plan, std::string(subject) + " is " + std::to_string(text.size()) + " bytes, more than " +
                                        std::to_string(max_plan_size) + std::string(max_plan_size_named));
  }
  if (text.starts_with("\xEF\xBB\xBF")) {
    return fail(errc::invalid_plan, "line 1, column 1: a byte order mark (BOM) starts the text; " + std::string(texts) +
                                        " UTF-8 without one");
  }
  if (auto at = invalid_utf8_at(text); at != std::string_view::npos) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(text[at]);
    return fail(errc::invalid_plan,
                "invalid UTF-8 at " + position(text, at) + " (byte 0x" + hex[c >> 4] + hex[c & 15] + ")");
  }
  return ok();
}

// Parses the value at `at` in `text` with `p`, returning where it ends;
// `whole`: the value is the whole text (trailing characters are an error).
result<std::size_t> run_parser(json::basic_parser<strict_handler>& p, std::string_view text, std::size_t at,
                               bool whole) {
  boost::system::error_code ec;
  const std::size_t consumed = p.write_some(false, text.data() + at, text.size() - at, ec);
  const strict_handler& h = p.handler();
  if (ec) {
    if (h.failure) return *h.failure;
    std::string what = h.fault;
    std::size_t fault_at = at + consumed;
    if (h.at_key) {
      fault_at = token_start(text, fault_at);
    } else if (!what.empty()) {
      fault_at -= std::min(consumed, h.number_length);
    }
    if (what.empty()) {
      what = ec == json::error::too_deep ? "nested deeper than " + std::to_string(max_json_depth) +
                                               " levels (a step tree holds at most taskgroup::max_step_depth = " +
                                               std::to_string(max_step_depth) + " levels)"
                                         : ec.message();
    }
    return fail(errc::invalid_plan, position(text, fault_at) + ": " + what);
  }
  const std::size_t end = at + consumed;
  if (whole && text.substr(end).find_first_not_of(" \t\r\n") != std::string_view::npos) {
    return fail(errc::invalid_plan, position(text, end) + ": trailing characters after the JSON document");
  }
  return end;
}

}  // namespace

result<document> parse_text(std::string_view text, text_kind kind) {
  TASKGROUP_TRY(check_text(text, kind));
  return parse_value_at(text, 0, true);
}

result<document> parse_value_at(std::string_view text, std::size_t at, bool whole) {
  auto arena = std::make_unique<json::monotonic_resource>();
  json::basic_parser<strict_handler> p(strict_options(), build::document, arena.get());
  TASKGROUP_TRY(run_parser(p, text, at, whole));
  // Constructed, not assigned: assigning a value to one of another
  // storage copies it.
  return document{std::move(arena), p.handler().st.release()};
}

result<std::optional<outline>> outline_text(std::string_view text) {
  TASKGROUP_TRY(check_text(text, text_kind::plan));
  std::optional<outline> found;
  json::basic_parser<strict_handler> p(strict_options(), build::nothing, nullptr);
  p.handler().text = text;
  p.handler().found = &found;
  TASKGROUP_TRY(run_parser(p, text, 0, true));
  if (p.handler().unlocated) found.reset();
  return found;
}

status each_element(std::string_view text, std::size_t at, const element_fn& f) {
  // One element at a time in this buffer (and blocks beyond it for a
  // large one, freed after it).
  std::array<unsigned char, 16384> buffer;
  json::monotonic_resource arena(buffer.data(), buffer.size());
  json::basic_parser<strict_handler> p(strict_options(), build::elements, &arena);
  p.handler().each = &f;
  TASKGROUP_TRY(run_parser(p, text, at, false));
  return ok();
}

}  // namespace taskgroup::plan_detail
