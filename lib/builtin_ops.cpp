// taskgroup: the built-in operators (the table is in builtin_ops.hpp).
//
// Everything is resolved once, when a net is instantiated: a factory parses
// and checks the arguments and captures raw pointers to the bound blobs
// (the op_context owns them through shared_ptrs and outlives the kernel; the
// net instance never moves its contexts). A run only checks the input types
// and computes; messages are built on failure only. The net runner prefixes
// `net "n" op #i (Type): ` to every error, so messages here do not.
//
// Integer arithmetic wraps around (two's complement, as Caffe2 / numpy int64
// tensors do) instead of overflowing: Add, Sub, Mul, Negate, Sum, and Div of
// INT64_MIN by -1 never trap and never invoke undefined behaviour.
#include <taskgroup/builtin_ops.hpp>

#include <taskgroup/queue.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup {

namespace asio = boost::asio;

namespace {

using kernel_result = result<std::unique_ptr<op_kernel>>;

// --- messages (cold paths) ---------------------------------------------------

std::string input_where(const op_context& ctx, std::size_t i) {
  return "input #" + std::to_string(i) + " " + quote(ctx.def().inputs[i]) + ": ";
}

std::string output_where(const op_context& ctx, std::size_t i) {
  return "output #" + std::to_string(i) + " " + quote(ctx.def().outputs[i]) + ": ";
}

// Input `i` holds no value or a value of another type than `expected`; the
// same wording as op_context::try_input.
[[gnu::cold]] error input_type_error(const op_context& ctx, std::size_t i, std::string_view expected) {
  const blob& b = ctx.input_blob(i);
  std::string where = input_where(ctx, i);
  if (!b.has_value()) {
    return {errc::blob_empty, where + "expected " + std::string(expected) + ", but the blob has no value"};
  }
  return {errc::type_mismatch, where + "expected " + std::string(expected) + ", got " + b.type_name()};
}

[[gnu::cold]] error empty_input_error(const op_context& ctx, std::size_t i) {
  return {errc::blob_empty, input_where(ctx, i) + "the blob has no value"};
}

template <class... Ts>
bool holds_any(const blob& b) noexcept {
  return (b.holds<Ts>() || ...);
}

// Inputs 0 and 1 should both hold one of `Ts`, the same one.
template <class... Ts>
[[gnu::cold]] error pair_type_error(const op_context& ctx, std::string_view expected) {
  for (std::size_t i = 0; i < 2; ++i) {
    if (!holds_any<Ts...>(ctx.input_blob(i))) return input_type_error(ctx, i, expected);
  }
  return {errc::type_mismatch, "inputs must have the same type, got " + ctx.input_blob(0).type_name() + " and " +
                                   ctx.input_blob(1).type_name()};
}

// The first of inputs 0..1 that does not hold a bool.
[[gnu::cold]] error bool_pair_error(const op_context& ctx) {
  return input_type_error(ctx, ctx.input_blob(0).holds<bool>() ? 1 : 0, "bool");
}

[[gnu::cold]] error queue_input_error(const op_context& ctx, std::size_t i) {
  if (ctx.input_blob(i).holds<queue_ptr>()) return {errc::blob_empty, input_where(ctx, i) + "the queue blob is null"};
  return input_type_error(ctx, i, "queue");
}

// --- value rendering ---------------------------------------------------------

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

void append_display(std::string& s, const blob& b) {
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

std::string number_text(double v) {
  std::string s;
  append_number(s, v);
  return s;
}

// --- wrapping int64 arithmetic -----------------------------------------------

constexpr std::uint64_t bits(std::int64_t v) noexcept { return static_cast<std::uint64_t>(v); }
constexpr std::int64_t wrap(std::uint64_t v) noexcept { return static_cast<std::int64_t>(v); }

// --- ConstantFill ------------------------------------------------------------

kernel_result constant_fill_factory(op_context& ctx) {
  const argument* value = ctx.args().find("value");
  if (value == nullptr) return fail(errc::bad_argument, "missing required argument " + quote("value"));
  blob* out = &ctx.output_blob(0);
  // One kernel per kind: the run copy-assigns the parsed value in place
  // (std::vector<bool> for a bool list, std::int64_t for int64, ...).
  return std::visit(
      [out](const auto& v) -> std::unique_ptr<op_kernel> {
        return make_kernel([out, v]() -> status {
          out->set(v);
          return ok();
        });
      },
      *value);
}

// --- Copy --------------------------------------------------------------------

template <class T>
bool copy_as(const blob* in, blob* out) {
  if (const T* v = in->try_get<T>()) {
    out->set(*v);  // assigns in place when `out` already holds a T
    return true;
  }
  if (const auto* vec = in->try_get<std::vector<T>>()) {
    out->set(*vec);
    return true;
  }
  return false;
}

kernel_result copy_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, out, c]() -> status {
    if (!in->has_value()) return empty_input_error(*c, 0);
    if (in == out) return ok();
    if (copy_as<std::int64_t>(in, out) || copy_as<double>(in, out) || copy_as<bool>(in, out) ||
        copy_as<std::string>(in, out)) {
      return ok();
    }
    result<blob> copy = in->clone();
    if (!copy) return error(copy.error().code, input_where(*c, 0) + copy.error().message);
    *out = std::move(copy).value();
    return ok();
  });
}

