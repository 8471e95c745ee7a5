#include <taskgroup/session.hpp>

#include <taskgroup/codec.hpp>

#include "detail/join.hpp"
#include "detail/limits.hpp"
#include "detail/runner.hpp"
#include "detail/task_misuse.hpp"
#include "detail/test_hooks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

namespace taskgroup {

namespace asio = boost::asio;
using strand_t = asio::strand<asio::any_io_executor>;

namespace {

struct node_state {
  std::string name;
  strand_t strand;
  std::shared_ptr<workspace> ws;
};

// A group is kept compiled while it lives (one of these per task), so a
// task's entry is small: its names by reference, its tree in the group's
// block of trees (compiled_group::step).
struct compiled_task {
  task t;
  const std::string* node = nullptr;  // its compiled_node's name
  const std::string* name = nullptr;  // t.name(), fixed when `t` joined its group
  bool is_private = true;
};

struct compiled_node {
  std::string name;
  std::shared_ptr<const detail::compiled_step> init;  // null when there is no local init
  std::shared_ptr<const detail::compiled_step> exit;
  std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports;
  std::vector<std::size_t> tasks;  // indexes into compiled_group::tasks
};

struct compiled_group {
  std::shared_ptr<detail::compiled_step[]> steps;  // aligned with tasks
  std::vector<compiled_task> tasks;
  std::vector<compiled_node> nodes;

  // Task k's step tree.
  [[nodiscard]] const detail::compiled_step& step(std::size_t k) const noexcept {
    return detail::compiled_at(steps.get(), k);
  }
};

result<std::shared_ptr<const detail::compiled_step>> compile_setup(const std::string& name,
                                                                   const std::vector<body>& bodies) {
  execution_step s(name);
  for (const auto& b : bodies) append_body(s, b);
  if (s.empty() && s.validate()) return std::shared_ptr<const detail::compiled_step>();
  return detail::compile_step(s);
}

result<std::shared_ptr<const compiled_group>> compile_group(const task_group& g) {
  g.mark_used();
  auto out = std::make_shared<compiled_group>();
  std::map<std::string, std::size_t> node_index;
  // The index of node `name` in out->nodes, added at its first use.
  auto index_of = [&](const std::string& name) -> std::size_t {
    auto [it, added] = node_index.try_emplace(name, out->nodes.size());
    if (added) out->nodes.push_back(compiled_node{name, nullptr, nullptr, {}, {}});
    return it->second;
  };
  // Exact sizes: the group is kept for its later runs, and an array grown
  // by doubling would leave its smaller copies behind at the peak.
  out->tasks.reserve(g.tasks().size());
  out->steps = detail::make_compiled_steps(g.tasks().size());
  std::vector<std::size_t> node_of_task;
  node_of_task.reserve(g.tasks().size());
  for (const auto& t : g.tasks()) {
    TASKGROUP_TRY(auto composed, t.get_step());
    const execution_step* counted = t.user_step() ? &*t.user_step() : nullptr;
    detail::compiled_step& compiled = detail::compiled_at(out->steps.get(), out->tasks.size());
    TASKGROUP_TRY(detail::compile_into(compiled, composed, counted));
    const bool priv = t.type().value_or(workspace_type::private_) == workspace_type::private_;
    node_of_task.push_back(index_of(t.node_name()));
    out->tasks.push_back(compiled_task{t, nullptr, &detail::task_full_name(*t.state()), priv});
  }
  // Every node is known now: its name stays where it is.
  for (std::size_t k = 0; k < node_of_task.size(); ++k) out->tasks[k].node = &out->nodes[node_of_task[k]].name;
  std::vector<std::size_t> per_node(out->nodes.size(), 0);
  for (std::size_t i : node_of_task) ++per_node[i];
  for (std::size_t i = 0; i < out->nodes.size(); ++i) out->nodes[i].tasks.reserve(per_node[i]);
  for (std::size_t k = 0; k < node_of_task.size(); ++k) out->nodes[node_of_task[k]].tasks.push_back(k);
  for (const auto& r : g.report_steps()) {
    if (!node_index.count(r.node)) {
      return fail(errc::invalid_task,
                  "report step " + quote(r.step.name()) + " on node " + quote(r.node) + ", which has no task");
    }
    if (auto f = detail::duration_fault(r.interval.count()); !f.empty()) {
      return fail(errc::invalid_task,
                  "report step " + quote(r.step.name()) + " on node " + quote(r.node) + ": interval " + f);
    }
    out->nodes[index_of(r.node)].reports.emplace_back(r.step, r.interval);
  }
  for (const auto& [node_name, obj] : g.local_setups()) {
    if (!node_index.count(node_name)) {
      return fail(errc::invalid_task, "local setup on node " + quote(node_name) + ", which has no task");
    }
  }
  for (auto& n : out->nodes) {
    auto [inits, exits] = g.local_work(n.name);
    for (std::size_t k : n.tasks) {
      for (auto& [i, e] : out->tasks[k].t.local_work()) {
        inits.push_back(i);
        exits.push_back(e);
      }
    }
    TASKGROUP_TRY(n.init, compile_setup(n.name + ":init", inits));
    TASKGROUP_TRY(n.exit, compile_setup(n.name + ":exit", exits));
  }
  return std::shared_ptr<const compiled_group>(std::move(out));
}

// Forwards a step runner's events to the run observer with task context.
class task_events final : public step_observer {
 public:
  task_events(run_observer* o, std::string task, std::string node)
      : o_(o), task_(std::move(task)), node_(std::move(node)) {}
  void step_begin(std::string_view step) override { o_->step_begin(task_, node_, step); }
  void step_end(std::string_view step, std::uint64_t iterations, const status& r) override {
    o_->step_end(task_, node_, step, iterations, r);
  }
  void net_begin(std::string_view n) override { o_->net_begin(task_, node_, n); }
  void net_end(std::string_view n, const status& r) override { o_->net_end(task_, node_, n, r); }
  void report_begin(std::string_view step) override { o_->report_begin(task_, node_, step); }
  void report_end(std::string_view step, const status& r) override { o_->report_end(task_, node_, step, r); }

