// taskgroup: the built-in Print, Sleep, Fail and FailTimes.
#include "ops/builtins.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

// The arguments' defaults (the schemas' and the kernels' fallbacks).
constexpr std::string_view default_prefix;
constexpr std::string_view default_message = "Fail operator";

kernel_result print_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string prefix, ctx.args().get_or<std::string>("prefix", std::string(default_prefix)));
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

// Longest accepted Sleep: 10^12 ms (about 31 years) stays far from the
// range of steady_clock::duration.
constexpr double max_sleep_ms = 1e12;

// The one range rule of a Sleep's duration, given by its argument or read
// from its input; `what` names where the value came from, `given` the
// value as given (an int64 past 2^53 is not its double).
result<std::chrono::steady_clock::duration> sleep_duration(double ms, const std::string& what,
                                                           const std::string& given) {
  if (!(ms >= 0 && ms <= max_sleep_ms)) {  // also rejects NaN
    return fail(errc::bad_argument, what + " must be between 0 and 1e12 milliseconds, got " + given);
  }
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(ms));
}
result<std::chrono::steady_clock::duration> sleep_duration(double ms, const std::string& what) {
  return sleep_duration(ms, what, number_text(ms));
}
result<std::chrono::steady_clock::duration> sleep_duration(std::int64_t ms, const std::string& what) {
  return sleep_duration(static_cast<double>(ms), what, std::to_string(ms));
}

// What a pending Sleep waits for (op_kernel::waiting_for). The time left
// is not kept (a waiting task holds the kernel): a cancelled wait says it.
std::string sleeping(std::chrono::steady_clock::duration d) {
  return "sleeping for " + number_text(std::chrono::duration<double, std::milli>(d).count()) + " ms";
}

// A Sleep of zero ends inside `start` (op_kernel::start allows it): a
// server that feeds 0 to skip a wait pays no trip through the timer queue
// and no handler. A longer one waits in the context's queue.
void sleep_or_finish(const asio::any_io_executor& ex, std::chrono::steady_clock::duration d,
                     op_completion done) noexcept {
  if (d <= std::chrono::steady_clock::duration::zero()) {
    done(ok());
    return;
  }
  sleep_for(ex, d, std::move(done));
}

// Sleep has a callback form: a task waiting on it holds no coroutine
// frame, only its entry in the context's queue of waits (sleep_until).
class sleep_kernel final : public op_kernel {
 public:
  explicit sleep_kernel(std::chrono::steady_clock::duration d) noexcept : op_kernel(callback_form), duration_(d) {}

  void start(const asio::any_io_executor& ex, op_completion done) noexcept override {
    sleep_or_finish(ex, duration_, std::move(done));
  }

  [[nodiscard]] std::string waiting_for() const override { return sleeping(duration_); }

 private:
  std::chrono::steady_clock::duration duration_;
};

// A Sleep whose duration is its input's value at each run (a kernel of its
// own: a waiting task holds the kernel, and the common Sleep stays small).
class sleep_input_kernel final : public op_kernel {
 public:
  explicit sleep_input_kernel(const op_context& ctx) noexcept : op_kernel(callback_form), ctx_(&ctx) {}

  void start(const asio::any_io_executor& ex, op_completion done) noexcept override {
    result<std::chrono::steady_clock::duration> d = duration();
    if (!d) {
      done(d.error());
      return;
    }
    sleep_or_finish(ex, d.value(), std::move(done));
  }

  // The input's value now (that of the pending run, unless it changed).
  [[nodiscard]] std::string waiting_for() const override {
    result<std::chrono::steady_clock::duration> d = duration();
    return d ? input_where(*ctx_, 0) + sleeping(d.value()) : std::string();
  }

 private:
  [[nodiscard]] result<std::chrono::steady_clock::duration> duration() const {
    const blob& b = ctx_->input_blob(0);
    if (const auto* i = b.try_get<std::int64_t>()) return sleep_duration(*i, input_where(*ctx_, 0) + "the duration");
    if (const auto* d = b.try_get<double>()) return sleep_duration(*d, input_where(*ctx_, 0) + "the duration");
    return input_type_error(*ctx_, 0, "int64 or double milliseconds");
  }