// --- arithmetic --------------------------------------------------------------

struct add_op {
  static constexpr bool divides = false;
  static std::int64_t apply(std::int64_t x, std::int64_t y) noexcept { return wrap(bits(x) + bits(y)); }
  static double apply(double x, double y) noexcept { return x + y; }
};
struct sub_op {
  static constexpr bool divides = false;
  static std::int64_t apply(std::int64_t x, std::int64_t y) noexcept { return wrap(bits(x) - bits(y)); }
  static double apply(double x, double y) noexcept { return x - y; }
};
struct mul_op {
  static constexpr bool divides = false;
  static std::int64_t apply(std::int64_t x, std::int64_t y) noexcept { return wrap(bits(x) * bits(y)); }
  static double apply(double x, double y) noexcept { return x * y; }
};
// Truncating division, as C++ (and Caffe2's Div on integers).
struct div_op {
  static constexpr bool divides = true;
  static std::int64_t apply(std::int64_t x, std::int64_t y) noexcept { return y == -1 ? wrap(0 - bits(x)) : x / y; }
  static double apply(double x, double y) noexcept { return x / y; }
};
// The remainder has the sign of the dividend, for int64 (%) and double (fmod).
struct mod_op {
  static constexpr bool divides = true;
  static std::int64_t apply(std::int64_t x, std::int64_t y) noexcept { return y == -1 ? 0 : x % y; }
  static double apply(double x, double y) noexcept { return std::fmod(x, y); }
};

template <class Op>
kernel_result arithmetic_factory(op_context& ctx) {
  const blob* a = &ctx.input_blob(0);
  const blob* b = &ctx.input_blob(1);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  // The result is computed before it is stored, so `out` may be `a` or `b`.
  auto fast = [a, b, out]() noexcept {
    const auto* x = a->exact<std::int64_t>();
    if (x == nullptr) return false;
    const auto* y = b->exact<std::int64_t>();
    if (y == nullptr) return false;
    auto* o = out->exact<std::int64_t>();
    if (o == nullptr) return false;
    if constexpr (Op::divides) {
      if (*y == 0) return false;
    }
    *o = Op::apply(*x, *y);
    return true;
  };
  return make_fast_kernel(fast, [a, b, out, c]() -> status {
    if (const auto* x = a->try_get<std::int64_t>()) {
      if (const auto* y = b->try_get<std::int64_t>()) [[likely]] {
        if constexpr (Op::divides) {
          if (*y == 0) [[unlikely]]
            return fail(errc::op_failed, "division by zero");
        }
        out->set(Op::apply(*x, *y));
        return ok();
      }
    } else if (const auto* xd = a->try_get<double>()) {
      if (const auto* yd = b->try_get<double>()) [[likely]] {
        out->set(Op::apply(*xd, *yd));
        return ok();
      }
    }
    return pair_type_error<std::int64_t, double>(*c, "int64 or double");
  });
}

kernel_result negate_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, out, c]() -> status {
    if (const auto* x = in->try_get<std::int64_t>()) {
      out->set(wrap(0 - bits(*x)));
      return ok();
    }
    if (const auto* xd = in->try_get<double>()) {
      out->set(-*xd);
      return ok();
    }
    return input_type_error(*c, 0, "int64 or double");
  });
}

// --- comparisons -------------------------------------------------------------

