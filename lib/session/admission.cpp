#include "session/admission.hpp"

#include "detail/errors.hpp"
#include "model/limits.hpp"
#include "session/report.hpp"
#include "session/run.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace taskgroup {

status check_limits(const session_limits& limits) {
  if (limits.max_runs_in_flight && *limits.max_runs_in_flight < 1) {
    return fail(errc::invalid_task, "session_limits::max_runs_in_flight must be at least 1, got 0");
  }
  if (limits.max_queue_wait) {
    if (std::string f = detail::duration_fault(*limits.max_queue_wait, true); !f.empty()) {
      return fail(errc::invalid_task, "session_limits::max_queue_wait " + f);
    }
  }
  if (limits.max_runs_in_flight &&
      limits.priority_headroom > std::numeric_limits<std::size_t>::max() - *limits.max_runs_in_flight) {
    return fail(errc::invalid_task, "session_limits::priority_headroom " + std::to_string(limits.priority_headroom) +
                                        " and max_runs_in_flight " + std::to_string(*limits.max_runs_in_flight) +
                                        " together must fit a std::size_t");
  }
  return ok();
}

}  // namespace taskgroup

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

// Set while a run admitted from the queue begins inline (begin_at_end).
thread_local bool beginning_inline = false;

// `d` in the unit `limit` is written in: milliseconds when it is a whole
// number of them (truncated), else microseconds.
std::string in_unit_of(std::chrono::steady_clock::duration d, std::chrono::microseconds limit) {
  if (limit.count() % 1000 == 0)
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) + " us";
}

// Refuses `rs`, which never began, on `ex`.
void refuse_on(const std::shared_ptr<run_state>& rs, error why, const asio::any_io_executor& ex) noexcept {
  try {
    asio::post(ex, [rs, why = std::move(why)] { refuse_run(rs, why); });
  } catch (...) {
    // Out of memory: refused here rather than never completed.
    refuse_run(rs, error_from_exception(std::current_exception()));
  }
}

}  // namespace

void refuse_unbegun(const std::shared_ptr<run_state>& rs, error why) noexcept {
  refuse_on(rs, std::move(why), *rs->coord);
}

void refuse_arrival(const std::shared_ptr<run_state>& rs, error why, const asio::any_io_executor& plain) noexcept {
  // Still in the initiating call, on the thread that connected the slot:
  // no cancellation can reach the run from here on.
  if (rs->done) {
    if (asio::cancellation_slot slot = rs->done->slot(); slot.is_connected()) slot.clear();
  }
  refuse_on(rs, std::move(why), plain);
}

admission::verdict admission::arrive(const std::shared_ptr<run_state>& rs, int priority,
                                     const asio::any_io_executor& plain, error& why,
                                     std::shared_ptr<run_state>& displaced) {
  if (draining_) {
    why = error(errc::session_closed, "Session is draining: it takes no new run.");
    return verdict::closed;
  }
  admission_ticket& t = rs->ticket;
  t.by = this;
  t.priority = priority;
  t.seq = arrivals_++;
  if (fits(priority)) {
    link(*rs);
    return verdict::start;
  }
  // Full: the newcomer takes the place of the last run queued when it has
  // a higher priority.
  const bool full = limits_.max_queued && queue_.size() >= *limits_.max_queued;
  if (full && (queue_.empty() || std::prev(queue_.end())->first.priority >= priority)) {
    ++shed_;
    why = error(errc::overloaded, "session overloaded: " + std::to_string(in_flight_) + " runs in flight, " +
                                      std::to_string(queue_.size()) + " queued (max_queued " +
                                      std::to_string(*limits_.max_queued) + ")");
    t.by = nullptr;
    return verdict::shed;
  }
  // What may throw (out of memory) comes first, before anything changed.
  std::optional<error> pushed_out;
  if (full) {
    pushed_out.emplace(errc::overloaded, "session overloaded: shed from the queue (max_queued " +
                                             std::to_string(*limits_.max_queued) + ") for a run of priority " +
                                             std::to_string(priority));
  }
  t.arrived = std::chrono::steady_clock::now();
  if (limits_.max_queue_wait || rs->options.timeout) arm_wait(rs, plain);
  try {
    queue_.emplace(queue_key{priority, t.seq}, rs);
  } catch (...) {
    if (t.wait) t.wait->cancel();
    t.by = nullptr;
    throw;
  }
  t.at = admission_ticket::where::queued;
  if (full) {
    // The last is an earlier run: the newcomer ranks above it.
    auto last = std::prev(queue_.end());
    displaced = std::move(last->second);
    queue_.erase(last);
    displaced->ticket.at = admission_ticket::where::none;
    if (displaced->ticket.wait) displaced->ticket.wait->cancel();
    ++shed_;
    why = std::move(*pushed_out);
  }
  return verdict::queued;
}

