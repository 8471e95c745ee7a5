// taskgroup: operators, their definitions, schemas and registry.
//
// An operator definition (`op_def`) is data: a type name, input and output
// blob names, and typed arguments. A registry maps type names to schemas:
// the declared input/output counts, the accepted arguments and a factory
// that turns a definition bound in a workspace into a runnable kernel.
// Kernels are synchronous (a plain call, run inline by the net runner) or
// asynchronous (an `asio::awaitable`, awaited by the net runner). Only the
// asynchronous ones suspend: ops are not coroutines, so a net of
// synchronous ops costs about a loop of virtual calls. A synchronous kernel
// marked CPU-bound (`operator_schema::offload`) runs on a compute executor
// while its task waits off the node strand.
//
// Threading: `op_def`, `arguments` and `operator_schema` are value types
// (reentrant). `operator_registry` is thread-safe. An `op_context` and its
// kernel are strand-bound, like the workspace they were bound in (an
// offloaded kernel runs elsewhere, under the blob rule of `offload`).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/run_context.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup {

class workspace;
class run_context;
class operator_schema;
namespace detail {
class offload_kernel;
}

/// The value of one op argument.
using argument = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, std::vector<double>,
                              std::vector<bool>, std::vector<std::string>>;

/// The kind of an argument, in the order of the `argument` alternatives.
enum class argument_kind { int64, float64, boolean, string, int64_list, float64_list, boolean_list, string_list };

/// `int64`, `double`, `bool`, `string`, `list<int64>`, ...
TASKGROUP_API std::string_view to_string(argument_kind kind) noexcept;
/// The kind of an argument value.
inline argument_kind kind_of(const argument& a) noexcept { return static_cast<argument_kind>(a.index()); }

namespace detail {
template <class T>
struct argument_kind_of;
// clang-format off
template <> struct argument_kind_of<std::int64_t> { static constexpr auto value = argument_kind::int64; };
template <> struct argument_kind_of<double> { static constexpr auto value = argument_kind::float64; };
template <> struct argument_kind_of<bool> { static constexpr auto value = argument_kind::boolean; };
template <> struct argument_kind_of<std::string> { static constexpr auto value = argument_kind::string; };
template <> struct argument_kind_of<std::vector<std::int64_t>> { static constexpr auto value = argument_kind::int64_list; };
template <> struct argument_kind_of<std::vector<double>> { static constexpr auto value = argument_kind::float64_list; };
template <> struct argument_kind_of<std::vector<bool>> { static constexpr auto value = argument_kind::boolean_list; };
template <> struct argument_kind_of<std::vector<std::string>> { static constexpr auto value = argument_kind::string_list; };
// clang-format on
}  // namespace detail

/// The named arguments of an op, in insertion order; a name appears once.
class TASKGROUP_API arguments {
 public:
  arguments() = default;
  arguments(std::initializer_list<std::pair<std::string, argument>> items);

  /// Sets (or replaces) argument `name`.
  arguments& set(std::string name, argument value);
  /// The argument named `name`, or null.
  [[nodiscard]] const argument* find(std::string_view name) const noexcept;
  [[nodiscard]] bool has(std::string_view name) const noexcept { return find(name) != nullptr; }

  /// Argument `name` as a `T` (one of the `argument` alternatives). Errors:
  /// `errc::bad_argument` when it is missing or of another kind (`argument
  /// "value": expected int64, got string`).
  template <class T>
  [[nodiscard]] result<T> get(std::string_view name) const {
    const argument* a = find(name);
    if (a == nullptr) return fail(errc::bad_argument, "missing argument " + quote(name));
    if (const T* v = std::get_if<T>(a)) return *v;
    return kind_error(name, detail::argument_kind_of<T>::value, *a);
  }
  /// Same, with `fallback` when the argument is absent.
  template <class T>
  [[nodiscard]] result<T> get_or(std::string_view name, T fallback) const {
    if (!has(name)) return fallback;
    return get<T>(name);
  }

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }
  friend bool operator==(const arguments&, const arguments&) = default;

 private:
  static error kind_error(std::string_view name, argument_kind expected, const argument& got);
  std::vector<std::pair<std::string, argument>> items_;
};