 private:
  run_observer* o_;
  std::string task_;
  std::string node_;
};

error task_error(const compiled_task& ct, const error& e) {
  return {e.code, "task " + quote(*ct.name) + " (node " + quote(*ct.node) + "): " + e.message};
}

// A task's report while the run is in flight: a fifth of a task_report's
// size (every waiting task holds one), made into the report at the end.
// Its outputs, fetched once its node's tasks have all ended, are kept by
// the node (run_state::outputs).
struct task_record {
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  std::uint64_t iterations = 0;
  std::unique_ptr<error> failure;  // when failed or cancelled
  task_status status = task_status::not_run;
};

using fetched_outputs = std::vector<std::pair<std::string, std::shared_ptr<const blob>>>;

// The report of task `ct` from its record.
task_report report_of(const compiled_task& ct, const task_record& r, fetched_outputs outputs) {
  task_report out;
  out.name = *ct.name;
  out.node = *ct.node;
  out.status = r.status;
  if (r.failure) out.failure = *r.failure;
  out.started = r.started;
  out.finished = r.finished;
  out.iterations = r.iterations;
  out.outputs = std::move(outputs);
  return out;
}

// The state of one run, shared by the coroutines of every node.
struct run_state {
  std::shared_ptr<const compiled_group> group;
  run_options options;
  const operator_registry* registry = nullptr;
  std::vector<task_record> records;  // aligned with group->tasks
  std::vector<node_state*> nodes;    // aligned with group->nodes
  // Aligned with group->nodes, each (touched by its node's strand only)
  // with its tasks' outputs in the order of compiled_node::tasks; empty
  // while none is fetched.
  std::vector<std::vector<fetched_outputs>> outputs;
};

}  // namespace

struct local_session::impl {
  explicit impl(asio::any_io_executor e) : ex(std::move(e)), coord(asio::make_strand(ex)) {}
  explicit impl(std::size_t threads)
      : pool(std::in_place, std::max<std::size_t>(threads, 1)),
        ex(pool->get_executor()),
        coord(asio::make_strand(ex)) {}

