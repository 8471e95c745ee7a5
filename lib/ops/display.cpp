// taskgroup: how the built-ins show values (to_display_string, Print) and
// where Print's lines go (the print sink).
#include "ops/builtins.hpp"

#include <taskgroup/queue.hpp>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace taskgroup {

namespace {

void append_number(std::string& s, std::int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

// Shortest text that reads back as the same double.
void append_number(std::string& s, double v) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

template <class T>
void append_scalar(std::string& s, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    s += v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    s += v;
  } else {
    append_number(s, v);
  }
}

template <class T>
bool append_if(std::string& s, const blob& b) {
  if (const T* v = b.try_get<T>()) {
    append_scalar<T>(s, *v);
    return true;
  }
  if (const auto* vec = b.try_get<std::vector<T>>()) {
    s += '[';
    bool first = true;
    for (const auto& e : *vec) {
      if (!first) s += ", ";
      first = false;
      append_scalar<T>(s, e);
    }
    s += ']';
    return true;
  }
  return false;
}

// --- print sink --------------------------------------------------------------

struct print_state {
  std::mutex mutex;
  print_sink sink;  // empty: stdout
};

print_state& printer() {
  static auto* state = new print_state;  // never destroyed: usable from static destructors
  return *state;
}

}  // namespace

void detail::append_display(std::string& s, const blob& b) {
  if (!b.has_value()) {
    s += "<empty>";
    return;
  }
  if (append_if<std::int64_t>(s, b) || append_if<double>(s, b) || append_if<bool>(s, b) ||
      append_if<std::string>(s, b)) {
    return;
  }
  if (const queue_ptr* q = b.try_get<queue_ptr>()) {
    if (!*q) {
      s += "queue(null)";
      return;
    }
    s += "queue(";
    append_number(s, static_cast<std::int64_t>((*q)->size()));
    s += '/';
    append_number(s, static_cast<std::int64_t>((*q)->capacity()));
    if ((*q)->closed()) s += ", closed";
    s += ')';
    return;
  }
  s += '<';
  s += b.type_name();
  s += '>';
}

std::string detail::number_text(double v) {
  std::string s;
  append_number(s, v);
  return s;
}

print_sink set_print_sink(print_sink sink) {
  print_state& p = printer();
  std::lock_guard lock(p.mutex);
  return std::exchange(p.sink, std::move(sink));
}

// The sink is called under the lock: lines never interleave, and a sink
// that was replaced is never called afterwards. (So a sink must not call
// print_line or set_print_sink itself.)
void print_line(std::string_view line) {
  print_state& p = printer();
  std::lock_guard lock(p.mutex);
  if (p.sink) {
    p.sink(line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string to_display_string(const blob& b) {
  std::string s;
  detail::append_display(s, b);
  return s;
}

}  // namespace taskgroup