/// An operator definition: what a net holds. Plain data.
struct TASKGROUP_API op_def {
  /// The registered type name (`Add`), or the label of an inline op.
  std::string type;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  arguments args;
  /// Set only for inline (lambda) operators: the schema travels with the
  /// definition instead of being looked up. Such an op is not serializable.
  std::shared_ptr<const operator_schema> inline_schema;
  /// Run this op's kernel on the compute executor, off the node strand
  /// (plan key `"offload": true`), as for a schema marked `offload()`.
  /// Only synchronous kernels can be offloaded: binding another is an
  /// `errc::bad_argument`. See `operator_schema::offload`.
  bool offload = false;
};

/// What a kernel sees of its op: the bound input and output blobs, the
/// arguments and the workspace. Built once when a net is instantiated.
class TASKGROUP_API op_context {
 public:
  op_context(const op_def& def, workspace& ws, std::vector<std::shared_ptr<blob>> inputs,
             std::vector<std::shared_ptr<blob>> outputs);

  [[nodiscard]] const op_def& def() const noexcept { return *def_; }
  [[nodiscard]] const std::string& type() const noexcept { return def_->type; }
  [[nodiscard]] const arguments& args() const noexcept { return def_->args; }
  [[nodiscard]] workspace& ws() const noexcept { return *ws_; }
  [[nodiscard]] std::size_t num_inputs() const noexcept { return inputs_.size(); }
  [[nodiscard]] std::size_t num_outputs() const noexcept { return outputs_.size(); }

  /// The blob bound to input / output `i` (stable for the kernel's life).
  [[nodiscard]] blob& input_blob(std::size_t i) const noexcept { return *inputs_[i]; }
  [[nodiscard]] blob& output_blob(std::size_t i) const noexcept { return *outputs_[i]; }

  /// Input `i` as a `T`. Errors: `errc::blob_empty` / `errc::type_mismatch`
  /// naming the input index, the blob, the expected and the actual type.
  template <class T>
  [[nodiscard]] result<const T*> try_input(std::size_t i) const noexcept {
    if (const T* p = inputs_[i]->try_get<T>()) return p;
    return input_error(i, type_name<T>());
  }
  /// Same, throwing `taskgroup::system_error` (the net runner turns it
  /// into the op's error).
  template <class T>
  [[nodiscard]] const T& input(std::size_t i) const {
    return *try_input<T>(i).value();
  }
  /// Stores `value` in output `i` and returns a reference to it.
  template <class T>
  std::decay_t<T>& set_output(std::size_t i, T&& value) const {
    return outputs_[i]->set(std::forward<T>(value));
  }
  /// Output `i` as a `T&`, default-constructing it if it holds no `T`.
  template <class T>
  T& output(std::size_t i) const {
    if (T* p = outputs_[i]->try_get<T>()) return *p;
    return outputs_[i]->emplace<T>();
  }
  /// Argument `name`; throws `taskgroup::system_error` when missing or of
  /// the wrong kind.
  template <class T>
  [[nodiscard]] T arg(std::string_view name) const {
    return args().get<T>(name).value();
  }
  template <class T>
  [[nodiscard]] T arg_or(std::string_view name, T fallback) const {
    return args().get_or<T>(name, std::move(fallback)).value();
  }

  /// The run this call of the kernel serves (see `run_context`: its
  /// identity, deadline and attempt; valid during `run()` and `start()`,
  /// and in `run_async` until its first suspension). A net shared by
  /// overlapping runs sees each call's own run. Threading: as the kernel
  /// (an offloaded kernel reads it on the compute thread).
  [[nodiscard]] const run_context& run() const noexcept;

  /// True once the run of an offloaded kernel has been asked to stop (the
  /// task was cancelled or failed elsewhere): a long kernel polls it and
  /// returns early, e.g. with `fail(errc::cancelled, ...)`; the op ends
  /// cancelled whatever it returns. A running kernel cannot be interrupted
  /// otherwise, so a cancelled run waits until the kernel's next check.
  /// Always false for a kernel that runs on the node strand (its task is
  /// cancelled between ops). Threading: thread-safe (an atomic load).
  [[nodiscard]] bool stop_requested() const noexcept {
    return stop_ != nullptr && stop_->load(std::memory_order_relaxed);
  }