  std::optional<asio::thread_pool> pool;
  asio::any_io_executor ex;
  strand_t coord;

  mutable std::mutex mutex;  // guards what follows
  bool closed = false;
  const operator_registry* registry = nullptr;
  std::vector<std::unique_ptr<node_state>> nodes;
  struct cached {
    std::weak_ptr<task_group::data> token;
    std::shared_ptr<const compiled_group> compiled;
    std::uint64_t checked = 0;  // detail::task_misuse_epoch() when its tasks were last checked
  };
  std::map<const void*, cached> compiled;

  node_state& node(const std::string& name) {
    for (auto& n : nodes) {
      if (n->name == name) return *n;
    }
    nodes.push_back(std::make_unique<node_state>(node_state{name, asio::make_strand(ex), workspace::make(name)}));
    return *nodes.back();
  }

  result<std::shared_ptr<const compiled_group>> compile(const task_group& g) {
    std::lock_guard lock(mutex);
    if (closed) return fail(errc::session_closed, "Session is closed.");
    // Read before the check: a misuse recorded meanwhile makes the next
    // run check again.
    const std::uint64_t epoch = detail::task_misuse_epoch();
    auto it = compiled.find(g.state().get());
    if (it != compiled.end() && !it->second.token.expired()) {
      // A used task may still record a misuse (a later builder call),
      // which fails every later run of its group. Checking 100,000 tasks
      // on every run would touch each one's state; the epoch says when
      // some task anywhere has recorded one since the last check.
      if (it->second.checked != epoch) {
        for (const auto& t : g.tasks()) {
          if (auto st = t.validate(); !st) return st.error().with_context("task group");
        }
        it->second.checked = epoch;
      }
      return it->second.compiled;
    }
    std::erase_if(compiled, [](const auto& kv) { return kv.second.token.expired(); });
    TASKGROUP_TRY(auto c, compile_group(g));  // checks every task
    compiled[g.state().get()] = cached{g.state(), c, epoch};
    return c;
  }
};

local_session::local_session(asio::any_io_executor ex) : impl_(std::make_shared<impl>(std::move(ex))) {}
local_session::local_session(std::size_t threads) : impl_(std::make_shared<impl>(threads)) {}

local_session::~local_session() {
  close();
  if (impl_->pool) impl_->pool->join();
}

void local_session::close() {
  std::lock_guard lock(impl_->mutex);
  impl_->closed = true;
}

bool local_session::closed() const noexcept {
  std::lock_guard lock(impl_->mutex);
  return impl_->closed;
}

asio::any_io_executor local_session::get_executor() const { return impl_->ex; }
strand_t local_session::coordinator(const impl& state) { return state.coord; }

void local_session::set_registry(const operator_registry& registry) {
  std::lock_guard lock(impl_->mutex);
  impl_->registry = &registry;
}

std::shared_ptr<workspace> local_session::node_workspace(const std::string& name) {
  std::lock_guard lock(impl_->mutex);
  return impl_->node(name).ws;
}

strand_t local_session::node_strand(const std::string& name) {
  std::lock_guard lock(impl_->mutex);
  return impl_->node(name).strand;
}

std::vector<std::string> local_session::nodes() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<std::string> out;
  for (const auto& n : impl_->nodes) out.push_back(n->name);
  return out;
}

