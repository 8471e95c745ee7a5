#include <taskgroup/step_runner.hpp>

#include "detail/join.hpp"
#include "detail/runner.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// GCC 12 flags coroutine frames of this file with a false
// -Wmismatched-new-delete once `iterate` awaits a net directly: Asio's frame
// operator new (through its recycling allocator) and its matching delete.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace taskgroup {

namespace asio = boost::asio;

error detail::error_from_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const system_error& ex) {
    return ex.error();
  } catch (const boost::system::system_error& ex) {
    if (ex.code() == asio::error::operation_aborted) return {errc::cancelled, "cancelled"};
    return {ex.code(), ex.what()};
  } catch (const std::exception& ex) {
    return {errc::op_failed, ex.what()};
  } catch (...) {
    return {errc::op_failed, "unknown exception"};
  }
}

namespace {

// A step tree snapshot: what a run executes, immune to later edits. A
// group keeps one per task while it is cached, so the fields most steps
// leave unset live apart, made only for a step that sets one.
struct node {
  struct rare {
    std::optional<std::string> stop;
    std::optional<std::chrono::milliseconds> timeout;
    std::chrono::milliseconds every{0};
    std::vector<std::size_t> reports;    // children with run_every
    std::vector<std::size_t> recurring;  // when there are reports: the other children
    std::int64_t instances = 1;
  };

  std::string name;
  // Inline room for a step of one net (a task's, typically).
  boost::container::small_vector<net, 1> nets;
  std::vector<node> children;
  std::int64_t num_iter = 1;
  // Net runs and child executions of one execution when the subtree can
  // run to its end without suspending (bounded iterations; no deadline,
  // report step, concurrency or nested own workspace); 0 when it cannot.
  std::uint32_t inline_cost = 0;
  std::unique_ptr<rare> more;  // null: every field of `rare` at its default
  bool only_once = false;
  bool concurrent = false;
  bool create_ws = false;
  bool counted = false;  // its iterations go to step_stats::iterations

  [[nodiscard]] const std::optional<std::string>& stop() const noexcept { return more ? more->stop : none().stop; }
  [[nodiscard]] const std::optional<std::chrono::milliseconds>& timeout() const noexcept {
    return more ? more->timeout : none().timeout;
  }
  [[nodiscard]] std::chrono::milliseconds every() const noexcept { return more ? more->every : none().every; }
  [[nodiscard]] const std::vector<std::size_t>& reports() const noexcept {
    return more ? more->reports : none().reports;
  }
  [[nodiscard]] std::int64_t instances() const noexcept { return more ? more->instances : 1; }
  // The children run in each iteration (those without run_every), by
  // position: every child unless some are report steps.
  [[nodiscard]] std::size_t recurring_size() const noexcept {
    return more && !more->reports.empty() ? more->recurring.size() : children.size();
  }
  [[nodiscard]] std::size_t recurring_at(std::size_t j) const noexcept {
    return more && !more->reports.empty() ? more->recurring[j] : j;
  }
  rare& rare_fields() {
    if (!more) more = std::make_unique<rare>();
    return *more;
  }

 private:
  static const rare& none() noexcept {
    static const rare r;
    return r;
  }
};

// See node::inline_cost; saturates at 2^32 - 1 (far above any accepted
// cost, run_step_options::yield_every) instead of overflowing.
std::uint32_t inline_cost(const node& n, bool root) {
  if (n.timeout() || !n.reports().empty() || n.instances() != 1 || (n.concurrent && n.recurring_size() >= 2)) return 0;
  if (n.create_ws && !root) return 0;
  if (n.stop() && !n.only_once) return 0;
  const std::uint64_t iterations = n.stop() ? 1 : static_cast<std::uint64_t>(std::max<std::int64_t>(n.num_iter, 0));
  std::uint64_t body = n.nets.size();
  for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
    const std::size_t idx = n.recurring_at(j);
    const std::uint64_t c = n.children[idx].inline_cost;
    if (c == 0) return 0;
    body += c;
  }
  constexpr std::uint64_t cap = std::numeric_limits<std::uint32_t>::max();
  body = std::min(std::max<std::uint64_t>(body, 1), cap);
  return static_cast<std::uint32_t>(std::min(iterations * body, cap));
}

node compile(const execution_step& s, const execution_step* counted) {
  node n;
  n.counted = counted != nullptr && counted->same(s);
  n.name = s.name();
  const auto& nets = s.nets();
  n.nets.assign(nets.begin(), nets.end());
  // Made now, once: every instance bound in a run shares it.
  for (const auto& nt : n.nets) (void)nt.freeze();
  n.num_iter = s.num_iter().value_or(1);
  if (auto stop = s.stop_blob()) n.rare_fields().stop = std::move(stop);
  n.only_once = s.is_only_once();
  n.concurrent = s.has_concurrent_substeps();
  n.create_ws = s.creates_workspace();
  if (s.num_concurrent_instances() != 1) n.rare_fields().instances = s.num_concurrent_instances();
  if (auto every = s.report_interval()) n.rare_fields().every = *every;
  if (auto timeout = s.deadline()) n.rare_fields().timeout = timeout;
  n.children.reserve(s.substeps().size());
  for (const auto& child : s.substeps()) {
    if (child.report_interval()) n.rare_fields().reports.push_back(n.children.size());
    n.children.push_back(compile(child, counted));
  }
  if (!n.reports().empty()) {
    node::rare& r = n.rare_fields();
    for (std::size_t i = 0, next = 0; i < n.children.size(); ++i) {
      if (next < r.reports.size() && r.reports[next] == i) {
        ++next;
      } else {
        r.recurring.push_back(i);
      }
    }
  }
  n.inline_cost = inline_cost(n, false);
  return n;
}