 private:
  friend class detail::offload_kernel;
  [[nodiscard]] error input_error(std::size_t i, const std::string& expected) const;

  const op_def* def_;
  workspace* ws_;
  const std::atomic<bool>* stop_ = nullptr;  // an offloaded kernel's stop request
  std::vector<std::shared_ptr<blob>> inputs_;
  std::vector<std::shared_ptr<blob>> outputs_;
};

/// How an asynchronous kernel started through its callback form
/// (`op_kernel::start`) reports its end: a move-only handle to call once
/// with the op's status, and the cancellation slot of that one run.
///
/// Call it through the executor `start` was given (e.g. from the handler
/// of an Asio operation started on it), or inside `start` itself when the
/// op ends at once; never straight from the slot's cancellation handler
/// (cancel the operation there; its handler then reports the end).
/// Destroying it uncalled (e.g. with a pending operation when its
/// io_context is destroyed) tells its target that the run will never end.
/// Threading: strand-bound, like the kernel.
class TASKGROUP_API op_completion {
 public:
  /// What a completion reports to: the net runner.
  class target {
   public:
    /// The run ended with `st`.
    virtual void complete(status st) noexcept = 0;
    /// The completion was destroyed without being called.
    virtual void abandon() noexcept = 0;

   protected:
    target() = default;
    ~target() = default;
    target(const target&) = default;
    target& operator=(const target&) = default;
  };

  op_completion(target& t, boost::asio::cancellation_slot slot) noexcept : target_(&t), slot_(slot) {}
  op_completion(op_completion&& other) noexcept : target_(std::exchange(other.target_, nullptr)), slot_(other.slot_) {}
  op_completion& operator=(op_completion&& other) noexcept {
    if (this != &other) {
      abandon();
      target_ = std::exchange(other.target_, nullptr);
      slot_ = other.slot_;
    }
    return *this;
  }
  op_completion(const op_completion&) = delete;
  op_completion& operator=(const op_completion&) = delete;
  ~op_completion() { abandon(); }

  /// Where a request to cancel this run arrives (it may be unconnected):
  /// connect the run's Asio operation to it (`bind_cancellation_slot`),
  /// and complete with `errc::cancelled` when it fires. Only this run is
  /// cancelled, never another run of the same kernel.
  [[nodiscard]] boost::asio::cancellation_slot slot() const noexcept { return slot_; }
  /// Reports the end of the run; later calls do nothing.
  void operator()(status st) noexcept {
    if (target* t = std::exchange(target_, nullptr)) t->complete(std::move(st));
  }
  /// False once called (or moved from).
  explicit operator bool() const noexcept { return target_ != nullptr; }

 private:
  void abandon() noexcept {
    if (target* t = std::exchange(target_, nullptr)) t->abandon();
  }

  target* target_;
  boost::asio::cancellation_slot slot_;
};

/// A runnable operator bound in a workspace.
///
/// Synchronous kernels override `run`. Asynchronous ones either set `async`
/// in the constructor and override `run_async` (a coroutine), or pass
/// `callback_form` and override `start` (a plain call that starts an Asio
/// operation and completes an `op_completion`): such a kernel waits
/// without any coroutine frame, so a task whose step tree only waits on
/// kernels of this form costs no frame while it pends (see
/// `local_session`). Either may also throw; the net runner converts
/// exceptions into the op's error.
/// What a kernel's fast path (`op_kernel::fast_path`) promises about the
/// blobs it writes when it returns true.
enum class fast_writes : std::uint8_t {
  /// No promise: it may write any blob it can reach (the default).
  any,
  /// Only the op's own input and output blobs, each in place through
  /// `blob::exact` (so never changing the type a blob holds, nor where its
  /// value lives). A step loop with a stop blob relies on it: after a net
  /// of one such op that names the stop blob neither as input nor as
  /// output, the stop check is known to say what the one before it said,
  /// and is skipped. Every built-in with a fast path makes this promise; a
  /// kernel that breaks it may see its loop miss a stop.
  own_blobs_in_place,
};