  const op_context* ctx_;
};

kernel_result sleep_factory(op_context& ctx) {
  const argument* ms = ctx.args().find("ms");
  if (ctx.num_inputs() == 1) {
    if (ms != nullptr) {
      return fail(errc::bad_argument, "the duration is either argument " + quote("ms") + " or input #0, not both");
    }
    return std::unique_ptr<op_kernel>(std::make_unique<sleep_input_kernel>(ctx));
  }
  if (ms == nullptr) {
    return fail(errc::bad_argument, "missing argument " + quote("ms") + " (or input #0, a blob holding the duration)");
  }
  result<std::chrono::steady_clock::duration> d = error(errc::bad_argument, "");
  if (const auto* i = std::get_if<std::int64_t>(ms)) {
    d = sleep_duration(*i, "argument " + quote("ms"));
  } else if (const auto* v = std::get_if<double>(ms)) {
    d = sleep_duration(*v, "argument " + quote("ms"));
  } else {
    return fail(errc::bad_argument,
                "argument " + quote("ms") + ": expected int64 or double, got " + std::string(to_string(kind_of(*ms))));
  }
  if (!d) return d.error();
  return std::unique_ptr<op_kernel>(std::make_unique<sleep_kernel>(d.value()));
}

kernel_result fail_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string message, ctx.args().get_or<std::string>("message", std::string(default_message)));
  return make_kernel([message = std::move(message)]() -> status { return fail(errc::op_failed, message); });
}

// FailTimes: fails its first `times` runs within one run of the group,
// counted by the run (run_context::count, keyed by the op's definition,
// which every attempt's binding shares), then succeeds.
constexpr std::int64_t max_fail_times = std::int64_t{1} << 40;

kernel_result fail_times_factory(op_context& ctx) {
  TASKGROUP_TRY(const std::int64_t times, ctx.args().get<std::int64_t>("times"));
  if (times < 0 || times > max_fail_times) {
    return fail(errc::bad_argument, "FailTimes: argument \"times\" must be in [0, " + std::to_string(max_fail_times) +
                                        "], got " + std::to_string(times));
  }
  TASKGROUP_TRY(std::string message, ctx.args().get_or<std::string>("message", std::string(default_message)));
  return make_kernel([&ctx, times, message = std::move(message)]() -> status {
    const std::uint64_t n = ctx.run().count(&ctx.def());
    if (n > static_cast<std::uint64_t>(times)) return ok();
    return fail(errc::op_failed,
                message + " (run " + std::to_string(n) + " of the " + std::to_string(times) + " that fail)");
  });
}

}  // namespace

void add_effect_ops(builtin_table& t) {
  using k = argument_kind;
  const auto unbounded = operator_schema::unbounded;
  t.add(operator_schema("Print")
            .inputs(1, unbounded)
            .outputs(0)
            .arg_with_default("prefix", std::string(default_prefix), "text written before each line")
            .doc("one line `<prefix><blob>: <value>` per input to the print sink")
            .factory(&print_factory));
  t.add(operator_schema("Sleep")
            .inputs(0, 1)
            .outputs(0)
            .arg("ms", {k::int64, k::float64}, "milliseconds (without an input)")
            .doc("waits `ms` milliseconds, or as many as its input holds (int64 or double, read at each run), "
                 "on a timer (asynchronous, cancellable); 0 ends at once")
            .factory(&sleep_factory, /*async=*/true));
  t.add(operator_schema("Fail")
            .inputs(0, unbounded)
            .outputs(0)
            .arg_with_default("message", std::string(default_message), "the error message")
            .doc("fails with errc::op_failed")
            .factory(&fail_factory));
  t.add(operator_schema("FailTimes")
            .inputs(0, unbounded)
            .outputs(0)
            .required_arg("times", k::int64, "how many of its first runs in one run of the group fail, in [0, 2^40]")
            .arg_with_default("message", std::string(default_message), "the error message")
            .doc("fails with errc::op_failed the first `times` times it runs within one run of the group (counted "
                 "across retried attempts), then succeeds")
            .factory(&fail_times_factory));
}

}  // namespace taskgroup::detail