// Nets and stop blob of a subtree, bound in one workspace.
struct bound {
  // Inline room for the common step of one net: binding a task's step
  // allocates nothing here (a waiting task holds one).
  boost::container::small_vector<net_instance*, 1> nets;
  blob* stop = nullptr;
  std::vector<bound> children;  // empty entries for children with their own workspace
};

// The step path, kept on the coroutine frames and rendered only on error.
struct path_t {
  const path_t* parent;
  std::string_view name;
  std::int64_t instance = -1;  // >= 0: an "instance k" component before the name
};

void render(const path_t* p, std::string& out) {
  if (p == nullptr) return;
  render(p->parent, out);
  if (p->instance >= 0) {
    if (!out.empty()) out += '/';
    out += "instance " + std::to_string(p->instance);
  }
  if (p->name.empty()) return;
  if (!out.empty()) out += '/';
  out += p->name;
}

std::string render(const path_t* p) {
  std::string out;
  render(p, out);
  return out;
}

error at(const path_t* p, const error& e) { return {e.code, render(p) + "/" + e.message}; }
error at(const path_t* p, errc code, const std::string& what) { return {code, render(p) + ": " + what}; }

status cancelled_at(const path_t* p) { return at(p, errc::cancelled, "cancelled"); }

// Shared by the body of a step and its report substeps.
struct report_control {
  bool done = false;
  std::vector<asio::steady_timer*> sleepers;
  void finish() {
    done = true;
    for (auto* t : sleepers) t->cancel();
  }
};

// The join of the iterations of one concurrent step: each iteration spawns
// the children with co_spawn and completes once all of them have, with the
// first failure (fail-fast, as detail::join: the first failing child cancels
// the others at once; cancelling the parent cancels every child). One
// barrier serves every iteration of an execution, so its bookkeeping and
// the children's cancellation signals (with their handler memory) are made
// once, not per iteration. While an iteration runs the barrier is owned by
// the children's completion handlers only, and it owns the parent's handler
// (as detail::join's state): a run abandoned with its io_context frees it
// all. Completion hands the ownership back to the parent's frame.
class barrier : public std::enable_shared_from_this<barrier> {
 public:
  using handler_type = asio::async_result<asio::use_awaitable_t<>, void(status)>::handler_type;

  explicit barrier(std::size_t n) : n_(n), signals_(2 * n), state_(n, not_started) {}

  // One iteration: child k is `make(k)`, spawned on `ex`. `owner` holds the
  // barrier and is left empty until the iteration completes.
  template <class Make>
  static asio::awaitable<status> iteration(std::shared_ptr<barrier>& owner, const asio::any_io_executor& ex,
                                           Make make) {
    return asio::async_initiate<const asio::use_awaitable_t<>, void(status)>(
        [&owner, &ex, make](handler_type handler) mutable {
          std::shared_ptr<barrier> self = std::move(owner);
          self->start(owner, std::move(handler));
          asio::cancellation_signal* signals = self->signals();
          for (std::size_t k = 0; k < self->n_; ++k) {
            self->state_[k] = running;
            asio::co_spawn(ex, make(k), asio::bind_cancellation_slot(signals[k].slot(), ticket{self, k}));
          }
        },
        asio::use_awaitable);
  }

 private:
  // A child's completion handler.
  struct ticket {
    std::shared_ptr<barrier> b;
    std::size_t k;
    void operator()(std::exception_ptr e, status st) { b->child_done(k, e, std::move(st)); }
  };

  enum : char { not_started, running, finished };

  // The cancellation signals of the running iteration. They alternate
  // between two sets: the last child of the previous iteration may still be
  // unwinding inside its own completion when the next iteration starts.
  asio::cancellation_signal* signals() { return &signals_[odd_ ? n_ : 0]; }

  void start(std::shared_ptr<barrier>& owner, handler_type handler) {
    odd_ = !odd_;
    owner_ = &owner;
    handler_.emplace(std::move(handler));
    remaining_ = n_;
    std::fill(state_.begin(), state_.end(), not_started);
    first_.reset();
    cancel_sent_ = false;
    cancelled_from_outside_ = false;
    parent_slot_ = asio::get_associated_cancellation_slot(*handler_);
    if (parent_slot_.is_connected()) {
      // A plain pointer: the barrier outlives the slot's use (the slot is
      // cleared on completion; abandoning the run destroys both).
      parent_slot_.assign([this](asio::cancellation_type_t) {
        cancelled_from_outside_ = true;
        cancel_all();
      });
    }
  }

  void child_done(std::size_t k, std::exception_ptr e, status st) {
    state_[k] = finished;
    if (e) st = detail::error_from_exception(e);
    if (!st && !first_ && !(cancel_sent_ && st.error().is_cancelled())) {
      first_ = st.error();
      cancel_all();
    }
    if (--remaining_ == 0) complete();
  }

  void cancel_all() {
    cancel_sent_ = true;
    // Only running children: a finished child's coroutine state is gone,
    // and a signal not yet handed to this iteration's child still holds a
    // handler of an earlier one.
    asio::cancellation_signal* sig = signals();
    for (std::size_t k = 0; k < n_; ++k) {
      if (state_[k] == running) sig[k].emit(asio::cancellation_type::terminal);
    }
  }

