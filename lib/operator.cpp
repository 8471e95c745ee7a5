#include <taskgroup/operator.hpp>

#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <mutex>
#include <optional>

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

boost::asio::awaitable<status> op_kernel::run_async() {
  if (!startable_) co_return run();
  const boost::asio::any_io_executor ex = co_await boost::asio::this_coro::executor;
  co_return co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>, void(status)>(
      [this, &ex](auto handler) {
        // The coroutine's own slot is the run's: cancelling the awaiting
        // coroutine cancels the kernel's operation, as it would an Asio
        // operation awaited directly.
        const boost::asio::cancellation_slot slot = boost::asio::get_associated_cancellation_slot(handler);
        auto* t = new handler_target<decltype(handler)>(std::move(handler));
        start(ex, op_completion(*t, slot));
        t->started(ex);
      },
      boost::asio::use_awaitable);
}

void op_kernel::start(const boost::asio::any_io_executor& /*ex*/, op_completion done) noexcept {
  done(fail(errc::op_failed, "asynchronous operator has no callback form"));
}

// --- operator_schema ---------------------------------------------------------

operator_schema::operator_schema(std::string type) : type_(std::move(type)) {}

operator_schema& operator_schema::inputs(std::size_t min, std::size_t max) {
  min_in_ = min;
  max_in_ = max;
  return *this;
}

operator_schema& operator_schema::outputs(std::size_t min, std::size_t max) {
  min_out_ = min;
  max_out_ = max;
  return *this;
}

operator_schema& operator_schema::arg(std::string name, argument_kind kind, std::string doc) {
  return arg(std::move(name), std::vector<argument_kind>{kind}, std::move(doc));
}

operator_schema& operator_schema::arg(std::string name, std::vector<argument_kind> kinds, std::string doc) {
  args_.push_back({std::move(name), std::move(kinds), false, std::move(doc)});
  return *this;
}

operator_schema& operator_schema::required_arg(std::string name, argument_kind kind, std::string doc) {
  return required_arg(std::move(name), std::vector<argument_kind>{kind}, std::move(doc));
}

operator_schema& operator_schema::required_arg(std::string name, std::vector<argument_kind> kinds, std::string doc) {
  args_.push_back({std::move(name), std::move(kinds), true, std::move(doc)});
  return *this;
}

operator_schema& operator_schema::any_args() {
  any_args_ = true;
  return *this;
}

operator_schema& operator_schema::doc(std::string text) {
  doc_ = std::move(text);
  return *this;
}

operator_schema& operator_schema::factory(kernel_factory f, bool async) {
  factory_ = std::move(f);
  async_ = async;
  return *this;
}

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

std::string count_text(std::size_t min, std::size_t max) {
  if (min == max) return std::to_string(min);
  if (max == operator_schema::unbounded) return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

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

status operator_schema::validate(const op_def& def) const {
  if (def.inputs.size() < min_in_ || def.inputs.size() > max_in_) {
    return fail(errc::arity_mismatch,
                "expects " + count_text(min_in_, max_in_) + " input(s), got " + std::to_string(def.inputs.size()));
  }
  if (def.outputs.size() < min_out_ || def.outputs.size() > max_out_) {
    return fail(errc::arity_mismatch,
                "expects " + count_text(min_out_, max_out_) + " output(s), got " + std::to_string(def.outputs.size()));
  }
  for (const auto& spec : args_) {
    const argument* a = def.args.find(spec.name);
    if (a == nullptr) {
      if (spec.required) return fail(errc::bad_argument, "missing required argument " + quote(spec.name));
      continue;
    }
    if (std::find(spec.kinds.begin(), spec.kinds.end(), kind_of(*a)) == spec.kinds.end()) {
      std::string expected;
      for (auto k : spec.kinds) expected += (expected.empty() ? "" : " or ") + std::string(to_string(k));
      return fail(errc::bad_argument, "argument " + quote(spec.name) + ": expected " + expected + ", got " +
                                          std::string(to_string(kind_of(*a))));
    }
  }
  if (!any_args_) {
    for (const auto& item : def.args) {
      const std::string& name = item.first;
      bool known = std::any_of(args_.begin(), args_.end(), [&](const argument_spec& s) { return s.name == name; });
      if (!known) return fail(errc::bad_argument, "unknown argument " + quote(name));
    }
  }
  return ok();
}

result<std::unique_ptr<op_kernel>> operator_schema::instantiate(op_context& ctx) const {
  if (!factory_) return fail(errc::unknown_operator, "operator " + quote(type_) + " has no kernel");
  return factory_(ctx);
}

// --- operator_registry -------------------------------------------------------

operator_registry::operator_registry(const operator_registry& other) {
  std::shared_lock lock(other.mutex_);
  table_ = other.table_;
}

operator_registry& operator_registry::global() {
  static operator_registry* instance = [] {
    auto* r = new operator_registry;  // never destroyed: usable from static destructors
    (void)register_builtin_ops(*r);
    return r;
  }();
  return *instance;
}

status operator_registry::add(operator_schema schema) {
  std::unique_lock lock(mutex_);
  std::string type = schema.type();
  if (table_.count(type) != 0) {
    return fail(errc::duplicate_operator, "operator type " + quote(type) + " is already registered");
  }
  table_.emplace(std::move(type), std::make_shared<const operator_schema>(std::move(schema)));
  return ok();
}

void operator_registry::add_or_replace(operator_schema schema) {
  std::unique_lock lock(mutex_);
  std::string type = schema.type();
  table_.insert_or_assign(std::move(type), std::make_shared<const operator_schema>(std::move(schema)));
}

std::shared_ptr<const operator_schema> operator_registry::find(std::string_view type) const {
  std::shared_lock lock(mutex_);
  auto it = table_.find(std::string(type));
  return it == table_.end() ? nullptr : it->second;
}

result<std::shared_ptr<const operator_schema>> operator_registry::get(std::string_view type) const {
  if (auto s = find(type)) return s;
  return fail(errc::unknown_operator, "unknown operator type " + quote(type));
}

std::vector<std::string> operator_registry::types() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> names;
  names.reserve(table_.size());
  for (const auto& [n, s] : table_) names.push_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace taskgroup
