#include <taskgroup/session.hpp>

#include <taskgroup/codec.hpp>

#include "detail/errors.hpp"
#include "detail/test_hooks.hpp"
#include "model/limits.hpp"
#include "model/task_access.hpp"
#include "session/admission.hpp"
#include "session/compiled.hpp"
#include "session/context_watch.hpp"
#include "session/metrics_book.hpp"
#include "session/report.hpp"
#include "session/run.hpp"
#include "session/strands.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>

namespace taskgroup {

namespace asio = boost::asio;

using detail::compiled_group;
using detail::fetched_outputs;
using detail::node_state;
using detail::run_state;
using detail::strand_t;

namespace {
// What a run of a closed session (or one whose context is gone) fails with.
constexpr const char* closed_message = "Session is closed.";
}  // namespace

struct local_session::impl {
  explicit impl(asio::any_io_executor e) : ex(std::move(e)) {}
  explicit impl(std::size_t threads)
      : pool(std::in_place, std::max<std::size_t>(threads, 1)), ex(pool->get_executor()) {}

  std::optional<asio::thread_pool> pool;
  asio::any_io_executor ex;
  detail::erased_strand coordinator = detail::make_erased_strand(ex);
  const strand_t& coord = coordinator.strand;
  const asio::any_io_executor& coord_ex = coordinator.executor;

  mutable std::mutex mutex;         // guards what follows
  std::atomic<bool> closed{false};  // written under `mutex`
  detail::admission admission{mutex, this, [](void* self, const std::shared_ptr<run_state>& rs) noexcept {
                                local_session::begin(*static_cast<impl*>(self), rs);
                              }};
  detail::metrics_book metrics;  // its own lock
  const operator_registry* registry = nullptr;
  std::optional<asio::any_io_executor> compute;                  // offloaded kernels' (none: the default)
  std::vector<std::unique_ptr<node_state>> nodes;                // in order of first use
  std::unordered_map<std::string_view, node_state*> node_index;  // names in `nodes`
  struct cached {
    std::weak_ptr<const void> token;  // the group (detail::group_access::identity)
    std::shared_ptr<const compiled_group> compiled;
  };
  std::map<const void*, cached> compiled;

  // Set when the executor's context is destroyed before the session
  // (context_gone): the session is closed, its strands are dropped, and
  // what still needs an executor (a later run's refusal, node_strand) uses
  // the system executor instead.
  std::atomic<bool> orphaned{false};
  const asio::any_io_executor system_ex{asio::system_executor()};

  // The executor's context is being destroyed (detail::watch_context): its
  // handlers are gone, its strand service not yet. Drops every strand the
  // session holds (they belong to that service) and closes the session.
  // The emptied strands are never used again: everything that would use
  // one asks `orphaned` first.
  void context_gone() noexcept {
    std::lock_guard lock(mutex);
    closed = true;
    orphaned.store(true, std::memory_order_release);
    [[maybe_unused]] detail::erased_strand dropped = std::move(coordinator);
    for (const auto& n : nodes) {
      [[maybe_unused]] strand_t strand = std::move(n->strand);
      [[maybe_unused]] asio::any_io_executor executor = std::move(n->executor);
    }
  }

  // The executor strands are made over: the session's, or once its context
  // is gone, the system executor.
  [[nodiscard]] const asio::any_io_executor& strand_base() const noexcept {
    return orphaned.load(std::memory_order_acquire) ? system_ex : ex;
  }

  node_state& node(const std::string& name) {
    if (auto it = node_index.find(name); it != node_index.end()) {
      node_state& n = *it->second;
      if (!n.executor) {  // dropped with its context: a strand for node_strand()
        detail::erased_strand strand = detail::make_erased_strand(strand_base());
        n.strand = std::move(strand.strand);
        n.executor = std::move(strand.executor);
      }
      return n;
    }
    detail::erased_strand strand = detail::make_erased_strand(strand_base());
    nodes.push_back(std::make_unique<node_state>(node_state{name,
                                                            std::move(strand.strand),
                                                            std::move(strand.executor),
                                                            workspace::make(name),
                                                            std::make_shared<detail::node_turns>(),
                                                            {},
                                                            {}}));
    if (compute) nodes.back()->ws->set_compute_executor(*compute);
    node_index.emplace(nodes.back()->name, nodes.back().get());
    return *nodes.back();
  }