  void complete() {
    if (parent_slot_.is_connected()) parent_slot_.clear();
    status result = ok();
    if (first_) result = std::move(*first_);
    if (result && cancelled_from_outside_) result = fail(errc::cancelled, "cancelled");
    *owner_ = shared_from_this();
    handler_type h = std::move(*handler_);
    handler_.reset();
    std::move(h)(std::move(result));  // may start the next iteration
  }

  std::size_t n_;
  std::vector<asio::cancellation_signal> signals_;
  std::vector<char> state_;
  bool odd_ = true;
  std::size_t remaining_ = 0;
  std::shared_ptr<barrier>* owner_ = nullptr;
  std::optional<handler_type> handler_;
  asio::cancellation_slot parent_slot_;
  std::optional<error> first_;
  bool cancel_sent_ = false;
  bool cancelled_from_outside_ = false;
};

struct runner {  // internal: every member is used by the entry points below
  runner(asio::any_io_executor ex, const operator_registry& registry, const run_step_options& options)
      : ex_(std::move(ex)),
        registry_(registry),
        stats_(options.stats),
        observer_(options.observer),
        yield_every_(std::max<std::uint32_t>(1, options.yield_every)) {}

  // Binds `n` and, down to any create_workspace boundary, its subtree.
  status bind(const node& n, workspace& ws, bound& b, const path_t* path) {
    b.nets.clear();
    for (const auto& nt : n.nets) {
      auto inst = ws.instance_of(nt, registry_);
      if (!inst) return at(path, inst.error());
      b.nets.push_back(inst.value());
    }
    b.children.clear();
    b.children.resize(n.children.size());
    for (std::size_t i = 0; i < n.children.size(); ++i) {
      const node& c = n.children[i];
      if (c.create_ws) continue;
      path_t cp{path, c.name};
      if (auto st = bind(c, ws, b.children[i], &cp); !st) return st;
    }
    if (n.stop()) {
      b.stop = ws.find(*n.stop());
      if (b.stop == nullptr) {
        return at(path, errc::blob_not_found, "should_stop_blob: blob " + quote(*n.stop()) + " does not exist");
      }
    }
    return ok();
  }

  // One execution of a step: deadline, workspace, reporters, iterations.
  asio::awaitable<status> exec(const node& n, std::shared_ptr<workspace> ws, const bound* b, const path_t* path) {
    if (observer_ == nullptr) co_return co_await exec_timed(n, std::move(ws), b, path);
    observer_->step_begin(n.name);
    std::uint64_t iterations = 0;
    status st = co_await exec_timed(n, std::move(ws), b, path, &iterations);
    observer_->step_end(n.name, iterations, st);
    co_return st;
  }

  asio::awaitable<status> exec_timed(const node& n, std::shared_ptr<workspace> ws, const bound* b, const path_t* path,
                                     std::uint64_t* iterations = nullptr) {
    if (n.timeout()) {
      const auto limit = *n.timeout();
      co_return co_await guarded(detail::join(
          ex_, 2,
          [&](std::size_t i) -> asio::awaitable<status> {
            if (i == 0) return exec_untimed(n, ws, b, path, iterations);
            return deadline(limit, path);
          },
          detail::join_mode::race));
    }
    co_return co_await exec_untimed(n, std::move(ws), b, path, iterations);
  }

  asio::awaitable<status> deadline(std::chrono::milliseconds limit, const path_t* path) {
    asio::steady_timer timer(ex_, limit);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return cancelled_at(path);
    co_return at(path, errc::timeout, "timed out after " + std::to_string(limit.count()) + " ms");
  }

  asio::awaitable<status> exec_untimed(const node& n, std::shared_ptr<workspace> ws, const bound* b, const path_t* path,
                                       std::uint64_t* iterations) {
    bound local;
    if (n.create_ws) {
      ws = ws->create_child(ws->name() + "/" + n.name);
      if (auto st = bind(n, *ws, local, path); !st) co_return st;
      b = &local;
    }
    if (n.reports().empty()) co_return co_await iterate(n, *ws, *b, path, iterations);
    co_return co_await beside_reports([&]() { return iterate(n, *ws, *b, path, iterations); }, n.reports().size(),
                                      [&](std::size_t i, report_control& ctl) {
                                        return report_loop(n.children[n.reports()[i]], ws, b->children[n.reports()[i]],
                                                           path, ctl);
                                      });
  }

  // Runs `body` beside report steps (already bound in `ws`).
  asio::awaitable<status> with_reporters(std::function<asio::awaitable<status>()> body,
                                         const std::vector<node>& reports, std::vector<bound>& bounds,
                                         std::shared_ptr<workspace> ws, const path_t* path) {
    co_return co_await beside_reports(body, reports.size(), [&](std::size_t i, report_control& ctl) {
      return report_loop(reports[i], ws, bounds[i], path, ctl);
    });
  }

  // A fail-fast join of `body` and `count` report loops; the reporters get
  // their final run once the body has succeeded (on failure the join
  // cancels them instead).
  template <class Body, class Report>
  asio::awaitable<status> beside_reports(Body body, std::size_t count, Report report) {
    report_control ctl;
    co_return co_await guarded(detail::join(
        ex_, 1 + count,
        [&](std::size_t i) -> asio::awaitable<status> {
          if (i == 0) return finish_after(body(), ctl);
          return report(i - 1, ctl);
        },
        detail::join_mode::fail_fast));
  }

  static asio::awaitable<status> finish_after(asio::awaitable<status> body, report_control& ctl) {
    status st = co_await std::move(body);
    if (st) ctl.finish();
    co_return st;
  }

