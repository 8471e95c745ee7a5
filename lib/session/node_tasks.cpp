#include "session/node_tasks.hpp"

#include "detail/errors.hpp"
#include "detail/test_hooks.hpp"
#include "ops/run_scope.hpp"
#include "session/task_retry.hpp"
#include "session/workspace_reuse.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/recycling_allocator.hpp>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

// An attempt of a task as a coroutine; `ws` is its workspace when already
// made. The first attempt begins the task.
asio::awaitable<status> run_attempt(std::shared_ptr<run_state> rs, std::size_t k, std::shared_ptr<workspace> ws,
                                    step_stats* stats, const run_context* run, bool first) {
  const compiled_task& ct = rs->group->tasks[k];
  if (first) {
    rs->records[k].started = std::chrono::system_clock::now();
    if (driver_hooks& hooks = test_driver_hooks(); hooks.counting.load(std::memory_order_relaxed))
      hooks.coroutine_tasks.fetch_add(1, std::memory_order_relaxed);
  }
  if (!ws) ws = task_workspace(*rs, k);
  *stats = step_stats{};
  run_step_options o;
  o.registry = rs->registry;
  o.stats = stats;
  const observation observed{rs->observed.observer, rs->observed.kinds, source_of(*rs, ct)};
  if (first && wants(observed.kinds, observe::tasks)) observed.observer->task_begin(observed.at);
  node_watch& watch = rs->nodes[ct.node_index].watch;
  co_return co_await run_compiled(std::shared_ptr<const compiled_step>(rs->group, &rs->group->step(k)), std::move(ws),
                                  o, observed,
                                  site_registry{&watch.sites, static_cast<std::uint32_t>(k), &watch.feeders}, run);
}

}  // namespace

std::shared_ptr<node_tasks> node_tasks::make(std::shared_ptr<run_state> rs, std::size_t i) {
  // Asio's per-thread cache of small blocks, as for its own operations.
  return std::allocate_shared<node_tasks>(asio::recycling_allocator<node_tasks>(), key(), std::move(rs), i);
}

node_tasks::node_tasks(key, std::shared_ptr<run_state> rs, std::size_t i)
    // The node's strand: where runs complete.
    : join_core(rs->options.policy == run_policy::gather ? join_mode::gather : join_mode::fail_fast),
      task_host(rs->registry != nullptr ? *rs->registry : operator_registry::global(), rs->nodes[i].node->executor),
      rs_(std::move(rs)),
      node_(i),
      spare_ws_(std::move(part().spare_task_ws)) {
  ambient_run_ = &rs_->scope.first;
  // The waiting runs, in view of run_probe while the tasks run.
  part().watch.waiting = &waiting_;
  part().watch.tasks = this;
  // An earlier run's, on the same strand: reported to these tasks now.
  if (std::unique_ptr<frame_free_run>& d = part().node->spare.driver) {
    d->reset();
    d->rehost(*this);
    spare_ = std::move(d);
  }
  // Where the tasks' step, net, report and offload events happen, when
  // they are asked for: one entry per task of the node.
  const observation& o = rs_->observed;
  if (wants(o.kinds, observe::steps | observe::nets | observe::reports | observe::offloads)) {
    const std::vector<std::size_t>& tasks = part().compiled->tasks;
    observed_ = std::make_unique<observation[]>(tasks.size());
    for (std::size_t j = 0; j < tasks.size(); ++j) {
      const compiled_task& ct = rs_->group->tasks[tasks[j]];
      observed_[j] = observation{o.observer, o.kinds, source_of(*rs_, ct)};
    }
  }
}

node_tasks::~node_tasks() {
  if (part().watch.waiting == &waiting_) part().watch.waiting = nullptr;
  if (part().watch.tasks == this) part().watch.tasks = nullptr;
  part().tasks_gone(this);
}

void node_tasks::start() {
  await_directly();
  go_on();
}

asio::awaitable<status> node_tasks::run(std::shared_ptr<node_tasks>& t) {
  return await_round(t, [](node_tasks& self) { self.go_on(); });
}