class TASKGROUP_API op_kernel {
 public:
  /// Tag of the constructor of kernels with a callback form.
  struct callback_form_t {
    explicit callback_form_t() = default;
  };
  static constexpr callback_form_t callback_form{};

  explicit op_kernel(bool async = false) noexcept : async_(async) {}
  /// An asynchronous kernel whose form is `start` (run_async then awaits
  /// it).
  explicit op_kernel(callback_form_t /*tag*/) noexcept : async_(true), startable_(true) {}
  virtual ~op_kernel() = default;
  op_kernel(const op_kernel&) = delete;
  op_kernel& operator=(const op_kernel&) = delete;

  /// True when this kernel must be awaited (`run_async`).
  [[nodiscard]] bool is_async() const noexcept { return async_; }

  /// Runs a synchronous kernel once.
  virtual status run();
  /// Runs an asynchronous kernel once. Cancellation: the awaiting
  /// coroutine's cancellation state reaches every Asio operation awaited
  /// inside; a cancelled kernel completes with `errc::cancelled`. The
  /// default awaits `start` for a kernel with a callback form (the
  /// coroutine's cancellation slot is the run's slot) and calls `run()`
  /// otherwise.
  virtual boost::asio::awaitable<status> run_async();

  /// True when this kernel has a callback form (`start`).
  [[nodiscard]] bool has_start() const noexcept { return startable_; }
  /// Starts one run of a kernel with a callback form: begins its
  /// operation on `ex` and returns; `done` is called once, through `ex`,
  /// when the run ends (with `errc::cancelled` when `done.slot()` fired),
  /// or inside `start` when it ends at once. Runs of one kernel may
  /// overlap (a net shared by concurrent steps of one workspace): each has
  /// its own `done`. An I/O object made for a run (a timer) belongs to that
  /// run, not to the kernel: a workspace and its kernels may outlive the
  /// io_context they last ran on. Errors: through `done` only (`start` cannot throw; a
  /// `done` dropped uncalled inside `start` is an `errc::op_failed`). The
  /// default completes with `errc::op_failed`. Threading: called on the
  /// strand owning the kernel's workspace, which `ex` is or runs on.
  virtual void start(const boost::asio::any_io_executor& ex, op_completion done) noexcept;

  /// What a pending asynchronous run of this kernel waits for, in a few
  /// words, for hang diagnosis (`run_probe`): e.g. `input #0 "jobs":
  /// waiting for an item: the queue is empty (0 of 4, open)`. The default
  /// says nothing (empty): the probe then says only "waiting". Threading:
  /// on the strand owning the kernel's workspace, while a run pends.
  [[nodiscard]] virtual std::string waiting_for() const;

  /// The optional fast path of a synchronous kernel: a plain function and
  /// up to 24 bytes of state it works on (e.g. the pre-resolved blobs),
  /// which a net copies into one contiguous array and calls instead of
  /// `run()`. `fn(state)` returns true when it has run the kernel to
  /// success, or false, having changed nothing, when the case is not one
  /// it handles (e.g. an input of another type); the net then calls
  /// `run()`, which must give the complete behaviour and every error.
  /// Never throws. Threading: called where `run()` would be.
  struct fast_path {
    bool (*fn)(const void* state) noexcept = nullptr;
    alignas(void*) unsigned char state[3 * sizeof(void*)] = {};
  };
  /// This kernel's fast path; `fn` is null when it has none.
  [[nodiscard]] const fast_path& fast() const noexcept { return fast_; }
  /// What the fast path promises about its writes (`fast_writes`).
  [[nodiscard]] fast_writes fast_promise() const noexcept { return promise_; }

 protected:
  /// Installs the fast path (see `fast_path`) and what it promises about
  /// its writes; a derived kernel's constructor calls it.
  /// `make_fast_kernel` does it for you.
  void set_fast(const fast_path& f, fast_writes promise = fast_writes::any) noexcept {
    fast_ = f;
    promise_ = promise;
  }

 private:
  fast_path fast_;
  bool async_;
  bool startable_ = false;
  fast_writes promise_ = fast_writes::any;
};