  // At a run's initiation, under one lock: the registry it uses, its
  // compiled group when this session has one (its begin then compiles
  // nothing and, once every node of the group is placed, takes no lock),
  // its coordinator (the node's strand for a group of one node that a run
  // of this session has placed, else the session's) and its admission. A
  // closed session is seen in begin, which refuses the run.
  detail::admission::verdict look_up(const std::shared_ptr<run_state>& rs, error& why,
                                     std::shared_ptr<run_state>& displaced) {
    const asio::any_io_executor* chosen = &local_session::coordinator(*this);
    std::lock_guard lock(mutex);
    rs->registry = registry;
    auto it = compiled.find(detail::group_access::key(rs->source));
    if (!closed && it != compiled.end() && !it->second.token.expired()) {
      rs->group = it->second.compiled;
      rs->placed = rs->group->all_placed;
      if (const node_state* n = rs->group->only_node(); n != nullptr && n->executor) {
        chosen = &n->executor;
        rs->coord_node = n;
      }
    }
    rs->coord = chosen;
    // Followed before the run is in the admission's hands, where another
    // thread may begin or end it.
    detail::follow_cancellation(rs);
    if (closed) return detail::admission::verdict::start;  // refused by begin, not counted
    return admission.arrive(rs, rs->options.priority, strand_base(), why, displaced);
  }
  // The session's strand the calling thread is running, named ("the
  // session's own coordinator", "node \"n\"'s strand"); empty for none.
  [[nodiscard]] std::string strand_here() const {
    if (coord.running_in_this_thread()) return "the session's own coordinator";
    std::lock_guard lock(mutex);
    for (const auto& n : nodes) {
      // A strand dropped with its context (no executor) runs nothing.
      if (n->executor && n->strand.running_in_this_thread()) return "node " + quote(n->name) + "'s strand";
    }
    return {};
  }
  // Places the active nodes of `rs` on the session's nodes (made on first
  // use), and the remote nets of its group: `remote_on` gets the node of
  // each, null for one the run leaves out.
  void place(run_state& rs, std::vector<node_state*>& remote_on) {
    std::lock_guard lock(mutex);
    const compiled_group& g = *rs.group;
    if (g.placed.empty()) g.placed.resize(g.nodes.size(), nullptr);
    for (std::size_t i : rs.active) {
      if (g.placed[i] == nullptr) g.placed[i] = &node(g.nodes[i].name);
    }
    g.all_placed = std::find(g.placed.begin(), g.placed.end(), nullptr) == g.placed.end();
    for (const auto& r : rs.source.remote_nets()) {
      remote_on.push_back(detail::takes_part(rs.options, r.node) ? &node(r.node) : nullptr);
    }
  }

  result<std::shared_ptr<const compiled_group>> compile(const task_group& g) {
    std::lock_guard lock(mutex);
    if (closed) return fail(errc::session_closed, closed_message);
    const std::shared_ptr<const void> id = detail::group_access::identity(g);
    // A used group and its tasks cannot change (their builders throw), so
    // a cached group is what a new compilation would make.
    auto it = compiled.find(id.get());
    if (it != compiled.end() && !it->second.token.expired()) return it->second.compiled;
    std::erase_if(compiled, [](const auto& kv) { return kv.second.token.expired(); });
    TASKGROUP_TRY(auto c, detail::compile_group(g));  // checks every task
    c->series = &metrics.series_for(g.name());
    compiled[id.get()] = cached{id, c};
    return c;
  }
};

local_session::local_session(asio::any_io_executor ex) : impl_(std::make_shared<impl>(std::move(ex))) {
  // Not the owned pool's: that one is the session's own, destroyed last.
  detail::watch_context(impl_->ex, impl_);
}
local_session::local_session(std::size_t threads) : impl_(std::make_shared<impl>(threads)) {}
local_session::local_session(asio::any_io_executor ex, const session_limits& limits) : local_session(std::move(ex)) {
  set_limits(limits);
}
local_session::local_session(std::size_t threads, const session_limits& limits) : local_session(threads) {
  set_limits(limits);
}

local_session::~local_session() {
  close();
  if (!impl_->pool) return;
  if (!impl_->pool->get_executor().running_in_this_thread()) {
    impl_->pool->join();
    return;
  }
  // Destroyed on a thread of its own pool (from a run's completion
  // handler): joining here would wait for this very thread. A thread of
  // its own joins the pool once this handler and the runs in flight have
  // ended, then drops the state (and the pool with it).
  try {
    std::thread([state = std::move(impl_)] { state->pool->join(); }).detach();
  } catch (const std::system_error&) {
    // No thread to be had: the state is left alive rather than joined from
    // inside, which would never return.
    (void)new std::shared_ptr<impl>(std::move(impl_));  // NOLINT(cppcoreguidelines-owning-memory)
  }
}

void local_session::close() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->closed = true;
  }
  for (const auto& rs : impl_->admission.take_queue()) {
    detail::refuse_unbegun(rs, error(errc::session_closed, closed_message));
  }
}

