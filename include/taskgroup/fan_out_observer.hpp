// taskgroup: one run, several observers. A run takes one `run_observer`
// (`run_options::observer`, `run_step_options::observer`); a
// `fan_out_observer` is that one and hands each event to the observers
// added to it that asked for its kind, so that a server can keep a trace
// recorder, a progress display and its own log on the same runs without
// writing the forwarding itself.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/run_observer.hpp>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace taskgroup {

/// Forwards every event of the runs it observes to the observers added to
/// it, in the order they were added, each receiving only the kinds its
/// `interests()` asked for (a `retry_wait` counts as a task event when its
/// step is empty, else as a step event, as a run tells it). Its own
/// `interests()` is the union of theirs, so a run emits no event that none
/// of them wants and keeps the fast paths that all of them leave
/// (observers that all ask for `observe::tasks` only leave the one-op
/// loop in place).
///
/// The observers are not owned: each must outlive every run that uses
/// this one. Each observer's `interests()` is read once, when it is added.
///
/// Errors: `add` throws `std::invalid_argument` when the observer is this
/// one or a fan-out that forwards to this one (directly or through
/// others): events would go round for ever. An exception from an
/// observer's event propagates as it would from that observer alone; the
/// observers after it do not receive that event.
///
/// Threading: add observers before a run starts using this one; `add` is
/// not safe to call while a run uses it. The events themselves may come
/// from several threads at once (see `run_observer`) and are forwarded on
/// the thread that raised them, so the observers must be thread-safe, as
/// with a single observer.
class TASKGROUP_API fan_out_observer final : public run_observer {
 public:
  fan_out_observer() = default;
  /// Adds each of `observers` in order (see `add`).
  fan_out_observer(std::initializer_list<run_observer*> observers);
  /// The observers and masks are copied: both copies forward to the same
  /// observers.
  fan_out_observer(const fan_out_observer&) = default;
  fan_out_observer& operator=(const fan_out_observer&) = default;
  ~fan_out_observer() override = default;

  /// Adds `o` after those already added and reads its `interests()`.
  /// Throws `std::invalid_argument` for a null `o` or one that would make
  /// events go round (this fan-out, or one that forwards to it).
  void add(run_observer* o);
  /// How many observers were added.
  [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
  /// Whether events reach `o` through this fan-out, directly or through
  /// another fan-out added to it.
  [[nodiscard]] bool forwards_to(const run_observer* o) const noexcept;

  [[nodiscard]] observe interests() const noexcept override { return kinds_; }
  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) override;
  void task_begin(const event_source& at) override;
  void task_end(const event_source& at, const task_report& report) override;
  void step_begin(const event_source& at, std::string_view step) override;
  void step_end(const event_source& at, std::string_view step, std::uint64_t iterations, const status& result) override;
  void net_begin(const event_source& at, std::string_view net) override;
  void net_end(const event_source& at, std::string_view net, const status& result) override;
  void report_begin(const event_source& at, std::string_view step) override;
  void report_end(const event_source& at, std::string_view step, const status& result) override;
  void offload_begin(const event_source& at, std::string_view op) override;
  void offload_end(const event_source& at, std::string_view op, const status& result) override;
  void rank_clock(const event_source& at, int rank, std::chrono::nanoseconds offset,
                  std::chrono::nanoseconds round_trip) override;
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds wait, const error& after) override;

 private:
  struct entry {
    run_observer* observer;
    observe kinds;
  };
  template <class F>
  void each(observe kind, F&& f) {
    for (const entry& e : list_) {
      if (wants(e.kinds, kind)) f(*e.observer);
    }
  }

  std::vector<entry> list_;
  observe kinds_ = observe::none;
};

}  // namespace taskgroup