/// Completes `done` through `ex` with success once `deadline` has passed,
/// or with `errc::cancelled` ("wait cancelled N ms before it was due") as soon as `done.slot()`
/// fires (any cancellation type): the wait of the built-in Sleep, for the
/// `start` of your own kernels with a callback form. The waits of one
/// execution context share one Asio timer armed at the earliest deadline
/// and an ordered set of 56-byte entries, where a timer per wait would
/// hold an I/O object, a pending operation and a place in Asio's timer
/// heap; the waits that come due together reach a strand in one handler.
///
/// `ex` must outlive the wait (until `done` has been called or destroyed).
/// When the execution context shuts down with waits pending, their `done`
/// is destroyed uncalled (abandoned). Errors: allocation failure completes
/// `done` at once with `errc::op_failed`. Threading: thread-safe (one mutex
/// per execution context); emit the cancellation slot on `ex`, as for any
/// Asio operation.
TASKGROUP_API void sleep_until(const boost::asio::any_io_executor& ex, std::chrono::steady_clock::time_point deadline,
                               op_completion done) noexcept;
/// `sleep_until(ex, now + d, done)`; a negative `d` is due at once.
TASKGROUP_API void sleep_for(const boost::asio::any_io_executor& ex, std::chrono::steady_clock::duration d,
                             op_completion done) noexcept;

/// The compute executor of offloaded kernels when none is set (see
/// `operator_schema::offload`): a process-wide pool of one thread per core
/// (`std::thread::hardware_concurrency()`, at least one), started on first
/// use and joined at exit (running kernels end first; queued ones are
/// dropped). On Linux its threads run at nice +10, below the program's own
/// threads, so that an I/O thread that wakes up preempts a CPU-bound kernel
/// at once; a pool you pass to `set_compute_executor` keeps the priority you
/// give it. Threading: thread-safe.
TASKGROUP_API boost::asio::any_io_executor default_compute_executor();

/// Turns a bound op into a kernel; may reject bad arguments or input types.
using kernel_factory = std::function<result<std::unique_ptr<op_kernel>>(op_context&)>;
/// The body of a synchronous function operator.
using sync_function = std::function<status(op_context&)>;
/// The body of an asynchronous function operator.
using async_function = std::function<boost::asio::awaitable<status>(op_context&)>;

namespace detail {
template <class F>
class sync_kernel final : public op_kernel {
 public:
  explicit sync_kernel(F f) : f_(std::move(f)) {}
  status run() override { return f_(); }

 private:
  F f_;
};

// A kernel whose fast path is `fast()` and whose `run()` is `general()`,
// kept out of line and cold so that the fast path compiles to a small leaf
// function. A `fast` small and trivially copyable enough (a lambda holding
// up to three pointers) is itself the fast path's state, so the net's loop
// reads it from its own contiguous array; a larger one is reached through
// the kernel.
template <class Fast, class General>
class fast_kernel final : public op_kernel {
  static constexpr bool inline_state =
      std::is_trivially_copyable_v<Fast> && sizeof(Fast) <= sizeof(fast_path::state) && alignof(Fast) <= alignof(void*);

 public:
  fast_kernel(Fast fast, General general, fast_writes promise) : fast_(std::move(fast)), general_(std::move(general)) {
    fast_path f;
    if constexpr (inline_state) {
      // A byte copy of a trivially copyable object is that object (and
      // so is each copy of the record the net makes).
      std::memcpy(f.state, static_cast<const void*>(&fast_), sizeof(Fast));
      f.fn = [](const void* state) noexcept { return (*std::launder(static_cast<const Fast*>(state)))(); };
    } else {
      const fast_kernel* self = this;
      std::memcpy(f.state, &self, sizeof self);
      f.fn = [](const void* state) noexcept {
        const fast_kernel* k = nullptr;
        std::memcpy(&k, state, sizeof k);
        return k->fast_();
      };
    }
    set_fast(f, promise);
  }
  status run() override {
    if (fast_()) [[likely]]
      return ok();
    return general();
  }

 private:
  [[gnu::noinline, gnu::cold]] status general() { return general_(); }

  Fast fast_;
  General general_;
};
}  // namespace detail