struct lt_op {
  static constexpr bool equality = false;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x < y;
  }
};
struct le_op {
  static constexpr bool equality = false;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x <= y;
  }
};
struct gt_op {
  static constexpr bool equality = false;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x > y;
  }
};
struct ge_op {
  static constexpr bool equality = false;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x >= y;
  }
};
struct eq_op {
  static constexpr bool equality = true;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x == y;
  }
};
struct ne_op {
  static constexpr bool equality = true;
  template <class T>
  static bool apply(const T& x, const T& y) noexcept {
    return x != y;
  }
};

// True (and `out` set) when both inputs hold a T.
template <class T, class Op>
bool compare_as(const blob* a, const blob* b, blob* out) {
  const T* x = a->try_get<T>();
  if (x == nullptr) return false;
  const T* y = b->try_get<T>();
  if (y == nullptr) return false;
  out->set(Op::apply(*x, *y));  // computed first: `out` may be an input
  return true;
}

template <class Op>
kernel_result compare_factory(op_context& ctx) {
  const blob* a = &ctx.input_blob(0);
  const blob* b = &ctx.input_blob(1);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  auto fast = [a, b, out]() noexcept {
    const auto* x = a->exact<std::int64_t>();
    if (x == nullptr) return false;
    const auto* y = b->exact<std::int64_t>();
    if (y == nullptr) return false;
    bool* o = out->exact<bool>();
    if (o == nullptr) return false;
    *o = Op::apply(*x, *y);
    return true;
  };
  return make_fast_kernel(fast, [a, b, out, c]() -> status {
    if (compare_as<std::int64_t, Op>(a, b, out) || compare_as<double, Op>(a, b, out)) return ok();
    if constexpr (Op::equality) {
      if (compare_as<bool, Op>(a, b, out) || compare_as<std::string, Op>(a, b, out)) return ok();
      return pair_type_error<std::int64_t, double, bool, std::string>(*c, "int64, double, bool or string");
    } else {
      return pair_type_error<std::int64_t, double>(*c, "int64 or double");
    }
  });
}

// --- boolean logic -----------------------------------------------------------

struct and_op {
  static bool apply(bool x, bool y) noexcept { return x && y; }
};
struct or_op {
  static bool apply(bool x, bool y) noexcept { return x || y; }
};
struct xor_op {
  static bool apply(bool x, bool y) noexcept { return x != y; }
};

template <class Op>
kernel_result logic_factory(op_context& ctx) {
  const blob* a = &ctx.input_blob(0);
  const blob* b = &ctx.input_blob(1);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  auto fast = [a, b, out]() noexcept {
    const bool* x = a->exact<bool>();
    if (x == nullptr) return false;
    const bool* y = b->exact<bool>();
    if (y == nullptr) return false;
    bool* o = out->exact<bool>();
    if (o == nullptr) return false;
    *o = Op::apply(*x, *y);
    return true;
  };
  return make_fast_kernel(fast, [a, b, out, c]() -> status {
    if (const bool* x = a->try_get<bool>()) {
      if (const bool* y = b->try_get<bool>()) {
        out->set(Op::apply(*x, *y));
        return ok();
      }
    }
    return bool_pair_error(*c);
  });
}

kernel_result not_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  auto fast = [in, out]() noexcept {
    const bool* x = in->exact<bool>();
    if (x == nullptr) return false;
    bool* o = out->exact<bool>();
    if (o == nullptr) return false;
    *o = !*x;
    return true;
  };
  return make_fast_kernel(fast, [in, out, c]() -> status {
    if (const bool* x = in->try_get<bool>()) {
      out->set(!*x);
      return ok();
    }
    return input_type_error(*c, 0, "bool");
  });
}

// --- counters ----------------------------------------------------------------

kernel_result create_counter_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t init, ctx.args().get_or<std::int64_t>("init", 0));
  blob* out = &ctx.output_blob(0);
  return make_kernel([out, init]() -> status {
    out->set(init);
    return ok();
  });
}

// Caffe2 CountDown: a positive counter is decremented and the op outputs
// false; a counter at (or below) zero is left alone and the op outputs true.
kernel_result count_down_factory(op_context& ctx) {
  blob* counter = &ctx.input_blob(0);
  blob* done = &ctx.output_blob(0);
  const op_context* c = &ctx;
  auto fast = [counter, done]() noexcept {
    std::int64_t* n = counter->exact<std::int64_t>();
    if (n == nullptr) return false;
    bool* d = done->exact<bool>();
    if (d == nullptr) return false;
    const bool finished = *n <= 0;
    if (!finished) --*n;
    *d = finished;
    return true;
  };
  return make_fast_kernel(fast, [counter, done, c]() -> status {
    std::int64_t* n = counter->try_get<std::int64_t>();
    if (n == nullptr) [[unlikely]]
      return input_type_error(*c, 0, "int64");
    const bool finished = *n <= 0;
    if (!finished) --*n;
    done->set(finished);
    return ok();
  });
}