void node_tasks::go_on() {
  // The context of the run's tasks without a policy, set once for all the
  // tasks started here in a row (each task's driver sets its own only when
  // it differs: run_scope.hpp, in_run).
  const run_context_scope scope(&rs_->scope.first);
  const std::vector<std::size_t>& tasks = part().compiled->tasks;
  if (next_ == 0) now_ = std::exchange(part().start_fresh, false) ? rs_->started : std::chrono::system_clock::now();
  while (next_ < tasks.size()) {
    const std::size_t k = tasks[next_++];
    ended_at_ = {};  // set again when this task ends inline
    // Stopped (from outside, or by a failure under fail_fast): the rest
    // never start.
    if (stopping()) {
      cancel_unstarted(*rs_, k);
      continue;
    }
    // A task that cannot even start (out of memory) fails, as any task:
    // the round goes on by the join's rules.
    try {
      std::shared_ptr<workspace> ws;
      if (!start_frame_free(next_ - 1, k, ws)) {
        coroutine_tasks_.emplace_back(k, std::move(ws));
        continue;
      }
    } catch (...) {
      child_ended(end_task(*rs_, k, error_from_exception(std::current_exception()), {}));
      continue;
    }
    if (yield_.tick()) {
      if (next_ < tasks.size()) {
        asio::post(executor(), [self = shared_from_this()] { self->after_yield(); });
        return;
      }
    } else if (yield_.came_due()) {
      // A count came due within the slice: the row goes on, its start
      // time moves with it.
      now_ = std::chrono::system_clock::now();
    }
  }
  // Still starting while the coroutine tasks are spawned: one may end
  // inline (co_spawn dispatches on the strand it is on), and the round
  // must not end before the others exist.
  if (stopping()) {
    for (const auto& [k, ws] : coroutine_tasks_) cancel_unstarted(*rs_, k);
    coroutine_tasks_.clear();
  } else if (!coroutine_tasks_.empty()) {
    ended_at_ = {};
    start_coroutine_tasks();
  }
  starting_ = false;
  settle();
}

void node_tasks::after_yield() {
  now_ = std::chrono::system_clock::now();
  go_on();
}

bool node_tasks::start_frame_free(std::size_t j, std::size_t k, std::shared_ptr<workspace>& ws, bool first) {
  const compiled_task& ct = rs_->group->tasks[k];
  const compiled_step& tree = rs_->group->step(k);
  // A task with a policy has a context of its own (its attempt), and so
  // has every task when its offloaded ops are told (where they happen);
  // the others serve the ambient one go_on has set. Made here for either
  // driver: the coroutine driver takes it from own_run.
  if (ct.retries || wants(rs_->observed.kinds, observe::offloads)) [[unlikely]]
    (void)context_of(k, j);
  if (!may_run_inline(tree)) return false;
  driver_hooks& hooks = test_driver_hooks();
  if (hooks.coroutine_only.load(std::memory_order_relaxed)) [[unlikely]]
    return false;
  if (!spare_) spare_ = make_frame_free_run(*this);
  // Room for every task before any run can wait: a run that waits must
  // find its place without allocating (a failure then would drop it with
  // its operation pending), and growing by doubling would leave each
  // smaller array behind in the heap while tasks wait.
  // A node of one task has its room inline.
  if (waiting_.capacity() < part().compiled->tasks.size()) waiting_.reserve(part().compiled->tasks.size());
  if (first) rs_->records[k].started = now_;
  ws = task_workspace(*rs_, k, &spare_ws_);
  spare_->task = static_cast<std::uint32_t>(k);
  if (observed_) spare_->observed = &observed_[j];
  const auto outcome = spare_->start(tree, ws);
  if (first && outcome != frame_free_run::outcome::declined && hooks.counting.load(std::memory_order_relaxed))
      [[unlikely]]
    hooks.frame_free_tasks.fetch_add(1, std::memory_order_relaxed);
  switch (outcome) {
    case frame_free_run::outcome::declined: return false;
    case frame_free_run::outcome::waiting:
      spare_->slot = static_cast<std::uint32_t>(waiting_.size());
      if (waiting_.empty()) waiting_ref_ = shared_from_this();
      waiting_.push_back(std::move(spare_));  // within the capacity reserved above
      return true;
    case frame_free_run::outcome::ended: break;
  }
  // A PRIVATE task's workspace ends with the task: emptied, it serves the
  // next one when nothing else holds it.
  if (ct.is_private) workspace_reuse::keep(ws, 1, spare_ws_);
  ws.reset();
  // One clock reading per task: its end is the next one's start.
  now_ = std::chrono::system_clock::now();
  ended_at_ = now_;
  ended(k, *spare_, now_);
  return true;
}

// Every coroutine task is a child of this join, spawned on the node's
// strand, where its completion comes back without an executor binder.
void node_tasks::start_coroutine_tasks() {
  const std::size_t n = coroutine_tasks_.size();
  try {
    signals_ = std::make_unique<asio::cancellation_signal[]>(n);
    coroutine_running_ = std::make_unique<char[]>(n);
    coroutine_stats_ = std::make_unique<step_stats[]>(n);
  } catch (...) {
    const error e = error_from_exception(std::current_exception());
    for (const auto& [k, ws] : coroutine_tasks_) child_ended(end_task(*rs_, k, e, {}));
    coroutine_tasks_.clear();
    return;
  }
  for (std::size_t j = 0; j < n; ++j) {
    // Stopped meanwhile (one failed inline, under fail_fast): the rest
    // never start.
    if (stopping()) {
      cancel_unstarted(*rs_, coroutine_tasks_[j].first);
      continue;
    }
    try {
      spawn_coroutine_task(j);
    } catch (...) {
      child_ended(end_task(*rs_, coroutine_tasks_[j].first, error_from_exception(std::current_exception()), {}));
    }
  }
}