namespace {

// The workspace a task runs in: the node's, or a child of it for a
// PRIVATE task (destroyed when the task ends).
std::shared_ptr<workspace> task_workspace(const compiled_task& ct, node_state* n) {
  if (ct.is_private) return n->ws->create_child(*ct.name);
  return n->ws;
}

// Fills a task's report from its end (at `finished`).
status end_task(run_state& rs, std::size_t k, const status& st, const step_stats& stats,
                std::chrono::system_clock::time_point finished = std::chrono::system_clock::now()) {
  const compiled_task& ct = rs.group->tasks[k];
  task_record& rec = rs.records[k];
  rec.finished = finished;
  rec.iterations = stats.iterations;
  if (st) {
    rec.status = task_status::succeeded;
    return ok();
  }
  rec.status = st.error().is_cancelled() ? task_status::cancelled : task_status::failed;
  rec.failure = std::make_unique<error>(task_error(ct, st.error()));
  return *rec.failure;
}

// A task that never started because the run was cancelled (or another
// task failed) first: reported as a task cancelled at its first step.
void cancel_unstarted(run_state& rs, std::size_t k) {
  rs.records[k].started = std::chrono::system_clock::now();
  (void)end_task(rs, k, error(errc::cancelled, std::string(detail::root_name(rs.group->step(k))) + ": cancelled"), {});
}

// The tasks of one node run without coroutine frames
// (detail::frame_free_run): those whose tree allows it, observed or not.
// Each runs on the node's strand until its end or its first
// wait; a waiting task then costs its run, its workspace and its pending
// operation only. The batch ends each task's report, keeps the first
// failure and, under fail_fast, stops the others at once. It lives until
// its holder (run_tasks) has let go and no run waits: a waiting run's
// operation may be the last thing alive when an abandoned io_context is
// destroyed.
class node_batch final : public detail::task_host {
 public:
  using handler_type = asio::async_result<asio::use_awaitable_t<>, void(status)>::handler_type;

  // The holder's reference.
  class handle {
   public:
    explicit handle(node_batch* b = nullptr) noexcept : b_(b) {}
    handle(handle&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    handle& operator=(handle&&) = delete;
    ~handle() {
      if (b_ != nullptr) b_->let_go();
    }
    node_batch* operator->() const noexcept { return b_; }

   private:
    friend class node_batch;
    node_batch* b_;
  };

  // `tasks`: how many tasks the node may start here.
  static handle make(std::shared_ptr<run_state> rs, node_state* n, detail::join_mode mode, std::size_t tasks) {
    return handle(new node_batch(std::move(rs), n, mode, tasks));
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
    ws = task_workspace(ct, n_);
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
        waiting_.push_back(std::move(spare_));  // within the capacity reserved above
        return true;
      case detail::frame_free_run::outcome::ended: break;
    }
    ws.reset();  // a PRIVATE task's workspace ends with the task
    // One clock reading per task: its end is the next one's start.
    now = std::chrono::system_clock::now();
    ended(k, *spare_, now);
    return true;
  }

  // Asks every waiting run to stop (they end cancelled); no run starts.
  void stop() noexcept {
    stopping_ = true;
    for (std::size_t i = 0; i < waiting_.size(); ++i) waiting_[i]->cancel();
  }

  [[nodiscard]] bool idle() const noexcept { return waiting_.empty(); }
  [[nodiscard]] const std::optional<error>& first() const noexcept { return first_; }

  // Completes once no run waits (await only when some run does), with the
  // first failure of the batch's tasks (or errc::cancelled when cancelled
  // with none). Cancelling it stops the runs. Meanwhile the runs hold the
  // batch: `h` is empty until the completion hands it back.
  static asio::awaitable<status> wait(handle& h) {
    return asio::async_initiate<const asio::use_awaitable_t<>, void(status)>(
        [&h](handler_type handler) {
          node_batch* self = std::exchange(h.b_, nullptr);
          self->held_ = false;
          self->owner_ = &h;
          self->waiter_.emplace(std::move(handler));
          self->slot_ = asio::get_associated_cancellation_slot(*self->waiter_);
          if (self->slot_.is_connected()) {
            // A plain pointer: the batch outlives the slot's use (cleared on
            // completion; abandoning the run destroys both).
            self->slot_.assign([self](asio::cancellation_type_t) {
              self->cancelled_ = true;
              self->stop();
            });
          }
        },
        asio::use_awaitable);
  }

 private:
  node_batch(std::shared_ptr<run_state> rs, node_state* n, detail::join_mode mode, std::size_t tasks)
      // The node's strand: where runs complete.
      : task_host(rs->registry != nullptr ? *rs->registry : operator_registry::global(), n->strand),
        rs_(std::move(rs)),
        n_(n),
        mode_(mode),
        tasks_(tasks) {}

