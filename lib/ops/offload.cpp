// Offloaded kernels (`operator_schema::offload`): the kernel that runs a
// synchronous kernel on the compute executor, and the node's gate that
// keeps the blobs it reads free of writers meanwhile.
#include "ops/offload.hpp"

#include <taskgroup/workspace.hpp>

#include "detail/errors.hpp"
#include "detail/observation.hpp"
#include "ops/offload_gate.hpp"
#include "ops/run_scope.hpp"

#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace taskgroup {

namespace asio = boost::asio;

namespace {

// The default compute pool: one thread per core, each at a lower scheduling
// priority than the program's own threads (nice +10 on Linux), so that an
// I/O thread that wakes up (a timer, a socket) preempts a CPU-bound kernel
// at once instead of waiting for a time slice.
class compute_pool {
 public:
  compute_pool() : work_(ctx_.get_executor()) {
    const unsigned n = std::max(1U, std::thread::hardware_concurrency());
    threads_.reserve(n);
    for (unsigned i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        lower_priority();
        ctx_.run();
      });
    }
  }
  compute_pool(const compute_pool&) = delete;
  compute_pool& operator=(const compute_pool&) = delete;
  // At exit: kernels running end first; queued ones are dropped (their
  // runs abandoned), as a thread_pool's destructor does.
  ~compute_pool() {
    work_.reset();
    ctx_.stop();
    for (auto& t : threads_) t.join();
  }
  asio::any_io_executor executor() { return ctx_.get_executor(); }

 private:
  static void lower_priority() noexcept {
#if defined(__linux__)
    // Per thread on Linux: the id is the thread's. Raising one's own nice
    // value needs no privilege; a failure leaves the priority as it was.
    const auto tid = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, std::min(19, now + 10));
#endif
  }

  asio::io_context ctx_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

}  // namespace

asio::any_io_executor default_compute_executor() {
  static compute_pool pool;
  return pool.executor();
}