/// A synchronous kernel that calls `f()` (returning `status`) on each run:
/// the way to write a fast built-in that pre-resolves its blobs.
template <class F>
std::unique_ptr<op_kernel> make_kernel(F f) {
  return std::make_unique<detail::sync_kernel<F>>(std::move(f));
}

/// A synchronous kernel with a fast path: on each run the net first calls
/// `fast()` (a `noexcept` callable returning `bool`), which handles the
/// common case and returns true, or returns false without changing
/// anything; then `general()` (returning `status`) runs: the complete
/// behaviour, including every case `fast()` declines and every error.
/// A trivially copyable `fast` of at most three pointers (captured by
/// value) is copied into the net's run array and must stay valid for as
/// long as the kernel lives.
/// How the built-in arithmetic and comparison ops reach near the cost of a
/// virtual call: `fast()` tests that its pre-resolved blobs already hold
/// the expected types (`blob::exact<T>()`) and computes in place.
/// `promise`: what `fast()` promises about its writes (`fast_writes`);
/// pass `fast_writes::own_blobs_in_place` only when it holds.
/// Returns the kernel (never null); errors are `general()`'s, at run time.
/// Threading: both are called where `run()` would be (the strand owning
/// the net's workspace).
template <class Fast, class General>
std::unique_ptr<op_kernel> make_fast_kernel(Fast fast, General general, fast_writes promise = fast_writes::any) {
  static_assert(std::is_nothrow_invocable_r_v<bool, const Fast&>, "fast() must be const, noexcept and return bool");
  return std::make_unique<detail::fast_kernel<Fast, General>>(std::move(fast), std::move(general), promise);
}

/// A declared argument of a schema.
struct TASKGROUP_API argument_spec {
  std::string name;
  /// The accepted kinds (one or several, e.g. any scalar for ConstantFill).
  std::vector<argument_kind> kinds;
  bool required = false;
  std::string doc;
  /// The value an op without this argument behaves as if it had (shown by
  /// `taskgroup ops`); none for required arguments and for those whose
  /// absence means something no value says.
  std::optional<argument> default_value;
};

/// The description of an operator type: arity, arguments, kernel.
///
/// Validation (`validate`) runs when a net is instantiated or a plan is
/// read: the number of inputs and outputs must be within the declared
/// bounds, required arguments must be present, every argument must be
/// declared and of its declared kind.
class TASKGROUP_API operator_schema {
 public:
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  explicit operator_schema(std::string type);

  /// Exactly `n` inputs / outputs, or between `min` and `max`.
  operator_schema& inputs(std::size_t n) { return inputs(n, n); }
  operator_schema& inputs(std::size_t min, std::size_t max);
  operator_schema& outputs(std::size_t n) { return outputs(n, n); }
  operator_schema& outputs(std::size_t min, std::size_t max);
  /// Declares an optional (or required) argument.
  operator_schema& arg(std::string name, argument_kind kind, std::string doc = {});
  operator_schema& arg(std::string name, std::vector<argument_kind> kinds, std::string doc = {});
  operator_schema& required_arg(std::string name, argument_kind kind, std::string doc = {});
  operator_schema& required_arg(std::string name, std::vector<argument_kind> kinds, std::string doc = {});
  /// Declares an optional argument of the kind of `default_value`, which
  /// is what the kernel uses when the op has none (the kernel reads it
  /// with the same constant: `get_or(name, default)`).
  operator_schema& arg_with_default(std::string name, argument default_value, std::string doc = {});
  /// Accepts arguments that are not declared (for user ops that read
  /// free-form arguments). Off by default: unknown arguments are errors.
  operator_schema& any_args();
  operator_schema& doc(std::string text);
  /// Marks the kernel CPU-bound: a session runs it on its compute executor
  /// (`local_session::set_compute_executor`, by default a process-wide
  /// pool of one thread per core) instead of on the node strand, and the
  /// task waits for it without holding the strand, so the node's other
  /// tasks, its report steps and cancellation go on meanwhile.
  ///
  /// The blob rule that keeps this free of data races: while an offloaded
  /// op runs, its input blobs are read-shared (ops on the strand may read
  /// them; an op that writes one, as an output, waits until the offloaded
  /// op ends) and its outputs are private (the kernel writes fresh blobs,
  /// which replace the outputs' values on the strand when it ends; until
  /// then the node sees their previous values). So an offloaded kernel's
  /// outputs start empty on each run: to read a previous value, list the
  /// blob as an input too. Runs of one offloaded op never overlap. The
  /// kernel must touch no blob but its inputs and outputs (not through
  /// `op_context::ws()`). Only synchronous kernels can be offloaded
  /// (binding another is an `errc::bad_argument`); cancellation reaches a
  /// running kernel only through `op_context::stop_requested`.
  operator_schema& offload(bool on = true);