  // Ends task k's report with the run's status.
  void ended(std::size_t k, const detail::frame_free_run& r, std::chrono::system_clock::time_point at) {
    const status st = r.result();
    (void)end_task(*rs_, k, st, r.stats(), at);
    if (run_observer* o = rs_->options.observer; o != nullptr)
      o->task_end(report_of(rs_->group->tasks[k], rs_->records[k], {}));
    if (st) return;
    // After a stop, the cancelled ends it caused are not failures.
    if (first_ || (stopping_ && st.error().is_cancelled())) return;
    first_ = *rs_->records[k].failure;
    if (mode_ == detail::join_mode::fail_fast) stop();
  }

  void run_ended(detail::frame_free_run& r) noexcept override {
    ended(r.task, r, std::chrono::system_clock::now());
    std::unique_ptr<detail::frame_free_run> done = remove(r);
    if (!spare_) spare_ = std::move(done);
    if (!waiting_.empty()) return;
    if (waiter_) {
      complete();
    } else if (!held_) {
      delete this;
    }
  }

  void run_begins(detail::frame_free_run& r) noexcept override {
    if (run_observer* o = rs_->options.observer; o != nullptr) {
      const compiled_task& ct = rs_->group->tasks[r.task];
      o->task_begin(*ct.name, *ct.node);
    }
  }

  void run_abandoned(detail::frame_free_run& r) noexcept override {
    remove(r);
    // Gone with the last run, and with it a waiting coroutine (whose
    // handle is empty).
    if (waiting_.empty() && !held_) delete this;
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

  void complete() {
    if (slot_.is_connected()) slot_.clear();
    status result = ok();
    if (first_) {
      result = *first_;
    } else if (cancelled_) {
      result = fail(errc::cancelled, "cancelled");
    }
    owner_->b_ = this;  // the holder's reference again
    owner_ = nullptr;
    held_ = true;
    handler_type h = std::move(*waiter_);
    waiter_.reset();
    std::move(h)(std::move(result));
  }

  // The holder lets go: the batch ends with its last waiting run.
  void let_go() noexcept {
    held_ = false;
    if (waiting_.empty()) delete this;
  }

  std::shared_ptr<run_state> rs_;
  node_state* n_;
  detail::join_mode mode_;
  std::size_t tasks_;
  std::vector<std::unique_ptr<detail::frame_free_run>> waiting_;
  std::unique_ptr<detail::frame_free_run> spare_;
  std::optional<error> first_;
  bool held_ = true;         // a handle refers to the batch
  handle* owner_ = nullptr;  // while waited for: the handle to give it back to
  std::optional<handler_type> waiter_;
  asio::cancellation_slot slot_;
  bool cancelled_ = false;
};

// A task as a coroutine; `ws` is its workspace when already made.
asio::awaitable<status> run_task(std::shared_ptr<run_state> rs, std::size_t k, node_state* n,
                                 std::shared_ptr<workspace> ws) {
  const compiled_task& ct = rs->group->tasks[k];
  rs->records[k].started = std::chrono::system_clock::now();
  if (detail::driver_hooks& hooks = detail::test_driver_hooks(); hooks.counting.load(std::memory_order_relaxed))
    hooks.coroutine_tasks.fetch_add(1, std::memory_order_relaxed);
  if (!ws) ws = task_workspace(ct, n);
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
      std::shared_ptr<const detail::compiled_step>(rs->group, &rs->group->step(k)), std::move(ws), o);
  status result = end_task(*rs, k, st, stats);
  if (observer != nullptr) observer->task_end(report_of(ct, rs->records[k], {}));
  co_return result;
}

// The batch's part in a join beside the coroutine tasks.
asio::awaitable<status> await_batch(node_batch::handle& batch) {
  co_await asio::this_coro::throw_if_cancelled(false);  // the runs must be waited for
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) batch->stop();  // cancelled before it started
  co_return co_await node_batch::wait(batch);
}

