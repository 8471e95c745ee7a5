#include "state.hpp"

#include "../detail/test_hooks.hpp"
#include "../detail/workspace_reuse.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// GCC 12 flags the coroutine ramps of this file, inlined into their
// caller, with a false -Wmismatched-new-delete: Asio's frame operator new
// (aligned_alloc through its recycling allocator) and its matching delete.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

// The tasks of one node run without coroutine frames
// (detail::frame_free_run): those whose tree allows it, observed or not.
// Each runs on the node's strand until its end or its first wait; a
// waiting task then costs its run, its workspace and its pending operation
// only. The batch is the join of those runs (detail::join_core, with the
// rules of every join): it ends each task's report, keeps the first
// failure and, under fail_fast, stops the others at once. It is shared by
// its holder and, while any run waits, by its waiting runs (one reference,
// `waiting_ref_`, for all of them, dropped when the last one ends): a
// waiting run's operation may be the last thing alive when an abandoned
// io_context is destroyed.
class node_batch final : public detail::join_core<node_batch>, public detail::task_host {
 public:
  // `tasks`: how many tasks the node may start here.
  static std::shared_ptr<node_batch> make(std::shared_ptr<run_state> rs, node_state* n, detail::join_mode mode,
                                          std::size_t tasks) {
    return std::shared_ptr<node_batch>(new node_batch(std::move(rs), n, mode, tasks));
  }

  // Runs task k here until its end (true; its report is then ended) or
  // its first wait (true), or declines it (false: it needs the coroutine
  // runner, `ws` is its workspace).
  bool start(std::size_t k, std::shared_ptr<workspace>& ws, std::chrono::system_clock::time_point& now) {
    const compiled_task& ct = rs_->group->tasks[k];
    const detail::compiled_step& tree = rs_->group->step(k);
    if (!detail::may_run_inline(tree)) return false;
    detail::driver_hooks& hooks = detail::test_driver_hooks();
    if (hooks.coroutine_only.load(std::memory_order_relaxed)) [[unlikely]]
      return false;
    if (!spare_) spare_ = detail::make_frame_free_run(*this);
    // Room for every task before any run can wait: a run that waits must
    // find its place without allocating (a failure then would drop it
    // with its operation pending), and growing by doubling would leave
    // each smaller array behind in the heap while tasks wait.
    if (waiting_.capacity() == 0) waiting_.reserve(tasks_);
    rs_->records[k].started = now;
    ws = task_workspace(*rs_, k, &spare_ws_);
    spare_->task = static_cast<std::uint32_t>(k);
    if (run_observer* o = rs_->options.observer; o != nullptr) {
      spare_->observer = std::make_unique<task_events>(o, *ct.name, *ct.node);
    }
    const auto outcome = spare_->start(tree, ws);
    if (outcome != detail::frame_free_run::outcome::declined && hooks.counting.load(std::memory_order_relaxed))
        [[unlikely]]
      hooks.frame_free_tasks.fetch_add(1, std::memory_order_relaxed);
    switch (outcome) {
      case detail::frame_free_run::outcome::declined: return false;
      case detail::frame_free_run::outcome::waiting:
        spare_->slot = static_cast<std::uint32_t>(waiting_.size());
        if (waiting_.empty()) waiting_ref_ = shared_from_this();
        waiting_.push_back(std::move(spare_));  // within the capacity reserved above
        return true;
      case detail::frame_free_run::outcome::ended: break;
    }
    // A PRIVATE task's workspace ends with the task: emptied, it serves
    // the next one when nothing else holds it.
    if (ct.is_private && ws.use_count() == 1) {
      detail::workspace_reuse::clear(*ws);
      spare_ws_ = std::move(ws);
    }
    ws.reset();
    // One clock reading per task: its end is the next one's start.
    now = std::chrono::system_clock::now();
    ended(k, *spare_, now);
    return true;
  }

  [[nodiscard]] bool idle() const noexcept { return waiting_.empty(); }
  // The runs that wait (run_probe asks them where they stand).
  [[nodiscard]] const std::vector<std::unique_ptr<detail::frame_free_run>>& waiting() const noexcept {
    return waiting_;
  }