kernel_result reset_counter_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t init, ctx.args().get_or<std::int64_t>("init", 0));
  blob* counter = &ctx.input_blob(0);
  const op_context* c = &ctx;
  return make_kernel([counter, init, c]() -> status {
    std::int64_t* n = counter->try_get<std::int64_t>();
    if (n == nullptr) [[unlikely]]
      return input_type_error(*c, 0, "int64");
    *n = init;
    return ok();
  });
}

// Iter and AtomicIter. Caffe2's AtomicIter guards its counter with a mutex
// because Caffe2 nets may run ops of one workspace on several threads; here
// every op of a node runs on that node's strand, so the plain increment is
// already atomic with respect to every other op that can see the blob.
kernel_result iter_factory(op_context& ctx) {
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  if (ctx.num_inputs() == 1 && &ctx.input_blob(0) != out) {
    // Caffe2 enforces Iter in place: input 0, when given, is output 0.
    return fail(errc::bad_argument, "input 0 " + quote(ctx.def().inputs[0]) + " must be output 0 " +
                                        quote(ctx.def().outputs[0]) + " (the counter is updated in place)");
  }
  if (!out->has_value()) {
    out->set(std::int64_t{0});
  } else if (!out->holds<std::int64_t>()) {
    return fail(errc::type_mismatch, output_where(ctx, 0) + "expected int64, got " + out->type_name());
  }
  auto fast = [out]() noexcept {
    std::int64_t* n = out->exact<std::int64_t>();
    if (n == nullptr) return false;
    *n = wrap(bits(*n) + 1);
    return true;
  };
  return make_fast_kernel(fast, [out, c]() -> status {
    if (std::int64_t* n = out->try_get<std::int64_t>()) [[likely]] {
      *n = wrap(bits(*n) + 1);
      return ok();
    }
    if (!out->has_value()) {  // emptied since instantiation: start over
      out->set(std::int64_t{1});
      return ok();
    }
    return error(errc::type_mismatch, output_where(*c, 0) + "expected int64, got " + out->type_name());
  });
}

// --- Print, Sleep, Fail ------------------------------------------------------

kernel_result print_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string prefix, ctx.args().get_or<std::string>("prefix", ""));
  std::vector<std::pair<const blob*, std::string>> items;
  items.reserve(ctx.num_inputs());
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    items.emplace_back(&ctx.input_blob(i), prefix + ctx.def().inputs[i] + ": ");
  }
  return make_kernel([items = std::move(items)]() -> status {
    std::string line;
    for (const auto& [b, head] : items) {
      line.assign(head);
      append_display(line, *b);
      print_line(line);
    }
    return ok();
  });
}

// Sleep has a callback form: a task waiting on it holds no coroutine
// frame, only its entry in the context's queue of waits (sleep_until).
class sleep_kernel final : public op_kernel {
 public:
  explicit sleep_kernel(std::chrono::steady_clock::duration d) noexcept : op_kernel(callback_form), duration_(d) {}

  void start(const asio::any_io_executor& ex, op_completion done) noexcept override {
    sleep_for(ex, duration_, std::move(done));
  }

 private:
  std::chrono::steady_clock::duration duration_;
};

// Longest accepted Sleep: 10^12 ms (about 31 years) stays far from the
// range of steady_clock::duration.
constexpr double max_sleep_ms = 1e12;

kernel_result sleep_factory(op_context& ctx) {
  const argument* ms = ctx.args().find("ms");
  if (ms == nullptr) return fail(errc::bad_argument, "missing required argument " + quote("ms"));
  double value = 0;
  if (const auto* i = std::get_if<std::int64_t>(ms)) {
    value = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(ms)) {
    value = *d;
  } else {
    return fail(errc::bad_argument,
                "argument " + quote("ms") + ": expected int64 or double, got " + std::string(to_string(kind_of(*ms))));
  }
  if (!(value >= 0 && value <= max_sleep_ms)) {  // also rejects NaN
    return fail(errc::bad_argument,
                "argument " + quote("ms") + " must be between 0 and 1e12 milliseconds, got " + number_text(value));
  }
  auto d =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(value));
  return std::unique_ptr<op_kernel>(std::make_unique<sleep_kernel>(d));
}