namespace detail {

// --- offload_gate ------------------------------------------------------------

offload_gate::~offload_gate() = default;

bool offload_gate::leased(const void* key) const noexcept {
  return std::any_of(leases_.begin(), leases_.end(), [key](const auto& l) { return l.first == key; });
}

void offload_gate::lease(const void* key) {
  for (auto& l : leases_) {
    if (l.first == key) {
      ++l.second;
      return;
    }
  }
  leases_.emplace_back(key, 1);
}

void offload_gate::release(const void* key) noexcept {
  for (auto it = leases_.begin(); it != leases_.end(); ++it) {
    if (it->first != key) continue;
    if (--it->second == 0) {
      *it = leases_.back();
      leases_.pop_back();
    }
    return;
  }
}

void offload_gate::wait(const asio::any_io_executor& ex, op_completion done) noexcept {
  try {
    const asio::cancellation_slot slot = done.slot();
    auto it = waiters_.insert(waiters_.end(), waiter{ex, op_completion(std::move(done))});
    if (slot.is_connected()) {
      it->done.slot().assign([this, it](asio::cancellation_type /*type*/) {
        waiter w = std::move(*it);
        waiters_.erase(it);
        // Not from the slot's handler itself (op_completion's contract).
        asio::post(w.ex, [d = std::move(w.done)]() mutable { d(fail(errc::cancelled, "cancelled")); });
      });
    }
  } catch (...) {
    // `done` has moved into the waiter that failed to be made: destroyed
    // uncalled, inside the driver's start, it reads as an op failure.
  }
}

void offload_gate::wake() noexcept {
  std::list<waiter> woken = std::move(waiters_);
  waiters_.clear();
  for (waiter& w : woken) {
    w.done.slot().clear();
    try {
      asio::post(w.ex, [d = std::move(w.done)]() mutable { d(ok()); });
    } catch (...) {
      w.done(ok());  // on the strand already (wake runs there)
    }
  }
}

// --- offload_kernel ----------------------------------------------------------

namespace {

std::vector<std::shared_ptr<blob>> inputs_of(const op_context& ctx) {
  std::vector<std::shared_ptr<blob>> in;
  in.reserve(ctx.num_inputs());
  for (std::size_t i = 0; i < ctx.num_inputs(); ++i) {
    // The context holds the owners; an aliasing owner of the same blob
    // keeps the pointer without a second count to manage.
    in.emplace_back(std::shared_ptr<blob>(), &ctx.input_blob(i));
  }
  return in;
}

}  // namespace

offload_kernel::offload_kernel(op_context& outer) : op_kernel(callback_form), outer_(&outer) {
  // One private blob per distinct output blob (an output listed twice is
  // one blob, as on the strand).
  std::vector<std::shared_ptr<blob>> staged;
  staged.reserve(outer.num_outputs());
  for (std::size_t j = 0; j < outer.num_outputs(); ++j) {
    blob* real = &outer.output_blob(j);
    auto same = std::find_if(commits_.begin(), commits_.end(), [real](const auto& c) { return c.first == real; });
    if (same == commits_.end()) {
      commits_.emplace_back(real, std::make_shared<blob>());
      same = commits_.end() - 1;
    }
    staged.push_back(same->second);
  }
  inner_ctx_.emplace(outer.def(), outer.ws(), inputs_of(outer), std::move(staged));
  inner_ctx_->stop_ = &stop_;
  for (std::size_t i = 0; i < outer.num_inputs(); ++i) {
    const void* key = &outer.input_blob(i);
    if (std::find(keys_.begin(), keys_.end(), key) == keys_.end()) keys_.push_back(key);
  }
  keys_.push_back(static_cast<const op_kernel*>(this));
}

offload_kernel::~offload_kernel() = default;

result<std::unique_ptr<op_kernel>> offload_kernel::make(const operator_schema& schema, op_context& ctx) {
  auto k = std::unique_ptr<offload_kernel>(new offload_kernel(ctx));
  TASKGROUP_TRY(auto inner, schema.instantiate(*k->inner_ctx_));
  if (inner->is_async()) {
    return fail(errc::bad_argument,
                "cannot be offloaded: its kernel is asynchronous (only synchronous kernels run on the compute "
                "executor)");
  }
  k->inner_ = std::move(inner);
  gate_of(ctx.ws());  // made now, so that the nets of this node see it when they check
  return std::unique_ptr<op_kernel>(std::move(k));
}

// One run, owned by the handler that carries it: to the compute executor,
// then back to the strand. The strand's executor is held with outstanding
// work, so that its context does not run out while the kernel runs.
struct offload_kernel::run_state {
  offload_kernel* self;
  asio::any_io_executor strand;
  op_completion done;
  const run_context* run;  // the run it serves: it outlives its pending ops
  // When it was handed to the compute executor (the run's metrics count
  // the wait for a compute thread); unread outside a run.
  std::chrono::steady_clock::time_point posted{};
  status result = ok();
};

std::string offload_kernel::waiting_for() const {
  return pending_ ? "ran offloaded; its outputs wait until no other offloaded op reads them"
                  : "running on the compute executor (offloaded)";
}

void offload_kernel::start(const asio::any_io_executor& ex, op_completion done) noexcept {
  offload_gate& gate = gate_of(outer_->ws());
  std::size_t leased = 0;
  try {
    auto run = std::make_unique<run_state>(
        run_state{this, asio::prefer(ex, asio::execution::outstanding_work.tracked), std::move(done), current_run});
    const run_scope* counted = run->run != nullptr ? run->run->scope() : nullptr;
    if (counted != nullptr) run->posted = std::chrono::steady_clock::now();
    for (const void* key : keys_) {
      gate.lease(key);
      ++leased;
    }
    stop_.store(false, std::memory_order_relaxed);
    if (asio::cancellation_slot slot = run->done.slot(); slot.is_connected()) {
      slot.assign([this](asio::cancellation_type /*type*/) { stop_.store(true, std::memory_order_relaxed); });
    }
    const asio::any_io_executor compute = outer_->ws().compute_executor();
    asio::post(compute, [run = std::move(run), counted]() mutable {
      if (counted != nullptr) counted->offloaded(std::chrono::steady_clock::now() - run->posted);
      {
        const run_context_scope scope(run->run);
        run->result = run->self->run_told(run->run != nullptr ? run->run->offloads_told() : nullptr);
      }
      const asio::any_io_executor strand = run->strand;
      offload_kernel* self = run->self;
      asio::post(strand, [self, run = std::move(run)]() mutable { self->finish(std::move(run)); });
    });
  } catch (...) {
    for (std::size_t k = 0; k < leased; ++k) gate.release(keys_[k]);
    // `done` is either still here or inside the run that was not made.
    if (done) done(fail(errc::op_failed, "out of memory starting an offloaded operator"));
  }
}

status offload_kernel::run_told(const observation* told) noexcept {
  if (told == nullptr) return run_inner();
  const std::string_view op = outer_->def().type;
  try {
    told->observer->offload_begin(told->at, op);
  } catch (...) {
    return error_from_exception(std::current_exception());
  }
  status st = run_inner();
  try {
    told->observer->offload_end(told->at, op, st);
  } catch (...) {
    if (st) st = error_from_exception(std::current_exception());
  }
  return st;
}

status offload_kernel::run_inner() noexcept {
  try {
    const fast_path& f = inner_->fast();
    if (f.fn != nullptr && f.fn(f.state)) return ok();
    return inner_->run();
  } catch (...) {
    return error_from_exception(std::current_exception());
  }
}

void offload_kernel::finish(std::unique_ptr<run_state> run) noexcept {
  run->done.slot().clear();
  if (stop_.load(std::memory_order_relaxed)) run->result = fail(errc::cancelled, "cancelled");
  offload_gate& gate = gate_of(outer_->ws());
  for (std::size_t k = 0; k + 1 < keys_.size(); ++k) gate.release(keys_[k]);  // the inputs; itself stays
  gate.wake();
  if (run->result && outputs_in_use()) {
    pending_ = std::move(run);
    gate.wait(pending_->strand, op_completion(static_cast<op_completion::target&>(*this), {}));
    return;
  }
  commit(std::move(run));
}

bool offload_kernel::outputs_in_use() const noexcept {
  const offload_gate* gate = find_gate(outer_->ws());
  return gate != nullptr &&
         std::any_of(commits_.begin(), commits_.end(), [gate](const auto& c) { return gate->leased(c.first); });
}

void offload_kernel::commit(std::unique_ptr<run_state> run) noexcept {
  for (auto& [real, staged] : commits_) {
    if (run->result) {
      *real = std::move(*staged);
    } else {
      staged->reset();  // a failed run changes no output
    }
  }
  offload_gate& gate = gate_of(outer_->ws());
  gate.release(keys_.back());
  gate.wake();
  run->done(std::move(run->result));
}

void offload_kernel::complete(status /*st*/) noexcept {
  std::unique_ptr<run_state> run = std::move(pending_);
  if (run == nullptr) return;
  if (outputs_in_use()) {  // another reader started meanwhile
    pending_ = std::move(run);
    gate_of(outer_->ws()).wait(pending_->strand, op_completion(static_cast<op_completion::target&>(*this), {}));
    return;
  }
  commit(std::move(run));
}

void offload_kernel::abandon() noexcept {
  // The strand's context went away with the wait queued: the run goes
  // with it (its completion is abandoned in turn).
  pending_.reset();
}

}  // namespace detail

}  // namespace taskgroup