// The tasks of one node. Those whose tree allows it run without coroutine
// frames (node_batch), one after another on the node's strand until each
// ends or waits (yielding every `yield_every` tasks, so that other work of
// the strand and cancellation get in); the others are joined as
// coroutines. The join policy is the same for both: under fail_fast the
// first failure cancels every task not yet ended.
asio::awaitable<status> run_tasks(std::shared_ptr<run_state> rs, const compiled_node& cn, node_state* n,
                                  detail::join_mode mode) {
  // Cancelled or not, the tasks that wait must be waited for.
  co_await asio::this_coro::throw_if_cancelled(false);
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  constexpr std::size_t yield_every = run_step_options{}.yield_every;
  node_batch::handle batch = node_batch::make(rs, n, mode, cn.tasks.size());
  std::vector<std::pair<std::size_t, std::shared_ptr<workspace>>> rest;
  bool cancelled = false;
  auto halted = [&] { return cancelled || (batch->first() && mode == detail::join_mode::fail_fast); };
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
    batch->stop();
    if (!batch->idle()) (void)co_await node_batch::wait(batch);
    if (batch->first()) co_return *batch->first();
    co_return error(errc::cancelled, "cancelled");
  }
  status joined = ok();
  if (rest.empty()) {
    if (!batch->idle()) joined = co_await node_batch::wait(batch);
  } else {
    const std::size_t children = rest.size() + (batch->idle() ? 0 : 1);
    joined = co_await detail::join(
        n->strand, children,
        [&](std::size_t j) {
          if (j == rest.size()) return await_batch(batch);
          return run_task(rs, rest[j].first, n, std::move(rest[j].second));
        },
        mode);
  }
  if (batch->first()) co_return *batch->first();
  co_return joined;
}

// Copies the declared outputs of a node's tasks out of its workspace; a
// borrowed output (output_state::borrow) is the workspace's blob itself
// when no exit work of the node runs after this.
void fetch_outputs(run_state& rs, std::size_t i, node_state& n) {
  const compiled_node& cn = rs.group->nodes[i];
  std::vector<fetched_outputs>& fetched = rs.outputs[i];
  for (std::size_t j = 0; j < cn.tasks.size(); ++j) {
    const std::size_t k = cn.tasks[j];
    const compiled_task& ct = rs.group->tasks[k];
    task_record& rec = rs.records[k];
    bool borrow = false;
    auto value_of = [&](const std::string& name) -> result<std::shared_ptr<const blob>> {
      blob* b = n.ws->find(name);
      if (b == nullptr || !b->has_value()) {
        return fail(errc::output_not_set, "blob " + quote(name) + " has no value in node " + quote(n.name));
      }
      std::shared_ptr<const blob> value;
      if (borrow) {
        value = std::shared_ptr<const blob>(n.ws, b);  // keeps the workspace alive
      } else {
        TASKGROUP_TRY(auto copy, b->clone());
        value = std::make_shared<const blob>(std::move(copy));
      }
      if (fetched.empty()) fetched.resize(cn.tasks.size());
      fetched[j].emplace_back(name, value);
      return value;
    };
    for (const auto& out : ct.t.output_states()) {
      borrow = out->borrow && !cn.exit;
      detail::set_output(*out, rec.status == task_status::succeeded, value_of);
    }
  }
}

// One node: local init, tasks with report steps, local exit, outputs.
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
  // Every declared output lives in the node workspace, made before any task
  // starts, so private tasks write through to it and it survives them.
  for (std::size_t k : cn.tasks) {
    for (const auto& out : rs->group->tasks[k].t.output_states()) {
      for (const auto& name : out->blobs) n->ws->create(name);
    }
  }
  if (cn.init) {
    if (status st = co_await detail::run_compiled(cn.init, n->ws, o); !st) co_return node_error(st.error());
  }
  const auto mode = rs->options.policy == run_policy::gather ? detail::join_mode::gather : detail::join_mode::fail_fast;
  auto tasks = [rs, &cn, n, mode]() { return run_tasks(rs, cn, n, mode); };
  status st = co_await detail::run_with_reporters(tasks, cn.reports, n->ws, o, cn.name);
  fetch_outputs(*rs, i, *n);
  if (!st) co_return st;
  if (cn.exit) {
    if (status ex = co_await detail::run_compiled(cn.exit, n->ws, o); !ex) co_return node_error(ex.error());
  }
  co_return ok();
}