  // A report substep: run after each interval, and once more when the
  // parent's work ends (unless that end arrived during a run).
  asio::awaitable<status> report_loop(const node& r, std::shared_ptr<workspace> ws, const bound& b,
                                      const path_t* parent, report_control& ctl) {
    path_t path{parent, r.name};
    for (;;) {
      if (!ctl.done) {
        asio::steady_timer timer(ex_, r.every());
        ctl.sleepers.push_back(&timer);
        (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        std::erase(ctl.sleepers, &timer);
        asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) co_return cancelled_at(&path);
      }
      // The parent's end seen before this run makes it the last one; an end
      // that arrives during the run ends the loop without another.
      const bool last = ctl.done;
      if (stats_ != nullptr) ++stats_->report_runs;
      if (observer_ != nullptr) observer_->report_begin(r.name);
      status st = co_await exec(r, ws, &b, &path);
      if (observer_ != nullptr) observer_->report_end(r.name, st);
      if (!st) co_return st;
      if (last || ctl.done) co_return ok();
    }
  }

  // Tri-state stop check: true (stop), false (go on) or an error.
  static result<bool> should_stop(const bound& b, const path_t* path, const node& n) {
    if (b.stop == nullptr) return false;
    if (const bool* v = b.stop->try_get<bool>()) return *v;
    if (!b.stop->has_value()) return false;  // not written yet: keep going
    return at(path, errc::type_mismatch,
              "should_stop_blob " + quote(*n.stop()) + " expects a scalar boolean, got " + b.stop->type_name());
  }

  asio::awaitable<status> run_net(net_instance& inst, const path_t* path) {
    if (stats_ != nullptr) ++stats_->net_runs;
    if (observer_ != nullptr) observer_->net_begin(inst.name());
    // No co_await inside ?: — GCC 12 miscompiles the temporaries there.
    status st = ok();
    if (inst.has_async()) {
      st = co_await inst.run();
    } else {
      st = inst.run_sync();
    }
    if (observer_ != nullptr) observer_->net_end(inst.name(), st);
    if (!st) co_return at(path, st.error());
    co_return ok();
  }