  /// The kernel: a factory, or a synchronous / asynchronous function
  /// called with the op's context on every run.
  operator_schema& factory(kernel_factory f, bool async = false);
  operator_schema& sync(sync_function f);
  operator_schema& async(async_function f);

  [[nodiscard]] const std::string& type() const noexcept { return type_; }
  [[nodiscard]] bool is_async() const noexcept { return async_; }
  /// True when the kernel runs on the compute executor (`offload`).
  [[nodiscard]] bool is_offloaded() const noexcept { return offload_; }
  [[nodiscard]] const std::string& doc() const noexcept { return doc_; }
  [[nodiscard]] std::pair<std::size_t, std::size_t> input_bounds() const noexcept { return {min_in_, max_in_}; }
  [[nodiscard]] std::pair<std::size_t, std::size_t> output_bounds() const noexcept { return {min_out_, max_out_}; }
  [[nodiscard]] const std::vector<argument_spec>& argument_specs() const noexcept { return args_; }
  /// True when undeclared arguments are accepted (`any_args`).
  [[nodiscard]] bool accepts_any_args() const noexcept { return any_args_; }

  /// Checks `def` against this schema (arity, arguments). Errors:
  /// `errc::arity_mismatch`, `errc::bad_argument`; the message does not
  /// carry the net and op index (callers add them).
  [[nodiscard]] status validate(const op_def& def) const;

  /// Builds the kernel for a bound op. Errors: whatever the factory
  /// reports; `errc::invalid_step` when the schema has no kernel.
  [[nodiscard]] result<std::unique_ptr<op_kernel>> instantiate(op_context& ctx) const;

 private:
  std::string type_;
  std::size_t min_in_ = 0, max_in_ = unbounded, min_out_ = 0, max_out_ = unbounded;
  std::vector<argument_spec> args_;
  bool any_args_ = false;
  bool async_ = false;
  bool offload_ = false;
  std::string doc_;
  kernel_factory factory_;
};

/// Operator types by name.
///
/// `global()` holds the built-in operators (see `builtin_ops.hpp`) and is
/// what nets use unless given another registry. Thread-safe: lookups and
/// registrations may run concurrently (a shared mutex guards the table);
/// schemas are immutable once added.
class TASKGROUP_API operator_registry {
 public:
  operator_registry() = default;
  operator_registry(const operator_registry& other);
  operator_registry& operator=(const operator_registry&) = delete;

  /// The process-wide registry, holding the built-in operators.
  static operator_registry& global();

  /// Adds a schema. Errors: `errc::duplicate_operator` when the type is
  /// already registered.
  status add(operator_schema schema);
  /// Adds or replaces a schema.
  void add_or_replace(operator_schema schema);
  /// Adds every schema of `other` at once, or none: the registry never
  /// holds part of them (what loading an op library relies on). Errors:
  /// `errc::duplicate_operator` naming the first type (in sorted order)
  /// already registered here; nothing is added then. `other` is read under
  /// its own lock first, so merging two registries into each other from two
  /// threads cannot deadlock.
  status merge(const operator_registry& other);

  /// The schema of `type`, or null.
  [[nodiscard]] std::shared_ptr<const operator_schema> find(std::string_view type) const;
  /// The schema of `type`. Errors: `errc::unknown_operator`.
  [[nodiscard]] result<std::shared_ptr<const operator_schema>> get(std::string_view type) const;
  /// Registered type names, sorted.
  [[nodiscard]] std::vector<std::string> types() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const operator_schema>> table_;
};

}  // namespace taskgroup