kernel_result fail_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string message, ctx.args().get_or<std::string>("message", "Fail operator"));
  return make_kernel([message = std::move(message)]() -> status { return fail(errc::op_failed, message); });
}

// --- vectors -----------------------------------------------------------------

// out = a ++ b where a is empty or a vector<T> and b a T or a vector<T>.
template <class T>
status append_typed(blob* a, const blob* b, blob* out, const op_context& ctx) {
  using vec = std::vector<T>;
  const T* elem = b->try_get<T>();
  const vec* tail = elem != nullptr ? nullptr : b->try_get<vec>();
  if (elem == nullptr && tail == nullptr) {
    return input_type_error(ctx, 1, type_name<T>() + " or " + type_name<vec>());
  }
  auto append_to = [&](vec& v) {
    if (elem != nullptr) {
      v.push_back(*elem);
    } else if (tail == &v) {  // Append(x, x): doubles x
      const std::size_t n = v.size();
      v.reserve(2 * n);
      for (std::size_t i = 0; i < n; ++i) v.push_back(v[i]);
    } else {
      v.insert(v.end(), tail->begin(), tail->end());
    }
  };
  if (out == a) {  // in place, no copy of the existing elements
    vec* v = a->try_get<vec>();
    if (v == nullptr) v = &a->emplace<vec>();
    append_to(*v);
    return ok();
  }
  const vec* head = a->try_get<vec>();
  if (out == b) {  // `out` is the tail: build aside, then store
    vec v;
    if (head != nullptr) v = *head;
    append_to(v);
    out->set(std::move(v));
    return ok();
  }
  vec* v = out->try_get<vec>();
  if (v == nullptr) v = &out->emplace<vec>();
  if (head != nullptr) {
    v->assign(head->begin(), head->end());  // reuses the capacity of `out`
  } else {
    v->clear();
  }
  append_to(*v);
  return ok();
}

template <class T>
bool element_or_vector(const blob& b) noexcept {
  return b.holds<T>() || b.holds<std::vector<T>>();
}

kernel_result append_factory(op_context& ctx) {
  blob* a = &ctx.input_blob(0);
  const blob* b = &ctx.input_blob(1);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([a, b, out, c]() -> status {
    if (a->has_value()) {
      if (a->holds<std::vector<std::int64_t>>()) return append_typed<std::int64_t>(a, b, out, *c);
      if (a->holds<std::vector<double>>()) return append_typed<double>(a, b, out, *c);
      if (a->holds<std::vector<bool>>()) return append_typed<bool>(a, b, out, *c);
      if (a->holds<std::vector<std::string>>()) return append_typed<std::string>(a, b, out, *c);
      return input_type_error(*c, 0, "a vector");
    }
    // No value yet: an empty vector of the type of input 1.
    if (element_or_vector<std::int64_t>(*b)) return append_typed<std::int64_t>(a, b, out, *c);
    if (element_or_vector<double>(*b)) return append_typed<double>(a, b, out, *c);
    if (element_or_vector<bool>(*b)) return append_typed<bool>(a, b, out, *c);
    if (element_or_vector<std::string>(*b)) return append_typed<std::string>(a, b, out, *c);
    return input_type_error(*c, 1, "int64, double, bool, string or a vector of them");
  });
}

template <class T>
bool size_of(const blob* in, std::size_t& n) noexcept {
  if (const auto* v = in->try_get<std::vector<T>>()) {
    n = v->size();
    return true;
  }
  return false;
}

kernel_result size_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, out, c]() -> status {
    std::size_t n = 0;
    if (const auto* s = in->try_get<std::string>()) {
      n = s->size();
    } else if (!(size_of<std::int64_t>(in, n) || size_of<double>(in, n) || size_of<bool>(in, n) ||
                 size_of<std::string>(in, n))) {
      return input_type_error(*c, 0, "a vector or string");
    }
    out->set(static_cast<std::int64_t>(n));
    return ok();
  });
}

kernel_result sum_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, out, c]() -> status {
    if (const auto* v = in->try_get<std::vector<std::int64_t>>()) {
      std::uint64_t sum = 0;
      for (std::int64_t x : *v) sum += bits(x);
      out->set(wrap(sum));
      return ok();
    }
    if (const auto* vd = in->try_get<std::vector<double>>()) {
      double sum = 0;
      for (double x : *vd) sum += x;
      out->set(sum);
      return ok();
    }
    return input_type_error(*c, 0, "vector<int64> or vector<double>");
  });
}