  asio::awaitable<status> iterate(const node& n, workspace& ws, const bound& b, const path_t* path,
                                  std::uint64_t* iterations) {
    asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
    const bool stop_mode = n.stop().has_value();
    const bool concurrent = (n.concurrent && n.recurring_size() >= 2) || n.instances() > 1;
    std::vector<path_t> paths;
    std::shared_ptr<barrier> join;
    const bool in_turn = concurrent && sync_children(n, b);
    if (concurrent && concurrent_children(n) > 0) {
      paths = child_paths(n, path);
      if (!in_turn) join = std::make_shared<barrier>(concurrent_children(n));
    }
    std::uint32_t since_yield = 0;
    if (!concurrent && sync_nets(n, b)) {
      // The common loop (synchronous nets, no observer) runs in a plain
      // function, back here only to yield.
      sync_loop loop;
      for (;;) {
        if (auto end = sync_run(n, b, path, cs, iterations, since_yield, loop)) co_return std::move(*end);
        if (!co_await yield(cs)) co_return cancelled_at(path);
      }
    }
    for (std::int64_t i = 0;; ++i) {
      if (stop_mode ? (n.only_once && i > 0) : i >= n.num_iter) break;
      if (cs.cancelled() != asio::cancellation_type::none) co_return cancelled_at(path);
      if (++since_yield == yield_every_) {
        // Lets other coroutines of the strand and cancellation signals in
        // during long loops.
        since_yield = 0;
        if (!co_await yield(cs)) co_return cancelled_at(path);
      }
      if (n.counted && stats_ != nullptr) ++stats_->iterations;
      if (iterations != nullptr) ++*iterations;

      if (concurrent) {
        if (in_turn) {
          // Children that cannot suspend and end on their own: one after
          // another, as plain calls (no spawn, no barrier). On one strand
          // that is what the barrier's schedule comes to, minus its cost;
          // the first failure skips the children not yet run, as it would
          // cancel them.
          for (std::size_t k = 0, e = n.recurring_size(); k < e; ++k) {
            const std::size_t idx = n.recurring_at(k);
            sync_loop loop;
            for (;;) {
              auto end = sync_run(n.children[idx], b.children[idx], &paths[k], cs, nullptr, since_yield, loop);
              if (end) {
                if (!*end) co_return std::move(*end);
                break;
              }
              if (!co_await yield(cs)) co_return cancelled_at(&paths[k]);
            }
          }
        } else if (join) {
          // Turns what an awaited Asio operation throws (cancellation of
          // an already-cancelled coroutine) into a status, as `guarded`.
          status st = ok();
          try {
            st = co_await concurrent_iteration(join, n, ws, b, path, paths);
          } catch (...) {
            st = detail::error_from_exception(std::current_exception());
          }
          if (!st) co_return st;
        }
        auto stop = should_stop(b, path, n);
        if (!stop) co_return stop.error();
        if (stop.value()) co_return ok();
        continue;
      }
      if (!n.nets.empty()) {
        for (net_instance* inst : b.nets) {
          // The hot path of loops: a synchronous net called directly, its
          // status only looked at (no copy) and the stop blob read as a
          // plain bool.
          if (observer_ == nullptr) [[likely]] {
            if (stats_ != nullptr) ++stats_->net_runs;
            if (!inst->has_async()) [[likely]] {
              if (status st = inst->run_sync(); !st) [[unlikely]]
                co_return at(path, st.error());
            } else {
              // Awaited here rather than through `run_net`: one frame
              // less while the net pends.
              status st = co_await inst->run();
              if (!st) co_return at(path, st.error());
            }
          } else if (status st = co_await run_net(*inst, path); !st) {
            co_return st;
          }
          if (b.stop == nullptr) continue;
          if (const bool* v = b.stop->exact<bool>()) {
            if (*v) co_return ok();
            continue;
          }
          auto stop = should_stop(b, path, n);
          if (!stop) co_return stop.error();
          if (stop.value()) co_return ok();
        }
        continue;
      }
      for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
        const std::size_t idx = n.recurring_at(j);
        const node& c = n.children[idx];
        path_t cp{path, c.name};
        if (status st = co_await exec(c, shared(ws), &b.children[idx], &cp); !st) co_return st;
        auto stop = should_stop(b, path, n);
        if (!stop) co_return stop.error();
        if (stop.value()) co_return ok();
      }
    }
    co_return ok();
  }

  // A net step whose nets are all synchronous, run without observer.
  bool sync_nets(const node& n, const bound& b) const {
    if (n.nets.empty() || observer_ != nullptr) return false;
    for (const net_instance* inst : b.nets) {
      if (inst->has_async()) return false;
    }
    return true;
  }

  // A concurrent step whose children are all plain synchronous net steps
  // that end on their own (no stop-blob loop waiting for a sibling): one
  // substep per child, no instances.
  bool sync_children(const node& n, const bound& b) const {
    if (!n.nets.empty() || n.instances() != 1) return false;
    for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
      const std::size_t idx = n.recurring_at(j);
      const node& c = n.children[idx];
      if (c.inline_cost == 0 || !is_plain(c) || !sync_nets(c, b.children[idx])) return false;
    }
    return true;
  }

  // Where a `sync_run` loop stands between its yields.
  struct sync_loop {
    std::int64_t i = 0;
    bool resume = false;
  };

  // Runs a `sync_nets` step's loop on from `loop`: its end (success,
  // failure or cancellation), or nullopt when a yield is due (`loop` then
  // resumes after it).
  std::optional<status> sync_run(const node& n, const bound& b, const path_t* path, const asio::cancellation_state& cs,
                                 std::uint64_t* iterations, std::uint32_t& since_yield, sync_loop& loop) {
    status failure = ok();
    switch (sync_iterations(n, b, path, cs, iterations, loop.i, since_yield, loop.resume, failure)) {
      case loop_exit::end: return ok();
      case loop_exit::failed: return failure;
      case loop_exit::cancelled: return cancelled_at(path);
      case loop_exit::yield: break;
    }
    loop.resume = true;
    return std::nullopt;
  }

  // A flat-stack yield (post, never dispatch); false when the run was
  // cancelled meanwhile.
  asio::awaitable<bool> yield(const asio::cancellation_state& cs) {
    try {
      co_await asio::post(ex_, asio::use_awaitable);
    } catch (...) {
      co_return false;
    }
    co_return cs.cancelled() == asio::cancellation_type::none;
  }

  enum class loop_exit { end, yield, failed, cancelled };

  // The loop of `iterate` for `sync_nets` steps, from iteration `i`, as a
  // plain function (its state in registers, not in a coroutine frame): the
  // same checks in the same order. Returns at the end of the loop (count
  // done or stop blob true), on a failure (in `failure`), on cancellation,
  // or when a yield is due; then `i` is the iteration to finish after the
  // yield (`resume`: its checks are done).
  loop_exit sync_iterations(const node& n, const bound& b, const path_t* path, const asio::cancellation_state& cs,
                            std::uint64_t* iterations, std::int64_t& iteration, std::uint32_t& since_yield_io,
                            bool resume, status& failure) {
    const bool stop_mode = n.stop().has_value();
    std::int64_t i = iteration;
    std::uint32_t since_yield = since_yield_io;
    loop_exit exit = loop_exit::end;
    for (;; ++i) {
      if (!resume) {
        if (stop_mode ? (n.only_once && i > 0) : i >= n.num_iter) break;
        if (cs.cancelled() != asio::cancellation_type::none) {
          exit = loop_exit::cancelled;
          break;
        }
        if (++since_yield == yield_every_) {
          since_yield = 0;
          exit = loop_exit::yield;
          break;
        }
      }
      resume = false;
      if (n.counted && stats_ != nullptr) ++stats_->iterations;
      if (iterations != nullptr) ++*iterations;
      bool stop = false;
      for (net_instance* inst : b.nets) {
        if (stats_ != nullptr) ++stats_->net_runs;
        if (status st = inst->run_sync(); !st) [[unlikely]] {
          failure = at(path, st.error());
          exit = loop_exit::failed;
          stop = true;
          break;
        }
        if (b.stop == nullptr) continue;
        if (const bool* v = b.stop->exact<bool>()) {
          stop = *v;
        } else if (auto r = should_stop(b, path, n); !r) {
          failure = r.error();
          exit = loop_exit::failed;
          stop = true;
        } else {
          stop = r.value();
        }
        if (stop) break;
      }
      if (stop) break;
    }
    iteration = i;
    since_yield_io = since_yield;
    return exit;
  }

  // A child of a concurrent step that `exec` would only pass on to
  // `iterate`: no observer, deadline, own workspace or report steps.
  bool is_plain(const node& c) const {
    return observer_ == nullptr && !c.timeout() && !c.create_ws && c.reports().empty();
  }

  // The paths of the children of a concurrent step (substep k of
  // `concurrent_iteration`), made once per execution of the step: plain
  // children are spawned as `iterate` directly and point to these.
  std::vector<path_t> child_paths(const node& n, const path_t* path) const {
    std::vector<path_t> paths;
    if (!n.nets.empty()) return paths;
    const std::size_t units = n.recurring_size();
    const auto instances = static_cast<std::size_t>(n.instances());
    paths.reserve(units * instances);
    for (std::size_t k = 0; k < units * instances; ++k) {
      const std::int64_t instance = instances > 1 ? static_cast<std::int64_t>(k / units) : -1;
      paths.push_back(path_t{path, n.children[n.recurring_at(k % units)].name, instance});
    }
    return paths;
  }

  // The children of one concurrent iteration: S recurring substeps x N
  // instances (or N instances of the nets).
  static std::size_t concurrent_children(const node& n) {
    const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
    return units * static_cast<std::size_t>(n.instances());
  }

  // One concurrent iteration: a when_all of the children with a barrier.
  asio::awaitable<status> concurrent_iteration(std::shared_ptr<barrier>& join, const node& n, workspace& ws,
                                               const bound& b, const path_t* path, const std::vector<path_t>& paths) {
    const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
    const auto instances = static_cast<std::size_t>(n.instances());
    return barrier::iteration(join, ex_, [this, &n, &ws, &b, path, &paths, units, instances](std::size_t k) {
      const std::int64_t instance = instances > 1 ? static_cast<std::int64_t>(k / units) : -1;
      if (!n.nets.empty()) return nets_instance(b, path, instance);
      const std::size_t idx = n.recurring_at(k % units);
      const node& c = n.children[idx];
      // The parent's workspace outlives the iteration (it waits for every
      // child), so a plain child needs neither `exec` nor a reference.
      if (is_plain(c)) return iterate(c, ws, b.children[idx], &paths[k], nullptr);
      return substep_instance(c, shared(ws), b.children[idx], path, instance);
    });
  }

  asio::awaitable<status> nets_instance(const bound& b, const path_t* parent, std::int64_t instance) {
    path_t path{parent, "", instance};
    for (net_instance* inst : b.nets) {
      if (status st = co_await run_net(*inst, instance >= 0 ? &path : parent); !st) co_return st;
    }
    co_return ok();
  }

  asio::awaitable<status> substep_instance(const node& c, std::shared_ptr<workspace> ws, const bound& b,
                                           const path_t* parent, std::int64_t instance) {
    path_t path{parent, c.name, instance};
    co_return co_await exec(c, std::move(ws), &b, &path);
  }

  static std::shared_ptr<workspace> shared(workspace& ws) { return ws.shared_from_this(); }

  // Turns what an awaited Asio operation throws (cancellation of an
  // already-cancelled coroutine) into a status.
  static asio::awaitable<status> guarded(asio::awaitable<status> a) {
    try {
      co_return co_await std::move(a);
    } catch (...) {
      co_return detail::error_from_exception(std::current_exception());
    }
  }

  asio::any_io_executor ex_;
  const operator_registry& registry_;
  step_stats* stats_;
  step_observer* observer_;
  std::uint32_t yield_every_;
};

}  // namespace