bool local_session::closed() const noexcept {
  std::lock_guard lock(impl_->mutex);
  return impl_->closed || impl_->admission.draining_locked();
}

void local_session::set_limits(const session_limits& limits) {
  if (status st = check_limits(limits); !st) throw system_error(st.error());
  impl_->admission.set_limits(limits);
}

session_limits local_session::limits() const { return impl_->admission.limits(); }

session_load local_session::load() const { return impl_->admission.load(); }

session_metrics local_session::metrics() const {
  session_metrics m;
  m.groups = impl_->metrics.read();
  const session_load now = impl_->admission.load();
  m.runs_in_flight = now.in_flight;
  m.runs_queued = now.queued;
  m.enabled = impl_->metrics.enabled.load(std::memory_order_relaxed);
  return m;
}

void local_session::enable_metrics(bool on) noexcept { impl_->metrics.enabled.store(on, std::memory_order_relaxed); }

void local_session::start_drain(impl& state, asio::any_completion_handler<void(boost::system::error_code)> done) {
  state.admission.drain(std::move(done), coordinator(state));
}

void local_session::start_describe(const std::shared_ptr<impl>& state, describe_handler handler) {
  const asio::any_io_executor& coord = coordinator(*state);
  // Work counted on the handler's executor (by default the coordinator)
  // from here until the handler has run.
  auto ex = asio::prefer(asio::get_associated_executor(handler, coord), asio::execution::outstanding_work.tracked);
  auto finish = [ex](describe_handler h, boost::system::error_code code, session_description d) {
    ex.execute([h = std::move(h), code, d = std::move(d)]() mutable { std::move(h)(code, std::move(d)); });
  };
  std::vector<detail::admission::seen_run> seen;
  bool closed = false;
  try {
    seen = state->admission.view();
    std::lock_guard lock(state->mutex);
    closed = state->closed || state->admission.draining_locked();
  } catch (...) {
    const boost::system::error_code code = detail::error_from_exception(std::current_exception()).code;
    asio::post(coord, [finish, h = std::move(handler), code]() mutable { finish(std::move(h), code, {}); });
    return;
  }
  // The session's state is held until the description is made: the runs'
  // node strands belong to it.
  asio::co_spawn(coord, detail::describe_runs(std::move(seen), closed),
                 [finish, h = std::move(handler), state](const std::exception_ptr& e, session_description d) mutable {
                   if (e) return finish(std::move(h), detail::error_from_exception(e).code, {});
                   finish(std::move(h), {}, std::move(d));
                 });
}

asio::any_io_executor local_session::get_executor() const { return impl_->strand_base(); }

void local_session::set_registry(const operator_registry& registry) {
  std::lock_guard lock(impl_->mutex);
  impl_->registry = &registry;
}