// The indexes of the nodes that run: every node, or those of
// `options.only_nodes`.
result<std::vector<std::size_t>> active_nodes(const compiled_group& g, const run_options& options) {
  std::vector<std::size_t> out;
  if (!options.only_nodes) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) out.push_back(i);
    return out;
  }
  for (const auto& name : *options.only_nodes) {
    if (std::none_of(g.nodes.begin(), g.nodes.end(), [&](const compiled_node& n) { return n.name == name; })) {
      return fail(errc::invalid_task, "run_options::only_nodes names node " + quote(name) + ", which has no task");
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& list = *options.only_nodes;
    if (std::find(list.begin(), list.end(), g.nodes[i].name) != list.end()) out.push_back(i);
  }
  return out;
}

// Strict codecs, at the end of a run: every fetched output goes through
// its codec, as it would travel to another process; a failure fails the
// task. Returns the first such failure in task order.
status round_trip_outputs(run_state& rs, const std::vector<std::size_t>& active, const codec_registry& codecs) {
  status first = ok();
  for (std::size_t i : active) {
    const compiled_node& cn = rs.group->nodes[i];
    std::vector<fetched_outputs>& fetched = rs.outputs[i];
    for (std::size_t j = 0; j < cn.tasks.size(); ++j) {
      const compiled_task& ct = rs.group->tasks[cn.tasks[j]];
      task_record& rec = rs.records[cn.tasks[j]];
      if (rec.status != task_status::succeeded || fetched.empty()) continue;
      std::optional<error> failure;
      // fetch_outputs shares each value between the report and the output
      // handle: swap both for the decoded copy.
      std::map<const blob*, std::shared_ptr<const blob>> decoded;
      for (auto& [name, value] : fetched[j]) {
        auto copy = codecs.round_trip(*value);
        if (!copy) {
          failure = task_error(ct, copy.error().with_context("output " + quote(name)));
          break;
        }
        auto fresh = std::make_shared<const blob>(std::move(copy).value());
        decoded[value.get()] = fresh;
        value = std::move(fresh);
      }
      for (const auto& out : ct.t.output_states()) {
        if (failure) {
          out->set = false;
          out->values.clear();
          out->failure = failure;
          continue;
        }
        for (auto& v : out->values) {
          if (auto it = decoded.find(v.get()); it != decoded.end()) v = it->second;
        }
      }
      if (failure) {
        rec.status = task_status::failed;
        rec.failure = std::make_unique<error>(*failure);
        fetched[j].clear();
        if (first) first = *failure;
      }
    }
  }
  return first;
}

asio::awaitable<status> deadline(std::chrono::milliseconds limit, bool& expired) {
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return fail(errc::cancelled, "cancelled");
  expired = true;
  co_return fail(errc::timeout, "run timed out after " + std::to_string(limit.count()) + " ms");
}

}  // namespace