namespace detail {
struct compiled_step {
  node root;
};
}  // namespace detail

status detail::compile_into(compiled_step& out, const execution_step& s, const execution_step* counted) {
  TASKGROUP_TRY(s.validate());
  s.freeze();
  out.root = compile(s, counted);
  // The root may have its own workspace (try_inline makes it); only a
  // nested one keeps a tree off the inline path.
  out.root.inline_cost = inline_cost(out.root, true);
  return ok();
}

result<std::shared_ptr<const detail::compiled_step>> detail::compile_step(const execution_step& s,
                                                                          const execution_step* counted) {
  auto c = std::make_shared<detail::compiled_step>();
  TASKGROUP_TRY(compile_into(*c, s, counted));
  return std::shared_ptr<const detail::compiled_step>(std::move(c));
}

std::shared_ptr<detail::compiled_step[]> detail::make_compiled_steps(std::size_t n) {
  return std::shared_ptr<compiled_step[]>(new compiled_step[n]);
}

detail::compiled_step& detail::compiled_at(compiled_step* steps, std::size_t k) noexcept { return steps[k]; }

bool detail::may_run_inline(const compiled_step& s) noexcept {
  return s.root.inline_cost != 0 && s.root.inline_cost <= run_step_options{}.yield_every;
}

std::string_view detail::root_name(const compiled_step& s) noexcept { return s.root.name; }

namespace {

// A status in one pointer (null: success), for what a waiting run keeps:
// a status is seven times that size.
class compact_status {
 public:
  compact_status& operator=(status st) {
    if (st) {
      failure_.reset();
    } else {
      failure_ = std::make_unique<error>(std::move(st).assume_error());
    }
    return *this;
  }
  explicit operator bool() const noexcept { return failure_ == nullptr; }
  [[nodiscard]] status get() const { return failure_ ? status(*failure_) : ok(); }
  // The status, leaving success behind.
  [[nodiscard]] status take() {
    status out = get();
    failure_.reset();
    return out;
  }

 private:
  std::unique_ptr<error> failure_;
};

// detail::frame_free_run: `exec`'s sequential semantics (as the coroutine
// runner's `iterate` has them for these trees) as an explicit stack of
// steps, so that a run can stop at an asynchronous op and resume from its
// completion. A step whose nets are all synchronous runs its whole loop in
// `sync_iterations`, as the coroutine runner does.
class cursor final : public detail::frame_free_run, private op_completion::target {
 public:
  explicit cursor(detail::task_host& host) noexcept : host_(host) {}