void local_session::set_compute_executor(asio::any_io_executor ex) {
  std::lock_guard lock(impl_->mutex);
  impl_->compute = ex;
  for (const auto& n : impl_->nodes) n->ws->set_compute_executor(ex);
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

// Once the context is gone there is no coordinator: a run is refused
// (session_closed) on the system executor.
const asio::any_io_executor& local_session::coordinator(const impl& state) noexcept {
  return state.orphaned.load(std::memory_order_acquire) ? state.system_ex : state.coord_ex;
}

void local_session::start_run(std::shared_ptr<impl> state, task_group group, run_options options,
                              detail::run_completion_ptr done) {
  const auto arrived = std::chrono::system_clock::now();
  auto rs = std::make_shared<run_state>(std::move(group), std::move(options));
  rs->arrived = arrived;
  rs->done = std::move(done);
  impl& s = *state;
  rs->metrics = &s.metrics;
  detail::join_trace(*rs);
  // The run holds the session's state from here (its begin reads it).
  rs->session_coord = std::shared_ptr<const asio::any_io_executor>(std::move(state), &coordinator(s));
  error why;
  std::shared_ptr<run_state> displaced;  // shed from the queue to make room for this one
  const detail::admission::verdict v = s.look_up(rs, why, displaced);
  if (displaced) detail::refuse_unbegun(displaced, why);
  switch (v) {
    case detail::admission::verdict::start: {
      const asio::any_io_executor& coord = *rs->coord;  // bound before `rs` moves into the handler
      asio::post(coord, [&s, rs = std::move(rs)] { begin(s, rs); });
      return;
    }
    case detail::admission::verdict::queued: return;  // the queue holds it
    case detail::admission::verdict::shed:
    case detail::admission::verdict::closed: return detail::refuse_arrival(rs, why, s.strand_base());
  }
}
// On the coordinator: what a run checks before it starts anything (each
// failure refuses it: every task not run). `state` is held by the run
// (run_state::session_coord): the session may have dropped it meanwhile
// (a closed session refuses the run).
void local_session::begin(impl& state, const std::shared_ptr<run_state>& rs) {
  try {
    rs->started = std::chrono::system_clock::now();
    // Counted in flight by the admission (not refused by a closed session).
    rs->admitted = rs->ticket.by != nullptr;
    const task_group& group = rs->source;
    const run_options& opt = rs->options;
    if (std::string f = detail::run_timeout_fault(opt.timeout); !f.empty()) {
      return detail::refuse_run(rs, error(errc::invalid_task, "run_options::timeout " + f));
    }
    if (rs->trace_fault) return detail::refuse_run(rs, *rs->trace_fault);
    if (!rs->group) {
      auto compiled = state.compile(group);
      if (!compiled) return detail::refuse_run(rs, compiled.error());
      rs->group = std::move(compiled).value();
    } else if (state.closed.load(std::memory_order_relaxed)) {
      return detail::refuse_run(rs, error(errc::session_closed, closed_message));
    }
    auto active = detail::active_nodes(group, *rs->group, opt, rs->only);
    if (!active) return detail::refuse_run(rs, active.error());
    rs->active = std::move(active).value();
    if (opt.strict_codecs != nullptr) {
      if (status st = check_output_codecs(group, *opt.strict_codecs); !st) return detail::refuse_run(rs, st.error());
    }
    detail::lay_out(*rs);
    // Checked against the run's own copy, which the nodes read.
    if (status st = detail::check_feeds(group, rs->options.feeds, *rs); !st) return detail::refuse_run(rs, st.error());
    std::vector<node_state*> remote_on;  // the node of each remote net, null when left out
    // Every node placed by an earlier run, no remote net: nothing to lock.
    if (!rs->placed || !group.remote_nets().empty()) state.place(*rs, remote_on);
    for (std::size_t i : rs->active) rs->nodes[i].node = rs->group->placed[i];
    if (remote_on.empty()) {
      rs->started_fresh = true;
      return detail::start_nodes(rs);
    }
    // Made on their nodes first (a coroutine: a hop to each node).
    const operator_registry& registry = rs->registry != nullptr ? *rs->registry : operator_registry::global();
    asio::co_spawn(*rs->coord, detail::make_remote_nets(*rs->coord, group, std::move(remote_on), registry),
                   [rs](std::exception_ptr e, status st) {
                     if (e) st = detail::error_from_exception(e);
                     if (!st) return detail::refuse_run(rs, st.error());
                     detail::start_nodes(rs);
                   });
  } catch (...) {
    detail::refuse_run(rs, detail::error_from_exception(std::current_exception()));
  }
}

run_report local_session::run(task_group group, run_options options, boost::system::error_code& ec) {
  run_report report = [&] {
    const auto now = std::chrono::system_clock::now();
    // The coordinator strand is gone with its context (context_gone).
    if (impl_->orphaned.load(std::memory_order_acquire)) {
      return detail::refused_report(group, error(errc::session_closed, closed_message), now);
    }
    if (std::string where = impl_->strand_here(); !where.empty()) {
      return detail::refused_report(
          group,
          error(errc::invalid_task, "local_session::run called from " + where +
                                        " would block it until the run ends, and deadlock when the run needs it: "
                                        "use async_run there"),
          now);
    }
    // The promise lives in the handler: a run dropped uncalled (its event
    // loop destroyed) breaks it instead of blocking for ever.
    std::promise<run_report> promise;
    std::future<run_report> f = promise.get_future();
    async_run(group, std::move(options),
              [p = std::move(promise)](boost::system::error_code, run_report r) mutable { p.set_value(std::move(r)); });
    try {
      return f.get();
    } catch (...) {
      return detail::refused_report(group, detail::error_from_exception(std::current_exception()), now);
    }
  }();
  ec = detail::report_code(report);
  return report;
}

run_report local_session::run(task_group group, run_options options) {
  boost::system::error_code ec;
  return detail::report_or_throw(run(std::move(group), std::move(options), ec));
}

status check_output_codecs(const task_group& group, const codec_registry& codecs) {
  for (const auto& t : group.tasks()) {
    for (const auto& out : t.declared_outputs()) {
      if (out.type != nullptr && !codecs.find(*out.type)) {
        return fail(errc::not_serializable, "task " + quote(t.name()) + " output " + quote(out.blobs.front()) +
                                                ": no codec for type " + detail::demangle(out.type->name()) +
                                                " (register one with codec_registry::add)");
      }
    }
  }
  return ok();
}

}  // namespace taskgroup
