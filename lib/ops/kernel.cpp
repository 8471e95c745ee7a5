// taskgroup: the operator machinery: arguments, the op context, and the
// kernels that adapt a callback-form run or a function to op_kernel.
#include <taskgroup/operator.hpp>

#include <taskgroup/workspace.hpp>

#include "ops/await_started.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace taskgroup {

std::string_view to_string(argument_kind kind) noexcept {
  switch (kind) {
    case argument_kind::int64: return "int64";
    case argument_kind::float64: return "double";
    case argument_kind::boolean: return "bool";
    case argument_kind::string: return "string";
    case argument_kind::int64_list: return "list<int64>";
    case argument_kind::float64_list: return "list<double>";
    case argument_kind::boolean_list: return "list<bool>";
    case argument_kind::string_list: return "list<string>";
  }
  return "unknown";
}

// --- arguments ---------------------------------------------------------------

arguments::arguments(std::initializer_list<std::pair<std::string, argument>> items) {
  for (const auto& [name, value] : items) set(name, value);
}

arguments& arguments::set(std::string name, argument value) {
  for (auto& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

const argument* arguments::find(std::string_view name) const noexcept {
  for (const auto& item : items_) {
    if (item.first == name) return &item.second;
  }
  return nullptr;
}

error arguments::kind_error(std::string_view name, argument_kind expected, const argument& got) {
  return {errc::bad_argument, "argument " + quote(name) + ": expected " + std::string(to_string(expected)) + ", got " +
                                  std::string(to_string(kind_of(got)))};
}

// --- op_context --------------------------------------------------------------

op_context::op_context(const op_def& def, workspace& ws, std::vector<std::shared_ptr<blob>> inputs,
                       std::vector<std::shared_ptr<blob>> outputs)
    : def_(&def), ws_(&ws), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

error op_context::input_error(std::size_t i, const std::string& expected) const {
  const blob& b = *inputs_[i];
  std::string where = "input #" + std::to_string(i) + " " + quote(def_->inputs[i]) + ": ";
  if (!b.has_value()) return {errc::blob_empty, where + "expected " + expected + ", but the blob has no value"};
  return {errc::type_mismatch, where + "expected " + expected + ", got " + b.type_name()};
}

// --- op_kernel ---------------------------------------------------------------

status op_kernel::run() { return fail(errc::op_failed, "asynchronous operator called synchronously"); }

namespace {

// The completion of a callback-form run awaited by `run_async`: owns the
// coroutine's handler until the run ends (or is abandoned with it). An end
// reported inside `start` (or a completion dropped there) is posted, so
// that the coroutine never resumes inside its own initiation.
template <class Handler>
class handler_target final : public op_completion::target {
 public:
  explicit handler_target(Handler h) : handler_(std::move(h)) {}

  void complete(status st) noexcept override {
    if (starting_) {
      early_ = std::move(st);
      return;
    }
    Handler h = std::move(handler_);
    delete this;
    std::move(h)(std::move(st));
  }
  void abandon() noexcept override {
    if (starting_) {
      early_ = fail(errc::op_failed, "asynchronous operator dropped its completion");
      return;
    }
    delete this;
  }
  // After `start` returned: posts an end that came during it.
  void started(const boost::asio::any_io_executor& ex) {
    starting_ = false;
    if (!early_) return;  // the run pends; complete() comes later
    boost::asio::post(ex,
                      [h = std::move(handler_), st = std::move(*early_)]() mutable { std::move(h)(std::move(st)); });
    delete this;
  }

 private:
  Handler handler_;
  std::optional<status> early_;
  bool starting_ = true;
};

}  // namespace

namespace detail {

boost::asio::awaitable<status> await_started(const boost::asio::any_io_executor& ex, start_fn start, void* arg) {
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>, void(status)>(
      [&ex, start, arg](auto handler) {
        // The coroutine's own slot is the run's: cancelling the awaiting
        // coroutine cancels the operation, as it would an Asio operation
        // awaited directly.
        const boost::asio::cancellation_slot slot = boost::asio::get_associated_cancellation_slot(handler);
        auto* t = new handler_target<decltype(handler)>(std::move(handler));
        start(arg, ex, op_completion(*t, slot));
        t->started(ex);
      },
      boost::asio::use_awaitable);
}

}  // namespace detail

boost::asio::awaitable<status> op_kernel::run_async() {
  if (!startable_) co_return run();
  const boost::asio::any_io_executor ex = co_await boost::asio::this_coro::executor;
  co_return co_await detail::await_started(
      ex,
      [](void* k, const boost::asio::any_io_executor& e, op_completion done) {
        static_cast<op_kernel*>(k)->start(e, std::move(done));
      },
      this);
}

void op_kernel::start(const boost::asio::any_io_executor& /*ex*/, op_completion done) noexcept {
  done(fail(errc::op_failed, "asynchronous operator has no callback form"));
}

std::string op_kernel::waiting_for() const { return {}; }

namespace {

class function_kernel final : public op_kernel {
 public:
  function_kernel(sync_function f, op_context& ctx) : f_(std::move(f)), ctx_(&ctx) {}
  status run() override { return f_(*ctx_); }

 private:
  sync_function f_;
  op_context* ctx_;
};

class async_function_kernel final : public op_kernel {
 public:
  async_function_kernel(async_function f, op_context& ctx) : op_kernel(true), f_(std::move(f)), ctx_(&ctx) {}
  boost::asio::awaitable<status> run_async() override { return f_(*ctx_); }

 private:
  async_function f_;
  op_context* ctx_;
};

}  // namespace

operator_schema& operator_schema::sync(sync_function f) {
  return factory([f = std::move(f)](op_context& ctx) -> result<std::unique_ptr<op_kernel>> {
    return std::unique_ptr<op_kernel>(std::make_unique<function_kernel>(f, ctx));
  });
}

operator_schema& operator_schema::async(async_function f) {
  return factory(
      [f = std::move(f)](op_context& ctx) -> result<std::unique_ptr<op_kernel>> {
        return std::unique_ptr<op_kernel>(std::make_unique<async_function_kernel>(f, ctx));
      },
      true);
}

}  // namespace taskgroup
