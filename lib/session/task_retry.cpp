// node_tasks' retries: when a failed attempt runs again, the wait between
// attempts, and what the report and the probe say of them.
#include "session/task_retry.hpp"

#include "detail/errors.hpp"
#include "session/run.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

namespace asio = boost::asio;

node_tasks::retry_book& node_tasks::book() {
  if (!book_) {
    auto b = std::make_unique<retry_book>();
    b->runs = std::make_unique<const run_context*[]>(rs_->group->tasks.size());  // all null
    task_runs_ = b->runs.get();
    book_ = std::move(b);
  }
  return *book_;
}

const run_context* node_tasks::context_of(std::size_t k, std::size_t pos) {
  const compiled_task& ct = rs_->group->tasks[k];
  const int max_attempts = ct.retries ? ct.t.retry().max_attempts : 1;
  const observation* told = offloads_told(pos);
  retry_book& b = book();
  const run_context* found = nullptr;
  for (const std::unique_ptr<retrying>& r : b.tasks) {
    if (r->k == k && r->ctx) found = &*r->ctx;
  }
  // First attempts share a context when they would hold the same values:
  // those of one max_attempts (a handful), unless each task's offloaded
  // ops are told (then each has its own, and no search is needed).
  for (std::size_t i = 0; found == nullptr && told == nullptr && i < b.first_attempts.size(); ++i) {
    const run_context& c = *b.first_attempts[i];
    if (c.max_attempts() == max_attempts && c.offloads_told() == told) found = &c;
  }
  if (found == nullptr) {
    found = b.first_attempts.emplace_back(std::make_unique<run_context>(&rs_->scope, 1, max_attempts, told)).get();
  }
  b.runs[k] = found;
  return found;
}

const observation* node_tasks::offloads_told(std::size_t pos) const noexcept {
  return observed_ && wants(observed_[pos].kinds, observe::offloads) ? &observed_[pos] : nullptr;
}

bool node_tasks::retry_after(std::size_t k, status& st, bool coroutine) {
  const compiled_task& ct = rs_->group->tasks[k];
  const retry_policy& policy = ct.t.retry();
  retrying* r = nullptr;
  retry_book& b = book();
  for (const std::unique_ptr<retrying>& x : b.tasks) {
    if (x->k == k) r = x.get();
  }
  const int attempt = r != nullptr ? r->attempt : 1;
  const retry_decision d = decide_retry(policy, attempt, st.error(), stopping(), rs_->scope.deadline);
  if (d.what == retry_decision::kind::end) return false;
  if (d.what == retry_decision::kind::past_deadline) {
    st = past_deadline(st.error(), attempt, policy, d.wait);
    return false;
  }
  try {
    if (r == nullptr) {
      const std::vector<std::size_t>& tasks = part().compiled->tasks;
      const auto pos = static_cast<std::size_t>(std::find(tasks.begin(), tasks.end(), k) - tasks.begin());
      r = b.tasks.emplace_back(std::make_unique<retrying>(*this, k, pos, policy)).get();
      if (coroutine) {
        for (std::size_t j = 0; j < coroutine_tasks_.size(); ++j) {
          if (coroutine_tasks_[j].first == k) r->coroutine_slot = j;
        }
      }
    }
    r->log.add(st.error());
    r->last = st.error();
  } catch (...) {
    return false;  // out of memory: the failure stands
  }
  r->coroutine = coroutine;
  r->due = std::chrono::steady_clock::now() + d.wait;
  if (wants(rs_->observed.kinds, observe::tasks)) {
    rs_->observed.observer->retry_wait(source_of(*rs_, ct), {}, attempt + 1, policy.max_attempts, d.wait, r->last);
  }
  r->in_start = true;
  r->ended_early.reset();
  sleep_until(executor(), r->due, op_completion(*r, r->signal.slot()));
  r->in_start = false;
  if (r->ended_early) return false;  // the wait could not begin: the failure stands
  r->waiting = true;
  if (retry_waits_++ == 0) b.ref = shared_from_this();
  return true;
}

void node_tasks::retry_wait_ended(retrying& r, const status& st) {
  r.waiting = false;
  // The last reference of the waits goes when this call returns: the
  // tasks may end with it.
  std::shared_ptr<node_tasks> last_ref;
  if (--retry_waits_ == 0) last_ref = std::move(book_->ref);
  const std::size_t k = r.k;
  if (!st || stopping()) {
    const error e =
        cancelled_waiting(r.attempt + 1, r.policy->max_attempts, r.due - std::chrono::steady_clock::now(), r.last)
            .with_context(root_name(rs_->group->step(k)));
    task_attempt_ended(k, e, {}, std::chrono::system_clock::now(), r.coroutine);
    settle();
    return;
  }
  ++r.attempt;
  r.ctx.reset();
  r.ctx.emplace(&rs_->scope, r.attempt, r.policy->max_attempts, offloads_told(r.pos));
  book_->runs[k] = &*r.ctx;
  // The declared outputs start empty: a failed attempt's partial writes
  // never reach the report.
  if (rs_->group->tasks[k].has_outputs) {
    for (const auto& out : task_access::outputs(rs_->group->tasks[k].t)) {
      for (const auto& name : out->blobs) part().ws->create(name).reset();
    }
  }
  try {
    if (r.coroutine) {
      coroutine_tasks_[r.coroutine_slot].second.reset();
      spawn_coroutine_task(r.coroutine_slot, false);
    } else {
      std::shared_ptr<workspace> ws;
      now_ = std::chrono::system_clock::now();
      if (!start_frame_free(r.pos, k, ws, false)) {
        task_attempt_ended(k, error(errc::invalid_task, "internal: a retried task left the frame-free driver"), {},
                           now_, false);
      }
    }
  } catch (...) {
    task_attempt_ended(k, error_from_exception(std::current_exception()), {}, std::chrono::system_clock::now(),
                       r.coroutine);
  }
  settle();
}

void node_tasks::settle_attempts(std::size_t k) {
  if (!book_) return;
  std::vector<std::unique_ptr<retrying>>& waiting = book_->tasks;
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    retrying& r = **it;
    if (r.k != k) continue;
    rs_->records[k].retries = static_cast<std::uint16_t>(r.attempt - 1);
    try {
      if (!r.log.empty()) part().attempt_failures.emplace_back(k, r.log.take());
    } catch (...) {
      // Out of memory: the report lists no failed attempt's error.
    }
    waiting.erase(it);
    book_->runs[k] = nullptr;  // it has ended
    return;
  }
}

void node_tasks::describe_retries(std::vector<std::pair<std::size_t, std::string>>& out) const {
  if (!book_) return;
  const auto now = std::chrono::steady_clock::now();
  for (const std::unique_ptr<retrying>& r : book_->tasks) {
    if (!r->waiting) continue;
    out.emplace_back(r->k, std::string(root_name(rs_->group->step(r->k))) + ": " +
                               waiting_to_retry(r->attempt + 1, r->policy->max_attempts, r->due - now, r->last));
  }
}

}  // namespace taskgroup::detail
