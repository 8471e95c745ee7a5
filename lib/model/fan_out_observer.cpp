#include <taskgroup/fan_out_observer.hpp>

#include <stdexcept>

namespace taskgroup {

fan_out_observer::fan_out_observer(std::initializer_list<run_observer*> observers) {
  for (run_observer* o : observers) add(o);
}

void fan_out_observer::add(run_observer* o) {
  if (o == nullptr) throw std::invalid_argument("fan_out_observer::add: the observer is null");
  // `o` reaching this one would send each event round for ever.
  if (o == this) throw std::invalid_argument("fan_out_observer::add: a fan-out cannot forward to itself");
  if (const auto* fan = dynamic_cast<const fan_out_observer*>(o); fan != nullptr && fan->forwards_to(this)) {
    throw std::invalid_argument(
        "fan_out_observer::add: the observer forwards to this fan-out, which would forward to it");
  }
  list_.push_back({o, o->interests()});
  kinds_ = kinds_ | list_.back().kinds;
}

bool fan_out_observer::forwards_to(const run_observer* o) const noexcept {
  for (const entry& e : list_) {
    if (e.observer == o) return true;
    if (const auto* fan = dynamic_cast<const fan_out_observer*>(e.observer); fan != nullptr && fan->forwards_to(o)) {
      return true;
    }
  }
  return false;
}

void fan_out_observer::run_begin(const event_source& at,
                                 const std::vector<std::pair<std::string, std::string>>& tasks) {
  each(observe::tasks, [&](run_observer& o) { o.run_begin(at, tasks); });
}
void fan_out_observer::task_begin(const event_source& at) {
  each(observe::tasks, [&](run_observer& o) { o.task_begin(at); });
}
void fan_out_observer::task_end(const event_source& at, const task_report& report) {
  each(observe::tasks, [&](run_observer& o) { o.task_end(at, report); });
}
void fan_out_observer::step_begin(const event_source& at, std::string_view step) {
  each(observe::steps, [&](run_observer& o) { o.step_begin(at, step); });
}
void fan_out_observer::step_end(const event_source& at, std::string_view step, std::uint64_t iterations,
                                const status& result) {
  each(observe::steps, [&](run_observer& o) { o.step_end(at, step, iterations, result); });
}
void fan_out_observer::net_begin(const event_source& at, std::string_view net) {
  each(observe::nets, [&](run_observer& o) { o.net_begin(at, net); });
}
void fan_out_observer::net_end(const event_source& at, std::string_view net, const status& result) {
  each(observe::nets, [&](run_observer& o) { o.net_end(at, net, result); });
}
void fan_out_observer::report_begin(const event_source& at, std::string_view step) {
  each(observe::reports, [&](run_observer& o) { o.report_begin(at, step); });
}
void fan_out_observer::report_end(const event_source& at, std::string_view step, const status& result) {
  each(observe::reports, [&](run_observer& o) { o.report_end(at, step, result); });
}
void fan_out_observer::offload_begin(const event_source& at, std::string_view op) {
  each(observe::offloads, [&](run_observer& o) { o.offload_begin(at, op); });
}
void fan_out_observer::offload_end(const event_source& at, std::string_view op, const status& result) {
  each(observe::offloads, [&](run_observer& o) { o.offload_end(at, op, result); });
}
void fan_out_observer::rank_clock(const event_source& at, int rank, std::chrono::nanoseconds offset,
                                  std::chrono::nanoseconds round_trip) {
  each(observe::tasks, [&](run_observer& o) { o.rank_clock(at, rank, offset, round_trip); });
}
void fan_out_observer::retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                                  std::chrono::microseconds wait, const error& after) {
  // A task's attempts are task events, a step's are step events.
  each(step.empty() ? observe::tasks : observe::steps,
       [&](run_observer& o) { o.retry_wait(at, step, next_attempt, max_attempts, wait, after); });
}

}  // namespace taskgroup