[[gnu::cold]] error out_of_range(std::int64_t index, std::size_t size) {
  return {errc::op_failed,
          "index " + std::to_string(index) + " out of range for a vector of size " + std::to_string(size)};
}

template <class T>
bool get_as(const blob* in, std::int64_t index, blob* out, status& st) {
  const auto* v = in->try_get<std::vector<T>>();
  if (v == nullptr) return false;
  if (index < 0 || static_cast<std::uint64_t>(index) >= v->size()) [[unlikely]] {
    st = out_of_range(index, v->size());
  } else {
    // Safe when `out` is `in`: emplace builds the new value before
    // dropping the vector.
    out->set((*v)[static_cast<std::size_t>(index)]);
  }
  return true;
}

kernel_result get_factory(op_context& ctx) {
  const bool has_arg = ctx.args().has("index");
  if (ctx.num_inputs() == 2 && has_arg) {
    return fail(errc::bad_argument, "give the index either as argument " + quote("index") + " or as input 1, not both");
  }
  if (ctx.num_inputs() == 1 && !has_arg) {
    return fail(errc::bad_argument, "missing argument " + quote("index") + " (or an int64 input 1)");
  }
  std::int64_t fixed = 0;
  if (has_arg) {
    auto r = ctx.args().get<std::int64_t>("index");
    if (!r) return fail(r.error());
    fixed = r.value();  // a negative index is out of range when the op runs (no Python-style indexing)
  }
  const blob* in = &ctx.input_blob(0);
  const blob* index_blob = ctx.num_inputs() == 2 ? &ctx.input_blob(1) : nullptr;
  blob* out = &ctx.output_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, index_blob, out, c, fixed]() -> status {
    std::int64_t index = fixed;
    if (index_blob != nullptr) {
      const auto* i = index_blob->try_get<std::int64_t>();
      if (i == nullptr) [[unlikely]]
        return input_type_error(*c, 1, "int64");
      index = *i;
    }
    status st = ok();
    if (get_as<std::int64_t>(in, index, out, st) || get_as<double>(in, index, out, st) ||
        get_as<bool>(in, index, out, st) || get_as<std::string>(in, index, out, st)) {
      return st;
    }
    return input_type_error(*c, 0, "a vector");
  });
}

// --- strings -----------------------------------------------------------------

kernel_result concat_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string separator, ctx.args().get_or<std::string>("separator", ""));
  std::vector<const blob*> inputs;
  inputs.reserve(ctx.num_inputs());
  blob* out = &ctx.output_blob(0);
  bool out_is_input = false;
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(&ctx.input_blob(i));
    out_is_input = out_is_input || inputs.back() == out;
  }
  const op_context* c = &ctx;
  return make_kernel([inputs = std::move(inputs), separator = std::move(separator), out, out_is_input, c]() -> status {
    std::size_t total = separator.size() * (inputs.size() - 1);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto* s = inputs[i]->try_get<std::string>();
      if (s == nullptr) [[unlikely]]
        return input_type_error(*c, i, "string");
      total += s->size();
    }
    auto join = [&](std::string& dst) {
      dst.clear();
      dst.reserve(total);
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (i != 0) dst += separator;
        if (const auto* s = inputs[i]->try_get<std::string>()) dst += *s;  // checked above
      }
    };
    if (out_is_input) {  // build aside: `out` is read while joining
      std::string joined;
      join(joined);
      out->set(std::move(joined));
      return ok();
    }
    std::string* dst = out->try_get<std::string>();
    if (dst == nullptr) dst = &out->emplace<std::string>();
    join(*dst);  // reuses the capacity of `out`
    return ok();
  });
}

// --- queues ------------------------------------------------------------------

kernel_result create_queue_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t capacity, ctx.args().get<std::int64_t>("capacity"));
  if (capacity < 1) {
    return fail(errc::bad_argument,
                "argument " + quote("capacity") + " must be at least 1, got " + std::to_string(capacity));
  }
  blob* out = &ctx.output_blob(0);
  const auto cap = static_cast<std::size_t>(capacity);
  return make_kernel([out, cap]() -> status {
    out->set(std::make_shared<blob_queue>(cap));
    return ok();
  });
}

class enqueue_kernel final : public op_kernel {
 public:
  explicit enqueue_kernel(const op_context& ctx) noexcept
      : op_kernel(true), ctx_(&ctx), queue_(&ctx.input_blob(0)), value_(&ctx.input_blob(1)) {}