// Runs on the coordinator strand: every join state lives there. Holds the
// session's state, which the session may have dropped meanwhile (a closed
// session fails the run in compile()).
asio::awaitable<result<run_report>> local_session::run_here(std::shared_ptr<impl> state, task_group group,
                                                            run_options options) {
  // Only the upper bound: a deadline of 0 (or less) expires at once.
  if (options.timeout && *options.timeout > max_duration) {
    co_return fail(errc::invalid_task, "run_options::timeout " + detail::duration_fault(options.timeout->count()));
  }
  TASKGROUP_CO_TRY(auto compiled, state->compile(group));
  TASKGROUP_CO_TRY(auto active, active_nodes(*compiled, options));
  if (options.strict_codecs != nullptr) {
    TASKGROUP_CO_TRY(check_output_codecs(group, *options.strict_codecs));
  }
  auto rs = std::make_shared<run_state>();
  rs->group = compiled;
  rs->options = options;
  rs->nodes.resize(compiled->nodes.size(), nullptr);
  {
    std::lock_guard lock(state->mutex);
    rs->registry = state->registry;
    for (std::size_t i : active) rs->nodes[i] = &state->node(compiled->nodes[i].name);
  }
  rs->records.resize(compiled->tasks.size());
  rs->outputs.resize(compiled->nodes.size());
  run_report report;
  report.started = std::chrono::system_clock::now();
  if (options.observer != nullptr) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& ct : compiled->tasks) names.emplace_back(*ct.name, *ct.node);
    options.observer->run_begin(names);
  }

  auto coord = state->coord;
  const auto mode = options.policy == run_policy::gather ? detail::join_mode::gather : detail::join_mode::fail_fast;
  auto all_nodes = [rs, coord, mode, &active]() -> asio::awaitable<status> {
    co_return co_await detail::join(
        coord, active.size(), [&](std::size_t j) { return run_node(rs, active[j]); },
        [&](std::size_t j) { return asio::any_io_executor(rs->nodes[active[j]]->strand); }, mode);
  };
  status st = ok();
  bool expired = false;
  try {
    if (options.timeout) {
      const auto limit = *options.timeout;
      st = co_await detail::join(
          coord, 2, [&](std::size_t i) { return i == 0 ? all_nodes() : deadline(limit, expired); },
          detail::join_mode::race);
    } else {
      st = co_await all_nodes();
    }
  } catch (...) {
    st = detail::error_from_exception(std::current_exception());
  }
  if (options.strict_codecs != nullptr) {
    if (status sc = round_trip_outputs(*rs, active, *options.strict_codecs); !sc && st) st = sc;
  }
  report.finished = std::chrono::system_clock::now();
  report.tasks.resize(rs->records.size());
  for (std::size_t i = 0; i < compiled->nodes.size(); ++i) {
    const auto& tasks = compiled->nodes[i].tasks;
    std::vector<fetched_outputs>& fetched = rs->outputs[i];
    for (std::size_t j = 0; j < tasks.size(); ++j) {
      const std::size_t k = tasks[j];
      report.tasks[k] =
          report_of(compiled->tasks[k], rs->records[k], fetched.empty() ? fetched_outputs() : std::move(fetched[j]));
    }
  }
  // The run's own ends (deadline, cancellation from outside) are errors
  // under every policy; a task's failure (even its own step timeout) is the
  // run's error under join only.
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  if (expired) co_return st.error();
  if (cs.cancelled() != asio::cancellation_type::none) co_return error(errc::cancelled, "run cancelled");
  if (!st && options.policy == run_policy::join) co_return st.error();
  co_return report;
}

asio::awaitable<result<run_report>> local_session::run(task_group group, run_options options) {
  co_return co_await async_run(std::move(group), asio::use_awaitable, options);
}

result<run_report> local_session::run_blocking(task_group group, run_options options) {
  if (impl_->coord.running_in_this_thread()) {
    return fail(errc::invalid_task, "run_blocking called from the session's own coordinator would deadlock");
  }
  std::future<result<run_report>> f =
      asio::co_spawn(impl_->coord, run_here(impl_, std::move(group), options), asio::use_future);
  try {
    return f.get();
  } catch (...) {
    return detail::error_from_exception(std::current_exception());
  }
}

status check_output_codecs(const task_group& group, const codec_registry& codecs) {
  for (const auto& t : group.tasks()) {
    for (const auto& out : t.output_states()) {
      if (out->type != nullptr && !codecs.find(*out->type)) {
        return fail(errc::not_serializable, "task " + quote(t.name()) + " output " + quote(out->blobs.front()) +
                                                ": no codec for type " + detail::demangle(out->type->name()) +
                                                " (register one with codec_registry::add)");
      }
    }
  }
  return ok();
}

asio::awaitable<result<run_report>> task_group::run(run_options options) {
  local_session session(co_await asio::this_coro::executor);
  co_return co_await session.run(*this, options);
}

detail::driver_hooks& detail::test_driver_hooks() noexcept {
  static driver_hooks hooks;
  return hooks;
}

}  // namespace taskgroup