  // Completes once no run waits, with the first failure of the batch's
  // tasks (or errc::cancelled when cancelled from outside with none).
  // Cancelling it stops the runs. Meanwhile the runs hold the batch: `b`
  // is empty until the completion hands it back.
  static asio::awaitable<status> wait(std::shared_ptr<node_batch>& b) {
    return await_round(b, [](node_batch& self) {
      if (self.waiting_.empty()) self.complete();
    });
  }

  // join_core's hook: asks every waiting run to stop (they end cancelled);
  // no run starts.
  void cancel_running() noexcept {
    stopping_ = true;
    for (std::size_t i = 0; i < waiting_.size(); ++i) waiting_[i]->cancel();
  }

 private:
  node_batch(std::shared_ptr<run_state> rs, node_state* n, detail::join_mode mode, std::size_t tasks)
      // The node's strand: where runs complete.
      : join_core(mode),
        task_host(rs->registry != nullptr ? *rs->registry : operator_registry::global(), n->executor),
        rs_(std::move(rs)),
        tasks_(tasks) {}

  // Ends task k's report with the run's status.
  void ended(std::size_t k, const detail::frame_free_run& r, std::chrono::system_clock::time_point at) {
    const status st = end_task(*rs_, k, r.result(), r.stats(), at);
    if (run_observer* o = rs_->options.observer; o != nullptr)
      o->task_end(report_of(rs_->group->tasks[k], rs_->records[k]));
    child_ended(st);
  }

  void run_ended(detail::frame_free_run& r) noexcept override {
    ended(r.task, r, std::chrono::system_clock::now());
    std::unique_ptr<detail::frame_free_run> done = remove(r);
    if (!spare_) spare_ = std::move(done);
    if (!waiting_.empty()) return;
    // The waiting runs' reference goes last, when this call returns: the
    // batch may end with it (and `r` with the batch).
    const std::shared_ptr<node_batch> last = std::move(waiting_ref_);
    if (awaited()) complete();
  }

  void run_begins(detail::frame_free_run& r) noexcept override {
    if (run_observer* o = rs_->options.observer; o != nullptr) {
      const compiled_task& ct = rs_->group->tasks[r.task];
      o->task_begin(*ct.name, *ct.node);
    }
  }

  void run_abandoned(detail::frame_free_run& r) noexcept override {
    remove(r);
    if (!waiting_.empty()) return;
    const std::shared_ptr<node_batch> last = std::move(waiting_ref_);  // as in run_ended
  }

  std::unique_ptr<detail::frame_free_run> remove(detail::frame_free_run& r) {
    const std::size_t i = r.slot;
    std::unique_ptr<detail::frame_free_run> out = std::move(waiting_[i]);
    if (i + 1 != waiting_.size()) {
      waiting_[i] = std::move(waiting_.back());
      waiting_[i]->slot = static_cast<std::uint32_t>(i);
    }
    waiting_.pop_back();
    return out;
  }

  std::shared_ptr<run_state> rs_;
  std::size_t tasks_;
  std::vector<std::unique_ptr<detail::frame_free_run>> waiting_;
  std::unique_ptr<detail::frame_free_run> spare_;
  std::shared_ptr<workspace> spare_ws_;      // an emptied PRIVATE task workspace, for the next task
  std::shared_ptr<node_batch> waiting_ref_;  // while a run waits
};