void node_tasks::spawn_coroutine_task(std::size_t j, bool first) {
  auto& [k, ws] = coroutine_tasks_[j];
  // Running before it is spawned: it may end inside co_spawn.
  coroutine_running_[j] = 1;
  ++coroutines_running_;
  try {
    asio::co_spawn(
        executor(),
        run_attempt(rs_, k, std::move(ws), &coroutine_stats_[j], run_of(static_cast<std::uint32_t>(k)), first),
        asio::bind_cancellation_slot(signals_[j].slot(),
                                     [self = shared_from_this(), j](std::exception_ptr e, status st) {
                                       self->coroutine_task_ended(j, e ? error_from_exception(e) : std::move(st));
                                     }));
  } catch (...) {
    coroutine_running_[j] = 0;
    --coroutines_running_;
    throw;
  }
}

void node_tasks::coroutine_task_ended(std::size_t j, status st) {
  ended_at_ = {};
  coroutine_running_[j] = 0;
  --coroutines_running_;
  task_attempt_ended(coroutine_tasks_[j].first, std::move(st), coroutine_stats_[j], std::chrono::system_clock::now(),
                     true);
  settle();
}

void node_tasks::settle() {
  if (starting_ || coroutines_running_ != 0 || !waiting_.empty() || retry_waits_ != 0 || !awaited()) return;
  part().watch.waiting = nullptr;
  part().watch.tasks = nullptr;
  complete();
}

void node_tasks::round_ended(status st) {
  // For the node's next run.
  part().spare_task_ws = std::move(spare_ws_);
  part().tasks_ended_at = ended_at_;
  if (spare_) part().node->spare.driver = std::move(spare_);
  part().tasks_ended(rs_, std::move(st));
}

void node_tasks::cancel_running() noexcept {
  stopping_ = true;
  for (std::size_t i = 0; i < waiting_.size(); ++i) waiting_[i]->cancel();
  for (std::size_t j = 0; j < coroutine_tasks_.size() && coroutines_running_ != 0; ++j) {
    if (coroutine_running_[j] != 0) signals_[j].emit(asio::cancellation_type::terminal);
  }
  if (book_) {
    for (const std::unique_ptr<retrying>& r : book_->tasks) {
      if (r->waiting) r->signal.emit(asio::cancellation_type::terminal);
    }
  }
}

// Ends task k's record with the run's status (or retries it).
void node_tasks::ended(std::size_t k, const frame_free_run& r, std::chrono::system_clock::time_point at) {
  task_attempt_ended(k, r.result(), r.stats(), at, false);
}

void node_tasks::task_attempt_ended(std::size_t k, status st, const step_stats& stats,
                                    std::chrono::system_clock::time_point at, bool coroutine) {
  if (rs_->group->tasks[k].retries) [[unlikely]] {
    if (!st && retry_after(k, st, coroutine)) return;
    settle_attempts(k);
  }
  const status result = end_task(*rs_, k, st, stats, at);
  if (wants(rs_->observed.kinds, observe::tasks))
    rs_->observed.observer->task_end(source_of(*rs_, rs_->group->tasks[k]),
                                     report_of(rs_->group->tasks[k], rs_->records[k]));
  child_ended(result);
}

void node_tasks::run_ended(frame_free_run& r) noexcept {
  ended_at_ = std::chrono::system_clock::now();
  ended(r.task, r, ended_at_);
  std::unique_ptr<frame_free_run> done = remove(r);
  if (!spare_) spare_ = std::move(done);
  if (!waiting_.empty()) return;
  // The waiting runs' reference goes last, when this call returns: the
  // tasks may end with it (and `r` with them).
  const std::shared_ptr<node_tasks> last = std::move(waiting_ref_);
  settle();
}

void node_tasks::run_begins(frame_free_run& r) noexcept {
  if (wants(rs_->observed.kinds, observe::tasks)) {
    const compiled_task& ct = rs_->group->tasks[r.task];
    // A retry's attempt runs within the task's one begin and end.
    if (ct.retries && book_ &&
        std::any_of(book_->tasks.begin(), book_->tasks.end(), [&](const auto& x) { return x->k == r.task; }))
      return;
    rs_->observed.observer->task_begin(source_of(*rs_, ct));
  }
}

void node_tasks::run_abandoned(frame_free_run& r) noexcept {
  remove(r);
  if (!waiting_.empty()) return;
  const std::shared_ptr<node_tasks> last = std::move(waiting_ref_);  // as in run_ended
}

std::unique_ptr<frame_free_run> node_tasks::remove(frame_free_run& r) {
  const std::size_t i = r.slot;
  std::unique_ptr<frame_free_run> out = std::move(waiting_[i]);
  if (i + 1 != waiting_.size()) {
    waiting_[i] = std::move(waiting_.back());
    waiting_[i]->slot = static_cast<std::uint32_t>(i);
  }
  waiting_.pop_back();
  return out;
}

}  // namespace taskgroup::detail
