// taskgroup: the built-in value operators: ConstantFill and Copy, the
// vector operators (Append, Size, Sum, Get) and Concat.
//
// Sum of int64 values wraps around, as int64 arithmetic does.
#include "ops/builtins.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup::detail {

namespace {

// Concat's default separator (the schema's and the kernel's fallback).
constexpr std::string_view default_separator;

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
  TASKGROUP_TRY(std::string separator, ctx.args().get_or<std::string>("separator", std::string(default_separator)));
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

}  // namespace

void add_value_ops(builtin_table& t) {
  using k = argument_kind;
  const std::vector<argument_kind> any_kind{k::int64,      k::float64,      k::boolean,      k::string,
                                            k::int64_list, k::float64_list, k::boolean_list, k::string_list};
  const auto unbounded = operator_schema::unbounded;
  t.add(operator_schema("ConstantFill")
            .inputs(0)
            .outputs(1)
            .required_arg("value", any_kind, "the value; a list makes a vector")
            .doc("output = value")
            .factory(&constant_fill_factory));
  t.add(operator_schema("Copy").inputs(1).outputs(1).doc("output = a copy of input 0").factory(&copy_factory));

  t.add(operator_schema("Append")
            .inputs(2)
            .outputs(1)
            .doc("output = input 0 followed by input 1 (an element or a vector)")
            .factory(&append_factory));
  t.add(operator_schema("Size").inputs(1).outputs(1).doc("int64 length of a vector or string").factory(&size_factory));
  t.add(operator_schema("Sum")
            .inputs(1)
            .outputs(1)
            .doc("sum of a vector<int64> or vector<double>")
            .factory(&sum_factory));
  t.add(operator_schema("Get")
            .inputs(1, 2)
            .outputs(1)
            .arg("index", k::int64, "the index, unless given as int64 input 1")
            .doc("element of a vector at the index")
            .factory(&get_factory));
  t.add(operator_schema("Concat")
            .inputs(1, unbounded)
            .outputs(1)
            .arg_with_default("separator", std::string(default_separator), "text between the strings")
            .doc("joined strings")
            .factory(&concat_factory));
}

}  // namespace taskgroup::detail
