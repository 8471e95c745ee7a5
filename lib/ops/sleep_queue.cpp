#include <taskgroup/operator.hpp>

#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/intrusive/set.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

namespace {

namespace asio = boost::asio;
namespace bi = boost::intrusive;
using clock_type = std::chrono::steady_clock;

// One pending wait, owned by the set while queued and by its delivery
// once due or cancelled.
struct entry : bi::set_base_hook<bi::optimize_size<true>, bi::link_mode<bi::normal_link>> {
  entry(clock_type::time_point d, op_completion c, const asio::any_io_executor& e) noexcept
      : deadline(d), done(std::move(c)), ex(&e) {}
  clock_type::time_point deadline;
  op_completion done;
  const asio::any_io_executor* ex;
};

// What a pending Sleep holds (with the allocator's header): the figure the
// header and docs/builtin-ops.md give.
static_assert(sizeof(entry) <= 56);

// An entry's key: its deadline, then its address (unique while queued).
// A cancellation looks its wait up by key, never through a pointer it
// holds: it may come after the wait was delivered and its entry freed.
struct wait_key {
  clock_type::time_point deadline;
  const entry* at;
};
struct key_of {
  using type = wait_key;
  wait_key operator()(const entry& e) const noexcept { return {e.deadline, &e}; }
};
struct key_less {
  bool operator()(const wait_key& a, const wait_key& b) const noexcept {
    if (a.deadline != b.deadline) return a.deadline < b.deadline;
    return std::less<const entry*>()(a.at, b.at);
  }
};
using entry_set = bi::set<entry, bi::key_of_value<key_of>, bi::compare<key_less>, bi::constant_time_size<false>>;

// Ends a wait on its executor: clears the slot (the wait is over), then
// calls `done`.
void end_wait(std::unique_ptr<entry> e, bool cancelled) noexcept {
  if (asio::cancellation_slot slot = e->done.slot(); slot.is_connected()) slot.clear();
  if (cancelled) {
    // How far it was from its end, for a run that ends stuck here.
    const auto left = std::max(std::chrono::ceil<std::chrono::milliseconds>(e->deadline - clock_type::now()),
                               std::chrono::milliseconds::zero());
    e->done(fail(errc::cancelled, "wait cancelled " + std::to_string(left.count()) + " ms before it was due"));
  } else {
    e->done(ok());
  }
}

// The handlers that end waits on their executor. Dropped unrun (the
// context shut down), they abandon their waits.
struct deliver_cancelled {
  std::unique_ptr<entry> e;
  void operator()() { end_wait(std::move(e), true); }
};
// Waits of one executor that came due together: one handler for all (a
// node's tasks tend to wait on the same strand).
struct deliver_due {
  std::vector<std::unique_ptr<entry>> due;
  void operator()() {
    for (auto& e : due) end_wait(std::move(e), false);
  }
};

// The waits of one execution context and the one timer that serves them,
// armed at the earliest deadline.
class sleep_service final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;  // NOLINT(readability-identifier-naming): Asio's name

  explicit sleep_service(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}
  sleep_service(const sleep_service&) = delete;
  sleep_service& operator=(const sleep_service&) = delete;
  ~sleep_service() override = default;

  void wait(const asio::any_io_executor& ex, clock_type::time_point deadline, op_completion done) {
    asio::cancellation_slot slot = done.slot();
    auto e = std::make_unique<entry>(deadline, std::move(done), ex);
    if (slot.is_connected()) slot.emplace<canceller>(canceller{this, wait_key{deadline, e.get()}});
    std::lock_guard lock(mutex_);
    if (shut_down_) return;  // `e` goes: the wait is abandoned
    if (!timer_) timer_.emplace(timer_executor(ex));
    if (deadline < armed_) arm(deadline);
    set_.insert(*e.release());
  }

