// taskgroup: the built-in counters (CreateCounter, CountDown, ResetCounter,
// Iter, AtomicIter). Counts wrap around as int64 arithmetic does.
#include "ops/builtins.hpp"

#include <cstdint>
#include <string>

namespace taskgroup::detail {

namespace {

// The count of CreateCounter and ResetCounter without `init` (the schema's
// default and the kernels' fallback).
constexpr std::int64_t default_init = 0;

std::string output_where(const op_context& ctx, std::size_t i) {
  return "output #" + std::to_string(i) + " " + quote(ctx.def().outputs[i]) + ": ";
}

kernel_result create_counter_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t init, ctx.args().get_or<std::int64_t>("init", default_init));
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
  return builtin_fast_kernel(fast, [counter, done, c]() -> status {
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
  TASKGROUP_TRY(std::int64_t init, ctx.args().get_or<std::int64_t>("init", default_init));
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
  return builtin_fast_kernel(fast, [out, c]() -> status {
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

}  // namespace

void add_counter_ops(builtin_table& t) {
  t.add(operator_schema("CreateCounter")
            .inputs(0)
            .outputs(1)
            .arg_with_default("init", default_init, "initial count")
            .doc("counter = init")
            .factory(&create_counter_factory));
  t.add(operator_schema("CountDown")
            .inputs(1)
            .outputs(1)
            .doc("counter > 0: decrement, done = false; else done = true")
            .factory(&count_down_factory));
  t.add(operator_schema("ResetCounter")
            .inputs(1)
            .outputs(0)
            .arg_with_default("init", default_init, "the count to reset to")
            .doc("counter = init")
            .factory(&reset_counter_factory));
  t.add(operator_schema("Iter")
            .inputs(0, 1)
            .outputs(1)
            .doc("output += 1 (starts at 0); input 0, if any, is output 0")
            .factory(&iter_factory));
  t.add(operator_schema("AtomicIter")
            .inputs(0, 1)
            .outputs(1)
            .doc("as Iter (ops of one node never run concurrently)")
            .factory(&iter_factory));
}

}  // namespace taskgroup::detail