  outcome start(const detail::compiled_step& s, std::shared_ptr<workspace>& ws) override {
    const node& root = s.root;
    if (!detail::may_run_inline(s) || !ws) return outcome::declined;
    stats_ = step_stats{};
    std::shared_ptr<workspace> own;
    if (root.create_ws) own = ws->create_child(ws->name() + "/" + root.name);
    workspace& w = own ? *own : *ws;
    runner r = make_runner();
    const path_t path{nullptr, root.name};
    if (status st = r.bind(root, w, bound_, &path); !st) {
      result_ = std::move(st);
      return outcome::ended;
    }
    if (!startable(root, bound_)) return outcome::declined;
    stack_.clear();
    push(root, bound_);
    if (advance(r)) return outcome::ended;
    // Waiting: the run holds its workspaces until it ends.
    // A child keeps its parent: the run holds the innermost one.
    ws_ = own ? std::move(own) : std::move(ws);
    ws.reset();
    return outcome::waiting;
  }

  void cancel() noexcept override {
    // Only while an op pends: the slot's handler belongs to that op.
    if (waiting_) signal_.emit(asio::cancellation_type::terminal);
  }
  [[nodiscard]] status result() const override { return result_.get(); }
  [[nodiscard]] const step_stats& stats() const noexcept override { return stats_; }
  void reset() noexcept override { ws_.reset(); }

 private:
  struct level {
    const node* n;
    const bound* b;
    std::int64_t i = 0;   // iteration
    std::uint32_t j = 0;  // net or recurring child within the iteration (bounded by inline_cost)
    bool in_iteration = false;
    bool child_done = false;  // recurring child j has just ended well
  };

  [[nodiscard]] runner make_runner() {
    run_step_options o;
    o.stats = &stats_;
    return {asio::any_io_executor(), host_.registry(), o};
  }

  // Every asynchronous kernel of the bound tree has a callback form.
  static bool startable(const node& n, const bound& b) {
    for (const net_instance* inst : b.nets) {
      if (!inst->has_async()) continue;
      for (std::size_t i = 0; i < inst->size(); ++i) {
        const op_kernel& k = inst->kernel(i);
        if (k.is_async() && !k.has_start()) return false;
      }
    }
    for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
      const std::size_t idx = n.recurring_at(j);
      if (!startable(n.children[idx], b.children[idx])) return false;
    }
    return true;
  }

  void push(const node& n, const bound& b) { stack_.push_back(level{&n, &b}); }

  // Calls `f` with the step path of the top of the stack (made on demand:
  // for errors, and for the synchronous loop, which renders it only on
  // error).
  template <class F>
  auto with_path(F f) const {
    boost::container::small_vector<path_t, 4> chain;
    chain.reserve(stack_.size());
    for (const level& l : stack_) chain.push_back(path_t{chain.empty() ? nullptr : &chain.back(), l.n->name});
    return f(&chain.back());
  }

  // The run has ended with `st`.
  bool finish(status st) {
    result_ = std::move(st);
    stack_.clear();
    return true;
  }

  // The top step has ended well: its parent goes on.
  void pop() {
    stack_.pop_back();
    if (!stack_.empty()) stack_.back().child_done = true;
  }

  // Runs from the current position until the tree ends (true, result_
  // set) or an op waits (false). `resumed` is the end of the op that
  // waited.
  bool advance(runner& r, std::optional<status> resumed = std::nullopt) {
    if (resumed) {
      if (!*resumed) return finish(op_failure(resumed->error()));
      ++op_;
      if (!continue_net()) return false;
      if (!result_) return true;
      if (after_net()) return true;
    }
    while (!stack_.empty()) {
      level& l = stack_.back();
      const node& n = *l.n;
      const bool stop_mode = n.stop().has_value();
      if (l.child_done) {
        l.child_done = false;
        auto stop = with_path([&](const path_t* p) { return runner::should_stop(*l.b, p, n); });
        if (!stop) return finish(stop.error());
        if (stop.value()) {
          pop();
          continue;
        }
        ++l.j;
      }
      if (!l.in_iteration) {
        if (stop_mode ? (n.only_once && l.i > 0) : l.i >= n.num_iter) {
          pop();
          continue;
        }
        if (host_.stopping()) return finish(with_path([](const path_t* p) { return cancelled_at(p); }));
        if (r.sync_nets(n, *l.b)) {
          if (!run_sync_level(r, l)) return true;
          pop();
          continue;
        }
        l.in_iteration = true;
        l.j = 0;
        if (n.counted) ++stats_.iterations;
      }
      if (!n.nets.empty()) {
        if (l.j == l.b->nets.size()) {
          l.in_iteration = false;
          ++l.i;
          continue;
        }
        net_instance* inst = l.b->nets[l.j];
        ++stats_.net_runs;
        if (!inst->has_async()) {
          if (status st = inst->run_sync(); !st) {
            return finish(with_path([&](const path_t* p) { return at(p, st.error()); }));
          }
        } else {
          net_ = inst;
          op_ = 0;
          if (!continue_net()) return false;
          if (!result_) return true;
        }
        if (after_net()) return true;
        continue;
      }
      if (l.j == n.recurring_size()) {
        l.in_iteration = false;
        ++l.i;
        continue;
      }
      const std::size_t idx = n.recurring_at(l.j);
      push(n.children[idx], l.b->children[idx]);
    }
    return finish(ok());
  }

  // A net step of synchronous nets, its whole loop; false when it failed
  // (the run has then ended).
  bool run_sync_level(runner& r, const level& l) {
    return with_path([&](const path_t* p) {
      const asio::cancellation_state never;
      status failure = ok();
      std::int64_t i = 0;
      std::uint32_t since_yield = 0;
      bool resume = false;
      for (;;) {
        // The yields are moot here: the work is bounded and nothing can
        // cancel it meanwhile.
        switch (r.sync_iterations(*l.n, *l.b, p, never, nullptr, i, since_yield, resume, failure)) {
          case runner::loop_exit::end: return true;
          case runner::loop_exit::failed: return !finish(std::move(failure));
          case runner::loop_exit::cancelled: return !finish(cancelled_at(p));
          case runner::loop_exit::yield: resume = true; break;
        }
      }
    });
  }