  asio::awaitable<status> run_async() override {
    const queue_ptr* qp = queue_->try_get<queue_ptr>();
    if (qp == nullptr || !*qp) co_return queue_input_error(*ctx_, 0);
    // Our own reference: the queue outlives the wait even if its blob is
    // overwritten meanwhile.
    queue_ptr q = *qp;
    if (!value_->has_value()) co_return empty_input_error(*ctx_, 1);
    result<blob> copy = value_->clone();
    if (!copy) co_return error(copy.error().code, input_where(*ctx_, 1) + copy.error().message);
    co_return co_await q->push(std::move(copy).value());
  }

 private:
  const op_context* ctx_;
  const blob* queue_;
  const blob* value_;
};

class dequeue_kernel final : public op_kernel {
 public:
  explicit dequeue_kernel(const op_context& ctx) noexcept
      : op_kernel(true),
        ctx_(&ctx),
        queue_(&ctx.input_blob(0)),
        value_(&ctx.output_blob(0)),
        status_(&ctx.output_blob(1)) {}

  asio::awaitable<status> run_async() override {
    const queue_ptr* qp = queue_->try_get<queue_ptr>();
    if (qp == nullptr || !*qp) co_return queue_input_error(*ctx_, 0);
    queue_ptr q = *qp;  // see Enqueue
    result<std::optional<blob>> item = co_await q->pop();
    if (!item) co_return item.error();
    if (item.value()) {
      *value_ = std::move(*item.value());
      status_->set(true);
    } else {  // closed and drained: the value output is left alone
      status_->set(false);
    }
    co_return ok();
  }

 private:
  const op_context* ctx_;
  const blob* queue_;
  blob* value_;
  blob* status_;
};

kernel_result close_queue_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, c]() -> status {
    const queue_ptr* q = in->try_get<queue_ptr>();
    if (q == nullptr || !*q) return queue_input_error(*c, 0);
    (*q)->close();
    return ok();
  });
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
  append_display(s, b);
  return s;
}