void admission::link(run_state& rs) noexcept {
  admission_ticket& t = rs.ticket;
  t.at = admission_ticket::where::in_flight;
  t.prev = nullptr;
  t.next = first_in_flight_;
  if (first_in_flight_ != nullptr) first_in_flight_->ticket.prev = &rs;
  first_in_flight_ = &rs;
  ++in_flight_;
}

void admission::unlink(run_state& rs) noexcept {
  admission_ticket& t = rs.ticket;
  (t.prev != nullptr ? t.prev->ticket.next : first_in_flight_) = t.next;
  if (t.next != nullptr) t.next->ticket.prev = t.prev;
  t.prev = t.next = nullptr;
  t.at = admission_ticket::where::none;
  --in_flight_;
}

// The run's wait ends at the first of its limits: the queue's wait and its
// own timeout (which counts from its arrival, in the queue too).
void admission::arm_wait(const std::shared_ptr<run_state>& rs, const asio::any_io_executor& plain) {
  admission_ticket& t = rs->ticket;
  // The run's own timeout when it ends first (or at the same time).
  t.wait_is_deadline =
      rs->options.timeout && (!limits_.max_queue_wait || *rs->options.timeout <= *limits_.max_queue_wait);
  t.wait_limit = t.wait_is_deadline ? *rs->options.timeout : *limits_.max_queue_wait;
  t.wait.emplace(plain, t.arrived + t.wait_limit);
  t.wait->async_wait([this, rs](const boost::system::error_code& ec) {
    if (!ec) waited(rs);
  });
}

void admission::waited(const std::shared_ptr<run_state>& rs) {
  error why;
  {
    std::lock_guard lock(mutex_);
    admission_ticket& t = rs->ticket;
    if (t.at != admission_ticket::where::queued) return;  // admitted, withdrawn or shed meanwhile
    queue_.erase(queue_key{t.priority, t.seq});
    t.at = admission_ticket::where::none;
    const auto waited_for = std::chrono::steady_clock::now() - t.arrived;
    if (t.wait_is_deadline) {
      // The run's own timeout: whole milliseconds.
      why = run_timed_out(std::chrono::duration_cast<std::chrono::milliseconds>(t.wait_limit), rs->report.trace_id,
                          " waiting for admission");
    } else {
      ++shed_;
      why =
          error(errc::overloaded, "session overloaded: waited " + in_unit_of(waited_for, t.wait_limit) +
                                      " in the queue (max_queue_wait " + in_unit_of(t.wait_limit, t.wait_limit) + ")");
    }
  }
  // Out of the queue, but a cancellation may still reach it on its
  // coordinator (cancel_run): refused there.
  refuse_unbegun(rs, std::move(why));
}

bool admission::withdraw(run_state& rs) noexcept {
  std::lock_guard lock(mutex_);
  admission_ticket& t = rs.ticket;
  if (t.at != admission_ticket::where::queued) return false;
  queue_.erase(queue_key{t.priority, t.seq});
  t.at = admission_ticket::where::none;
  if (t.wait) t.wait->cancel();
  return true;
}

std::size_t admission::places_for(int priority) const noexcept {
  if (!limits_.max_runs_in_flight) return std::numeric_limits<std::size_t>::max();
  return *limits_.max_runs_in_flight + (priority > 0 ? limits_.priority_headroom : 0);
}

bool admission::fits(int priority) const noexcept { return in_flight_ < places_for(priority); }

void admission::admit_queued(std::vector<std::shared_ptr<run_state>>& out) {
  // Room for every run that fits first (out of memory: none is taken, and
  // the next end tries again); then nothing below throws. The queue's
  // first has the highest priority: the most places it may take.
  if (queue_.empty()) return;
  const std::size_t places = places_for(queue_.begin()->first.priority);
  const std::size_t room = places - std::min(in_flight_, places);
  out.reserve(out.size() + std::min(room, queue_.size()));
  const auto now = std::chrono::steady_clock::now();
  while (!queue_.empty() && fits(queue_.begin()->first.priority)) {
    auto first = queue_.begin();
    std::shared_ptr<run_state> rs = std::move(first->second);
    queue_.erase(first);
    if (rs->ticket.wait) rs->ticket.wait->cancel();
    rs->ticket.queued_for = now - rs->ticket.arrived;
    link(*rs);
    out.push_back(std::move(rs));
  }
}

void admission::idle_drains(std::vector<drain_handler>& out) {
  if (!draining_ || in_flight_ != 0 || !queue_.empty()) return;
  out.reserve(drains_.size());  // then nothing below throws
  for (drain_handler& d : drains_) {
    asio::get_associated_cancellation_slot(d).clear();
    out.push_back(std::move(d));
  }
  drains_.clear();
}