 private:
  struct canceller {
    sleep_service* self;
    wait_key k;
    void operator()(asio::cancellation_type_t type) const {
      constexpr auto any =
          asio::cancellation_type::terminal | asio::cancellation_type::partial | asio::cancellation_type::total;
      if ((type & any) != asio::cancellation_type::none) self->cancel(k);
    }
  };

  // The timer completes on the context's own executor rather than on a
  // strand of the first waiter: due waits go to their own executors.
  static asio::any_io_executor timer_executor(const asio::any_io_executor& ex) {
    if (const auto* s = ex.target<asio::strand<asio::any_io_executor>>()) return s->get_inner_executor();
    return ex;
  }

  void shutdown() override {
    entry_set drained;
    {
      std::lock_guard lock(mutex_);
      shut_down_ = true;
      drained.swap(set_);
      timer_.reset();
    }
    drained.clear_and_dispose([](entry* e) { delete e; });  // abandons each wait
  }

  void cancel(const wait_key& k) {
    std::lock_guard lock(mutex_);
    auto it = set_.find(k);
    if (it == set_.end()) return;  // delivered already, or being delivered
    entry& e = *it;
    set_.erase(it);
    if (set_.empty() && timer_) {
      // No wait left: the timer's own wait must not keep the context's
      // run() going until a deadline nobody waits for.
      timer_->cancel();
      armed_ = clock_type::time_point::max();
    }
    // Posted, not called inline: the canceller runs inside its emitter,
    // which may be iterating its own waits.
    std::unique_ptr<entry> own(&e);
    const asio::any_io_executor& ex = *own->ex;
    asio::post(ex, deliver_cancelled{std::move(own)});
  }

  // Under the lock. A wait that completes earlier than the armed one
  // cancels it: each wait carries its generation and only the latest acts.
  // Should arming fail, the previous wait (cancelled, same generation)
  // still acts on completing.
  void arm(clock_type::time_point at) {
    timer_->expires_at(at);
    const std::uint64_t gen = generation_ + 1;
    timer_->async_wait([this, gen](const boost::system::error_code&) { expired(gen); });
    generation_ = gen;
    armed_ = at;
  }

  void expired(std::uint64_t gen) {
    std::lock_guard lock(mutex_);
    if (gen != generation_ || shut_down_) return;
    armed_ = clock_type::time_point::max();
    const clock_type::time_point now = clock_type::now();
    // Due waits in deadline order, one handler per run of waits on the same
    // executor.
    deliver_due batch;  // the run being gathered
    const asio::any_io_executor* batch_ex = nullptr;
    while (!set_.empty() && set_.begin()->deadline <= now) {
      std::unique_ptr<entry> e(&*set_.begin());
      set_.erase(set_.begin());
      if (e->ex != batch_ex && !batch.due.empty()) asio::post(*batch_ex, deliver_due{std::exchange(batch.due, {})});
      batch_ex = e->ex;
      batch.due.push_back(std::move(e));
    }
    if (!batch.due.empty()) asio::post(*batch_ex, deliver_due{std::exchange(batch.due, {})});
    if (!set_.empty()) arm(set_.begin()->deadline);
  }

  std::mutex mutex_;  // guards what follows
  entry_set set_;
  std::optional<asio::steady_timer> timer_;
  clock_type::time_point armed_ = clock_type::time_point::max();  // the pending timer wait's deadline
  std::uint64_t generation_ = 0;                                  // of the latest timer wait
  bool shut_down_ = false;
};

}  // namespace

void sleep_until(const asio::any_io_executor& ex, clock_type::time_point deadline, op_completion done) noexcept {
  try {
    auto& service = asio::use_service<sleep_service>(asio::query(ex, asio::execution::context));
    service.wait(ex, deadline, std::move(done));
  } catch (const std::exception& e) {  // allocation failure: `done`, if still here, reports it
    done(fail(errc::op_failed, std::string("wait: ") + e.what()));
  }
}

void sleep_for(const asio::any_io_executor& ex, clock_type::duration d, op_completion done) noexcept {
  sleep_until(ex, clock_type::now() + d, std::move(done));
}

}  // namespace taskgroup