status register_builtin_ops(operator_registry& registry) {
  using k = argument_kind;
  const std::vector<argument_kind> any_kind{k::int64,      k::float64,      k::boolean,      k::string,
                                            k::int64_list, k::float64_list, k::boolean_list, k::string_list};
  const auto unbounded = operator_schema::unbounded;

  status first = ok();
  // Registers every type it can; reports the first failure.
  auto add = [&](operator_schema& schema) {
    status st = registry.add(std::move(schema));
    if (!st && first) first = std::move(st);
  };

  add(operator_schema("ConstantFill")
          .inputs(0)
          .outputs(1)
          .required_arg("value", any_kind, "the value; a list makes a vector")
          .doc("output = value")
          .factory(&constant_fill_factory));
  add(operator_schema("Copy").inputs(1).outputs(1).doc("output = a copy of input 0").factory(&copy_factory));

  add(operator_schema("Add").inputs(2).outputs(1).doc("x + y (int64 or double)").factory(&arithmetic_factory<add_op>));
  add(operator_schema("Sub").inputs(2).outputs(1).doc("x - y (int64 or double)").factory(&arithmetic_factory<sub_op>));
  add(operator_schema("Mul").inputs(2).outputs(1).doc("x * y (int64 or double)").factory(&arithmetic_factory<mul_op>));
  add(operator_schema("Div")
          .inputs(2)
          .outputs(1)
          .doc("x / y (int64 truncates and fails on zero, or double)")
          .factory(&arithmetic_factory<div_op>));
  add(operator_schema("Mod")
          .inputs(2)
          .outputs(1)
          .doc("x % y (int64 fails on zero, or double fmod)")
          .factory(&arithmetic_factory<mod_op>));
  add(operator_schema("Negate").inputs(1).outputs(1).doc("-x (int64 or double)").factory(&negate_factory));

  add(operator_schema("LT").inputs(2).outputs(1).doc("x < y").factory(&compare_factory<lt_op>));
  add(operator_schema("LE").inputs(2).outputs(1).doc("x <= y").factory(&compare_factory<le_op>));
  add(operator_schema("GT").inputs(2).outputs(1).doc("x > y").factory(&compare_factory<gt_op>));
  add(operator_schema("GE").inputs(2).outputs(1).doc("x >= y").factory(&compare_factory<ge_op>));
  add(operator_schema("EQ").inputs(2).outputs(1).doc("x == y (also bool, string)").factory(&compare_factory<eq_op>));
  add(operator_schema("NE").inputs(2).outputs(1).doc("x != y (also bool, string)").factory(&compare_factory<ne_op>));

  add(operator_schema("And").inputs(2).outputs(1).doc("x and y").factory(&logic_factory<and_op>));
  add(operator_schema("Or").inputs(2).outputs(1).doc("x or y").factory(&logic_factory<or_op>));
  add(operator_schema("Xor").inputs(2).outputs(1).doc("x xor y").factory(&logic_factory<xor_op>));
  add(operator_schema("Not").inputs(1).outputs(1).doc("not x").factory(&not_factory));

  add(operator_schema("CreateCounter")
          .inputs(0)
          .outputs(1)
          .arg("init", k::int64, "initial count (default 0)")
          .doc("counter = init")
          .factory(&create_counter_factory));
  add(operator_schema("CountDown")
          .inputs(1)
          .outputs(1)
          .doc("counter > 0: decrement, done = false; else done = true")
          .factory(&count_down_factory));
  add(operator_schema("ResetCounter")
          .inputs(1)
          .outputs(0)
          .arg("init", k::int64, "the count to reset to (default 0)")
          .doc("counter = init")
          .factory(&reset_counter_factory));
  add(operator_schema("Iter")
          .inputs(0, 1)
          .outputs(1)
          .doc("output += 1 (starts at 0); input 0, if any, is output 0")
          .factory(&iter_factory));
  add(operator_schema("AtomicIter")
          .inputs(0, 1)
          .outputs(1)
          .doc("as Iter (ops of one node never run concurrently)")
          .factory(&iter_factory));

  add(operator_schema("Print")
          .inputs(1, unbounded)
          .outputs(0)
          .arg("prefix", k::string, "text written before each line")
          .doc("one line `<prefix><blob>: <value>` per input to the print sink")
          .factory(&print_factory));
  add(operator_schema("Sleep")
          .inputs(0)
          .outputs(0)
          .required_arg("ms", {k::int64, k::float64}, "milliseconds")
          .doc("waits on a timer (asynchronous, cancellable)")
          .factory(&sleep_factory, /*async=*/true));
  add(operator_schema("Fail")
          .inputs(0, unbounded)
          .outputs(0)
          .arg("message", k::string, "the error message (default \"Fail operator\")")
          .doc("fails with errc::op_failed")
          .factory(&fail_factory));

  add(operator_schema("Append")
          .inputs(2)
          .outputs(1)
          .doc("output = input 0 followed by input 1 (an element or a vector)")
          .factory(&append_factory));
  add(operator_schema("Size").inputs(1).outputs(1).doc("int64 length of a vector or string").factory(&size_factory));
  add(operator_schema("Sum")
          .inputs(1)
          .outputs(1)
          .doc("sum of a vector<int64> or vector<double>")
          .factory(&sum_factory));
  add(operator_schema("Get")
          .inputs(1, 2)
          .outputs(1)
          .arg("index", k::int64, "the index, unless given as int64 input 1")
          .doc("element of a vector at the index")
          .factory(&get_factory));
  add(operator_schema("Concat")
          .inputs(1, unbounded)
          .outputs(1)
          .arg("separator", k::string, "text between the strings (default none)")
          .doc("joined strings")
          .factory(&concat_factory));

  add(operator_schema("CreateQueue")
          .inputs(0)
          .outputs(1)
          .required_arg("capacity", k::int64, "most values held (at least 1)")
          .doc("output = a new bounded queue")
          .factory(&create_queue_factory));
  add(operator_schema("Enqueue")
          .inputs(2)
          .outputs(0)
          .doc("pushes a copy of input 1; waits while full; asynchronous")
          .factory([](op_context& ctx)
                       -> kernel_result { return std::unique_ptr<op_kernel>(std::make_unique<enqueue_kernel>(ctx)); },
                   /*async=*/true));
  add(operator_schema("Dequeue")
          .inputs(1)
          .outputs(2)
          .doc("pops into output 0 with output 1 = true; output 1 = false once closed and drained; asynchronous")
          .factory([](op_context& ctx)
                       -> kernel_result { return std::unique_ptr<op_kernel>(std::make_unique<dequeue_kernel>(ctx)); },
                   /*async=*/true));
  add(operator_schema("CloseQueue").inputs(1).outputs(0).doc("closes the queue").factory(&close_queue_factory));

  return first;
}

}  // namespace taskgroup