void admission::ended(run_state& rs) noexcept {
  std::vector<std::shared_ptr<run_state>> starts;
  std::vector<drain_handler> done;
  const asio::any_io_executor* drain_ex = nullptr;
  bool cancelled = false;
  try {
    std::lock_guard lock(mutex_);
    if (rs.ticket.at != admission_ticket::where::in_flight) return;
    unlink(rs);
    admit_queued(starts);
    idle_drains(done);
    cancelled = drain_cancelled_;
    drain_ex = drain_ex_;
  } catch (...) {
    // Out of memory while admitting: the queued runs stay queued until a
    // run ends or the limits change.
  }
  for (const std::shared_ptr<run_state>& s : starts) begin_at_end(s);
  const boost::system::error_code ec = cancelled ? make_error_code(errc::cancelled) : boost::system::error_code();
  for (drain_handler& d : done) {
    try {
      asio::post(*drain_ex, asio::append(std::move(d), ec));
    } catch (...) {
      // Out of memory: that drain is dropped uncalled, as an operation of
      // a destroyed context is.
    }
  }
}

void admission::begin_at_end(const std::shared_ptr<run_state>& rs) noexcept {
  try {
    // On the ended run's coordinator, a run coordinated by the session's
    // coordinator begins there at once when it is free: posted, its begin
    // would wait behind every handler queued on the context (nodes'
    // tasks, under load), and the runs in flight, which end there, behind
    // it. Not a run coordinated on a node's strand (its begin starts its
    // node inline), nor within such a begin (a run refused as it begins
    // ends, and would admit the next inline again): posted then.
    if (rs->coord_node == nullptr && !beginning_inline) {
      asio::dispatch(*rs->coord, [this, rs] {
        beginning_inline = true;
        begin_(owner_, rs);
        beginning_inline = false;
      });
      return;
    }
    asio::post(*rs->coord, [this, rs] { begin_(owner_, rs); });
  } catch (...) {
    refuse_run(rs, error_from_exception(std::current_exception()));
  }
}

void admission::drain(drain_handler done, const asio::any_io_executor& fallback) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  drain_ex_ = &fallback;
  if (in_flight_ == 0 && queue_.empty()) {
    const boost::system::error_code ec =
        drain_cancelled_ ? make_error_code(errc::cancelled) : boost::system::error_code();
    lock.unlock();
    // Never inside the initiating call.
    asio::post(fallback, asio::append(std::move(done), ec));
    return;
  }
  if (asio::cancellation_slot slot = asio::get_associated_cancellation_slot(done); slot.is_connected()) {
    slot.assign([this](asio::cancellation_type_t) { cancel_all(); });
  }
  drains_.push_back(std::move(done));
}

void admission::cancel_all() {
  std::vector<std::shared_ptr<run_state>> queued = take_queue();
  std::vector<std::shared_ptr<run_state>> running;
  {
    std::lock_guard lock(mutex_);
    drain_cancelled_ = true;
    for (run_state* r = first_in_flight_; r != nullptr; r = r->ticket.next) {
      running.push_back(r->shared_from_this());
    }
  }
  for (const auto& r : queued)
    refuse_unbegun(
        r, error(errc::cancelled, "run cancelled while waiting for admission: the session's drain was cancelled"));
  for (const auto& r : running) {
    r->cancel_asked.store(true, std::memory_order_release);
    asio::dispatch(*r->coord, [r] { cancel_run(r); });
  }
}

std::vector<std::shared_ptr<run_state>> admission::take_queue() noexcept {
  std::vector<std::shared_ptr<run_state>> out;
  std::lock_guard lock(mutex_);
  try {
    out.reserve(queue_.size());
  } catch (...) {
    return out;
  }
  for (auto& [key, rs] : queue_) {
    rs->ticket.at = admission_ticket::where::none;
    if (rs->ticket.wait) rs->ticket.wait->cancel();
    out.push_back(std::move(rs));
  }
  queue_.clear();
  return out;
}

void admission::set_limits(const session_limits& limits) {
  std::vector<std::shared_ptr<run_state>> starts;
  {
    std::lock_guard lock(mutex_);
    limits_ = limits;
    // A higher bound admits what now fits.
    admit_queued(starts);
  }
  for (const std::shared_ptr<run_state>& s : starts) asio::post(*s->coord, [this, s] { begin_(owner_, s); });
}

session_limits admission::limits() const {
  std::lock_guard lock(mutex_);
  return limits_;
}

std::vector<admission::seen_run> admission::view() const {
  std::vector<seen_run> out;
  std::lock_guard lock(mutex_);
  out.reserve(in_flight_ + queue_.size());
  // The list holds the newest first.
  for (run_state* r = first_in_flight_; r != nullptr; r = r->ticket.next) {
    out.push_back({r->shared_from_this(), false, {}, r->ticket.priority});
  }
  std::reverse(out.begin(), out.end());
  for (const auto& [key, rs] : queue_) out.push_back({rs, true, rs->ticket.arrived, rs->ticket.priority});
  return out;
}

session_load admission::load() const {
  std::lock_guard lock(mutex_);
  return {in_flight_, queue_.size(), shed_};
}

}  // namespace taskgroup::detail
