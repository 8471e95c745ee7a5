// taskgroup: the built-in arithmetic, comparison and boolean operators
// (Add Sub Mul Div Mod Negate, LT LE GT GE EQ NE, And Or Xor Not).
//
// Integer arithmetic wraps around (two's complement, as Caffe2 / numpy int64
// tensors do) instead of overflowing: Add, Sub, Mul, Negate, and Div of
// INT64_MIN by -1 never trap and never invoke undefined behaviour.
#include "ops/builtins.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace taskgroup::detail {

namespace {

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

// --- the fast path of a binary op ------------------------------------------

// True when `Op` is an integer division, whose fast path declines a zero
// divisor (the general path reports it).
template <class Op>
constexpr bool divides() noexcept {
  if constexpr (requires { Op::divides; }) {
    return Op::divides;
  } else {
    return false;
  }
}

// The fast path of every binary built-in: inputs `a` and `b` already hold
// an `In` each and `out` an `Out` (blob::exact), and `Op` accepts the
// operands. The result is computed before it is stored, so `out` may be
// `a` or `b`.
template <class In, class Out, class Op>
auto binary_fast_path(const blob* a, const blob* b, blob* out) noexcept {
  return [a, b, out]() noexcept {
    const In* x = a->exact<In>();
    if (x == nullptr) return false;
    const In* y = b->exact<In>();
    if (y == nullptr) return false;
    Out* o = out->exact<Out>();
    if (o == nullptr) return false;
    if constexpr (divides<Op>()) {
      if (*y == 0) return false;
    }
    *o = Op::apply(*x, *y);
    return true;
  };
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
  auto fast = binary_fast_path<std::int64_t, std::int64_t, Op>(a, b, out);
  return builtin_fast_kernel(fast, [a, b, out, c]() -> status {
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
  auto fast = binary_fast_path<std::int64_t, bool, Op>(a, b, out);
  return builtin_fast_kernel(fast, [a, b, out, c]() -> status {
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
  auto fast = binary_fast_path<bool, bool, Op>(a, b, out);
  return builtin_fast_kernel(fast, [a, b, out, c]() -> status {
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
  return builtin_fast_kernel(fast, [in, out, c]() -> status {
    if (const bool* x = in->try_get<bool>()) {
      out->set(!*x);
      return ok();
    }
    return input_type_error(*c, 0, "bool");
  });
}

}  // namespace

void add_arithmetic_ops(builtin_table& t) {
  t.add(
      operator_schema("Add").inputs(2).outputs(1).doc("x + y (int64 or double)").factory(&arithmetic_factory<add_op>));
  t.add(
      operator_schema("Sub").inputs(2).outputs(1).doc("x - y (int64 or double)").factory(&arithmetic_factory<sub_op>));
  t.add(
      operator_schema("Mul").inputs(2).outputs(1).doc("x * y (int64 or double)").factory(&arithmetic_factory<mul_op>));
  t.add(operator_schema("Div")
            .inputs(2)
            .outputs(1)
            .doc("x / y (int64 truncates and fails on zero, or double)")
            .factory(&arithmetic_factory<div_op>));
  t.add(operator_schema("Mod")
            .inputs(2)
            .outputs(1)
            .doc("x % y (int64 fails on zero, or double fmod)")
            .factory(&arithmetic_factory<mod_op>));
  t.add(operator_schema("Negate").inputs(1).outputs(1).doc("-x (int64 or double)").factory(&negate_factory));

  t.add(operator_schema("LT").inputs(2).outputs(1).doc("x < y").factory(&compare_factory<lt_op>));
  t.add(operator_schema("LE").inputs(2).outputs(1).doc("x <= y").factory(&compare_factory<le_op>));
  t.add(operator_schema("GT").inputs(2).outputs(1).doc("x > y").factory(&compare_factory<gt_op>));
  t.add(operator_schema("GE").inputs(2).outputs(1).doc("x >= y").factory(&compare_factory<ge_op>));
  t.add(operator_schema("EQ").inputs(2).outputs(1).doc("x == y (also bool, string)").factory(&compare_factory<eq_op>));
  t.add(operator_schema("NE").inputs(2).outputs(1).doc("x != y (also bool, string)").factory(&compare_factory<ne_op>));

  t.add(operator_schema("And").inputs(2).outputs(1).doc("x and y").factory(&logic_factory<and_op>));
  t.add(operator_schema("Or").inputs(2).outputs(1).doc("x or y").factory(&logic_factory<or_op>));
  t.add(operator_schema("Xor").inputs(2).outputs(1).doc("x xor y").factory(&logic_factory<xor_op>));
  t.add(operator_schema("Not").inputs(1).outputs(1).doc("not x").factory(&not_factory));
}

}  // namespace taskgroup::detail
