// Internal: a local session's admission control (session_limits): which
// runs are in flight, which wait for a place and in what order, which are
// shed, and the drains waiting for them all to end.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/session_limits.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace taskgroup::detail {

struct run_state;
class admission;

/// What admission keeps in a run (run_state::ticket), touched under the
/// session's lock only.
struct admission_ticket {
  /// Counted in flight by this admission, which the run's end tells
  /// (admission::ended); null for a run refused at its arrival.
  admission* by = nullptr;
  enum class where : std::uint8_t { none, queued, in_flight } at = where::none;
  int priority = 0;
  std::uint64_t seq = 0;  ///< arrival order
  /// The runs in flight, linked through their tickets (a drain cancelled
  /// finds them here).
  run_state* prev = nullptr;
  run_state* next = nullptr;
  /// A queued run's limit on its wait (max_queue_wait or its own timeout,
  /// whichever ends first), on the session's executor: not a strand, so
  /// that its cancellation at admission (the common end) and its expiry
  /// never wait in the coordinator's queue nor hold it.
  std::optional<boost::asio::steady_timer> wait;
  /// When it was queued (unset for a run admitted at once).
  std::chrono::steady_clock::time_point arrived{};
  /// How long it waited in the queue, once admitted from it.
  std::chrono::steady_clock::duration queued_for{};
  /// What `wait` bounds: the run's own timeout (true) or the queue's wait,
  /// `wait_limit`, as armed.
  bool wait_is_deadline = false;
  std::chrono::microseconds wait_limit{};
};

/// Refuses `rs`, which arrived and never began, on its coordinator: its
/// report starts and ends then.
void refuse_unbegun(const std::shared_ptr<run_state>& rs, error why) noexcept;

/// Refuses `rs`, turned away as it arrived (shed, or the session drains),
/// from within its initiating call: nothing but its caller holds it yet,
/// so its cancellation slot is cleared here and its report is made on
/// `plain` (the session's executor, not a strand) rather than on the
/// coordinator. Under overload most arrivals are shed: on the coordinator
/// they would queue in front of the admitted runs' joins and ends.
void refuse_arrival(const std::shared_ptr<run_state>& rs, error why,
                    const boost::asio::any_io_executor& plain) noexcept;

/// A session's admission. Every member function but `arrive` takes the
/// session's lock (`mutex`, given at construction) itself; `arrive` is
/// called under it.
class admission {
 public:
  /// How a queued run that is admitted starts: `begin(owner, rs)` (the
  /// session's begin), on the run's coordinator. It never throws (a run
  /// that cannot begin is refused), so what is set around it is cleared.
  using begin_fn = void (*)(void* owner, const std::shared_ptr<run_state>& rs) noexcept;
  admission(std::mutex& session_mutex, void* owner, begin_fn begin)
      : mutex_(session_mutex), owner_(owner), begin_(begin) {}
  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;

  /// What happens to a run that arrives.
  enum class verdict : std::uint8_t {
    start,   ///< counted in flight: begin it
    queued,  ///< kept in the queue (its wait armed): `ended` admits it later
    shed,    ///< refuse it with `why` (errc::overloaded)
    closed,  ///< refuse it: the session drains and takes no new run
  };
  /// Under the session's lock, with `rs->coord` chosen. A run shed out of
  /// the queue to make room goes to `displaced`, to be refused with `why`
  /// by the caller once the lock is released. A queued run's wait runs on
  /// `plain` (the session's executor, not a strand).
  verdict arrive(const std::shared_ptr<run_state>& rs, int priority, const boost::asio::any_io_executor& plain,
                 error& why, std::shared_ptr<run_state>& displaced);

  /// The end of a run this admission counted (on its coordinator): it is
  /// no longer in flight; queued runs take its place and are begun
  /// (`begin`), and drains with nothing left complete.
  void ended(run_state& rs) noexcept;

  /// Takes queued `rs` out of the queue: true when it was there (the
  /// caller then refuses it), false when it was admitted or shed first.
  bool withdraw(run_state& rs) noexcept;

  void set_limits(const session_limits& limits);
  [[nodiscard]] session_limits limits() const;
  [[nodiscard]] session_load load() const;
  /// Under the session's lock.
  [[nodiscard]] bool draining_locked() const noexcept { return draining_; }

  /// A run as `view` saw it: queued (since `arrived`) or in flight.
  struct seen_run {
    std::shared_ptr<run_state> rs;
    bool queued = false;
    std::chrono::steady_clock::time_point arrived{};
    int priority = 0;
  };
  /// The runs in flight, oldest first, then the queued ones in the order
  /// they would be admitted (async_describe). Errors: throws
  /// `std::bad_alloc`.
  [[nodiscard]] std::vector<seen_run> view() const;

  /// Stops admitting for good and calls `done` once nothing is in flight
  /// or queued (with errc::cancelled once a drain was cancelled), through
  /// `fallback` when nothing is left now; `done`'s cancellation slot
  /// cancels what remains.
  void drain(boost::asio::any_completion_handler<void(boost::system::error_code)> done,
             const boost::asio::any_io_executor& fallback);

  /// Takes every queued run out of the queue (the session closes).
  std::vector<std::shared_ptr<run_state>> take_queue() noexcept;

 private:
  // Highest priority first, then arrival order (a priority is never
  // negated: INT_MIN has no opposite).
  struct queue_key {
    int priority;
    std::uint64_t seq;
    friend bool operator<(const queue_key& a, const queue_key& b) noexcept {
      return a.priority != b.priority ? a.priority > b.priority : a.seq < b.seq;
    }
  };
  using drain_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

  // Under the lock: how many runs may be in flight when one of `priority`
  // is admitted (no bound: the most a size_t holds; check_limits keeps the
  // sum from overflowing), and whether one of `priority` may be now.
  [[nodiscard]] std::size_t places_for(int priority) const noexcept;
  [[nodiscard]] bool fits(int priority) const noexcept;
  void link(run_state& rs) noexcept;
  void unlink(run_state& rs) noexcept;
  void arm_wait(const std::shared_ptr<run_state>& rs, const boost::asio::any_io_executor& plain);
  void waited(const std::shared_ptr<run_state>& rs);
  // Under the lock: the queued runs that now fit, taken out and counted.
  void admit_queued(std::vector<std::shared_ptr<run_state>>& out);
  // Under the lock: the drains to complete now that nothing is left.
  void idle_drains(std::vector<drain_handler>& out);
  void cancel_all();
  // Begins `rs`, admitted from the queue as a run ended (on that run's
  // coordinator), on its own coordinator (`begin`).
  void begin_at_end(const std::shared_ptr<run_state>& rs) noexcept;

  std::mutex& mutex_;
  void* const owner_;
  const begin_fn begin_;
  session_limits limits_;
  std::size_t in_flight_ = 0;
  std::uint64_t shed_ = 0;
  std::uint64_t arrivals_ = 0;
  run_state* first_in_flight_ = nullptr;
  std::map<queue_key, std::shared_ptr<run_state>> queue_;
  bool draining_ = false;
  bool drain_cancelled_ = false;
  std::vector<drain_handler> drains_;
  // Where a drain completes when its handler has no executor of its own
  // (the session's coordinator, as given to `drain`).
  const boost::asio::any_io_executor* drain_ex_ = nullptr;
};

}  // namespace taskgroup::detail