// A task as a coroutine; `ws` is its workspace when already made.
asio::awaitable<status> run_task(std::shared_ptr<run_state> rs, std::size_t k, std::shared_ptr<workspace> ws) {
  const compiled_task& ct = rs->group->tasks[k];
  rs->records[k].started = std::chrono::system_clock::now();
  if (detail::driver_hooks& hooks = detail::test_driver_hooks(); hooks.counting.load(std::memory_order_relaxed))
    hooks.coroutine_tasks.fetch_add(1, std::memory_order_relaxed);
  if (!ws) ws = task_workspace(*rs, k);
  step_stats stats;
  run_step_options o;
  o.registry = rs->registry;
  o.stats = &stats;
  run_observer* observer = rs->options.observer;
  // On the heap, and only with an observer: the frame stays small (it is
  // alive for as long as the task pends).
  std::unique_ptr<task_events> events;
  if (observer != nullptr) {
    events = std::make_unique<task_events>(observer, *ct.name, *ct.node);
    o.observer = events.get();
    observer->task_begin(*ct.name, *ct.node);
  }
  status st = co_await detail::run_compiled(
      std::shared_ptr<const detail::compiled_step>(rs->group, &rs->group->step(k)), std::move(ws), o,
      detail::site_registry{&rs->watch[ct.node_index].sites, static_cast<std::uint32_t>(k),
                            &rs->watch[ct.node_index].feeders});
  status result = end_task(*rs, k, st, stats);
  if (observer != nullptr) observer->task_end(report_of(ct, rs->records[k]));
  co_return result;
}

// The batch's part in a join beside the coroutine tasks.
asio::awaitable<status> await_batch(std::shared_ptr<node_batch>& batch) {
  co_await asio::this_coro::throw_if_cancelled(false);  // the runs must be waited for
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) batch->cancel();  // cancelled before it started
  co_return co_await node_batch::wait(batch);
}

// The tasks of one node. Those whose tree allows it run without coroutine
// frames (node_batch), one after another on the node's strand until each
// ends or waits (yielding every `yield_every` tasks, so that other work of
// the strand and cancellation get in); the others are joined as
// coroutines. The join policy is the same for both: under fail_fast the
// first failure cancels every task not yet ended.
asio::awaitable<status> run_tasks(std::shared_ptr<run_state> rs, std::size_t i, node_state* n, detail::join_mode mode) {
  const compiled_node& cn = rs->group->nodes[i];
  // Cancelled or not, the tasks that wait must be waited for.
  co_await asio::this_coro::throw_if_cancelled(false);
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  constexpr std::size_t yield_every = run_step_options{}.yield_every;
  std::shared_ptr<node_batch> batch = node_batch::make(rs, n, mode, cn.tasks.size());
  // The batch's waiting runs, in view of run_probe while this lasts.
  struct in_view {
    node_watch& w;
    explicit in_view(node_watch& watch) : w(watch) {}
    ~in_view() { w.waiting = nullptr; }
    in_view(const in_view&) = delete;
    in_view& operator=(const in_view&) = delete;
  } view{rs->watch[i]};
  view.w.waiting = &batch->waiting();
  std::vector<std::pair<std::size_t, std::shared_ptr<workspace>>> rest;
  bool cancelled = false;
  auto halted = [&] { return cancelled || (batch->first_failure() && mode == detail::join_mode::fail_fast); };
  std::size_t since_yield = 0;
  auto now = std::chrono::system_clock::now();
  for (std::size_t k : cn.tasks) {
    if (halted()) {
      cancel_unstarted(*rs, k);
      continue;
    }
    std::shared_ptr<workspace> ws;
    if (!batch->start(k, ws, now)) {
      rest.emplace_back(k, std::move(ws));
      continue;
    }
    if (++since_yield == yield_every) {
      since_yield = 0;
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
      if (cs.cancelled() != asio::cancellation_type::none) cancelled = true;
      now = std::chrono::system_clock::now();
    }
  }
  if (halted()) {
    for (const auto& [k, ws] : rest) cancel_unstarted(*rs, k);
    batch->cancel();
    if (!batch->idle()) (void)co_await node_batch::wait(batch);
    if (batch->first_failure()) co_return *batch->first_failure();
    co_return error(errc::cancelled, "cancelled");
  }
  status joined = ok();
  if (rest.empty()) {
    if (!batch->idle()) joined = co_await node_batch::wait(batch);
  } else {
    const std::size_t children = rest.size() + (batch->idle() ? 0 : 1);
    joined = co_await detail::join(
        n->executor, children,
        [&](std::size_t j) {
          if (j == rest.size()) return await_batch(batch);
          return run_task(rs, rest[j].first, std::move(rest[j].second));
        },
        mode);
  }
  if (batch->first_failure()) co_return *batch->first_failure();
  co_return joined;
}

}  // namespace