  // Runs `net_` from op `op_`: false when an op waits; else the net has
  // ended, well or not (result_ then holds the failure).
  bool continue_net() {
    result_ = ok();
    for (;;) {
      if (status st = net_->run_from(op_); !st) {
        result_ = with_path([&](const path_t* p) { return at(p, st.error()); });
        return true;
      }
      if (op_ == net_->size()) return true;
      std::optional<status> now = start_op(net_->kernel(op_));
      if (!now) return false;
      if (!*now) {
        result_ = op_failure(now->error());
        return true;
      }
      ++op_;
    }
  }

  // After a net of the top step ended well: the stop blob. True when the
  // run has ended (a stop blob error).
  // The failure `e` of the pending op of `net_`, with the net, op and path.
  status op_failure(const error& e) const {
    return with_path([&](const path_t* p) { return at(p, net_->op_error(op_, e)); });
  }

  bool after_net() {
    level& l = stack_.back();
    const bound& b = *l.b;
    bool stop = false;
    if (b.stop != nullptr) {
      if (const bool* v = b.stop->exact<bool>()) {
        stop = *v;
      } else {
        auto s = with_path([&](const path_t* p) { return runner::should_stop(b, p, *l.n); });
        if (!s) return finish(s.error());
        stop = s.value();
      }
    }
    if (stop) {
      pop();
    } else {
      ++l.j;
    }
    return false;
  }

  // Starts op `k`: its status when it ended at once, nullopt when it waits.
  std::optional<status> start_op(op_kernel& k) {
    if (host_.stopping()) return status(fail(errc::cancelled, "cancelled"));
    in_start_ = true;
    ended_early_ = false;
    k.start(host_.executor(), op_completion(*this, signal_.slot()));
    in_start_ = false;
    if (ended_early_) return result_.take();
    waiting_ = true;
    return std::nullopt;
  }

  void complete(status st) noexcept override {
    if (in_start_) {  // ended inside start(): start_op takes it from result_
      result_ = std::move(st);
      ended_early_ = true;
      return;
    }
    waiting_ = false;
    runner r = make_runner();
    if (!advance(r, std::move(st))) return;  // waits again
    reset();
    host_.run_ended(*this);  // last: the host may destroy this run
  }

  void abandon() noexcept override {
    if (in_start_) {
      result_ = fail(errc::op_failed, "asynchronous operator dropped its completion");
      ended_early_ = true;
      return;
    }
    waiting_ = false;
    host_.run_abandoned(*this);  // last: the host may destroy this run
  }

  detail::task_host& host_;
  std::shared_ptr<workspace> ws_;  // while waiting: the root step's own workspace, else the task's
  bound bound_;
  boost::container::small_vector<level, 1> stack_;  // a task's tree is mostly one step
  net_instance* net_ = nullptr;                     // the net whose op `op_` pends
  std::size_t op_ = 0;
  step_stats stats_;
  compact_status result_;  // also an op's end reported inside start()
  asio::cancellation_signal signal_;
  bool waiting_ = false;
  bool in_start_ = false;
  bool ended_early_ = false;
};

}  // namespace

std::unique_ptr<detail::frame_free_run> detail::make_frame_free_run(task_host& host) {
  return std::make_unique<cursor>(host);
}

asio::awaitable<status> detail::run_compiled(std::shared_ptr<const compiled_step> s, std::shared_ptr<workspace> ws,
                                             run_step_options options) {
  if (!ws) co_return fail(errc::invalid_step, "run_step: no workspace");
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options);
  const node& root = s->root;
  path_t path{nullptr, root.name};
  bound b;
  if (!root.create_ws) {
    if (auto st = r.bind(root, *ws, b, &path); !st) co_return st;
  }
  // Straight to the loop when `exec` would only pass the call on: three
  // coroutine frames fewer for the common task (alive while it pends).
  if (r.is_plain(root)) co_return co_await r.iterate(root, *ws, b, &path, nullptr);
  co_return co_await r.exec(root, std::move(ws), &b, &path);
}

asio::awaitable<status> detail::run_with_reporters(
    std::function<asio::awaitable<status>()> body,
    std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports, std::shared_ptr<workspace> ws,
    run_step_options options, std::string path_name) {
  if (reports.empty()) co_return co_await body();
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options);
  path_t path{nullptr, path_name};
  std::vector<node> nodes;
  std::vector<bound> bounds(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (auto st = reports[i].first.validate(); !st) co_return st;
    reports[i].first.freeze();
    nodes.push_back(compile(reports[i].first, nullptr));
    nodes.back().rare_fields().every = reports[i].second;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    path_t rp{&path, nodes[i].name};
    if (!nodes[i].create_ws) {
      if (auto st = r.bind(nodes[i], *ws, bounds[i], &rp); !st) co_return st;
    }
  }
  co_return co_await r.with_reporters(std::move(body), nodes, bounds, ws, &path);
}

asio::awaitable<status> run_step(execution_step step, std::shared_ptr<workspace> ws, run_step_options options) {
  auto compiled = detail::compile_step(step, &step);
  if (!compiled) co_return compiled.error();
  co_return co_await detail::run_compiled(std::move(compiled).value(), std::move(ws), options);
}

}  // namespace taskgroup