void describe_node(const run_state& rs, std::size_t i, std::vector<std::pair<std::size_t, std::string>>& out) {
  const node_watch& w = rs.watch[i];
  const std::size_t first = out.size();
  for (const wait_site& s : w.sites) out.emplace_back(s.task, where(s, &w.feeders));
  if (w.waiting != nullptr) {
    for (const auto& r : *w.waiting) {
      if (std::string at = r->where(); !at.empty()) out.emplace_back(r->task, std::move(at));
    }
  }
  // This node's waits, [first, listed_end), by task: looked up below.
  auto by_task = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_task);
  const std::size_t listed_end = out.size();
  // The node's other tasks that have begun and not ended: between two
  // ops (a yield), or in a wait of their steps' own (a step deadline,
  // concurrent substeps, report steps).
  for (std::size_t k : rs.group->nodes[i].tasks) {
    const task_record& r = rs.records[k];
    if (r.started == std::chrono::system_clock::time_point{} || r.finished != std::chrono::system_clock::time_point{})
      continue;
    const auto begin = out.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = out.begin() + static_cast<std::ptrdiff_t>(listed_end);
    if (!std::binary_search(begin, end, std::pair<std::size_t, std::string>(k, {}), by_task))
      out.emplace_back(k, std::string(root_name(rs.group->step(k))) + ": running, not waiting on an op");
  }
}

// One node: the run's workspace there (the node's own, in turn, for a
// node with GLOBAL tasks; otherwise a child of it), outputs and feeds in
// it, local init, tasks with report steps, outputs fetched, local exit.
asio::awaitable<status> run_node(std::shared_ptr<run_state> rs, std::size_t i) {
  const compiled_node& cn = rs->group->nodes[i];
  node_state* n = rs->nodes[i];
  run_step_options o;
  o.registry = rs->registry;
  std::optional<task_events> events;
  if (rs->options.observer != nullptr) {
    events.emplace(rs->options.observer, std::string(), cn.name);
    o.observer = &*events;
  }
  auto node_error = [&](const error& e) { return error(e.code, "node " + quote(cn.name) + ": " + e.message); };
  node_turns::turn turn;
  if (cn.global) {
    auto t = co_await n->turns->acquire();
    if (!t) co_return node_error(t.error());  // its tasks never ran
    turn = std::move(t).value();
  }
  // Named as the node: messages read the same either way.
  rs->workspaces[i] = cn.global ? n->ws : n->ws->create_child(cn.name);
  rs->watch[i].feeders = cn.feeders;
  const std::shared_ptr<workspace>& ws = rs->workspaces[i];
  // Every declared output lives in the run's workspace, made before any
  // task starts, so private tasks write through to it and it survives
  // them; unless the node keeps a blob of that name: then the run writes
  // that one (state shared by the node's runs on purpose).
  for (std::size_t k : cn.tasks) {
    const compiled_task& ct = rs->group->tasks[k];
    if (!ct.has_outputs) continue;  // without touching the task
    for (const auto& out : task_access::outputs(ct.t)) {
      for (const auto& name : out->blobs) ws->create(name);
    }
  }
  if (status st = place_feeds(*rs, i); !st) co_return node_error(st.error());
  if (cn.init) {
    if (status st = co_await detail::run_compiled(cn.init, ws, o); !st) co_return node_error(st.error());
  }
  const auto mode = rs->options.policy == run_policy::gather ? detail::join_mode::gather : detail::join_mode::fail_fast;
  // Made outside the co_await: GCC 12 destroys the temporaries of a call
  // inside one twice when the coroutine is destroyed suspended.
  asio::awaitable<status> work = detail::run_with_reporters(run_tasks(rs, i, n, mode), cn.reports, ws, o, cn.name);
  status st = co_await std::move(work);
  fetch_outputs(*rs, i);
  if (!st) co_return st;
  if (cn.exit) {
    if (status ex = co_await detail::run_compiled(cn.exit, ws, o); !ex) co_return node_error(ex.error());
  }
  co_return ok();
}

}  // namespace taskgroup::detail
