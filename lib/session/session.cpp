#include <taskgroup/session.hpp>

#include <taskgroup/codec.hpp>

#include "../detail/cancellation.hpp"
#include "../detail/limits.hpp"
#include "../detail/report.hpp"
#include "../detail/strands.hpp"
#include "../detail/task_access.hpp"
#include "../detail/task_misuse.hpp"
#include "../detail/test_hooks.hpp"
#include "state.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

// GCC 12 flags the frame of run_here with a false -Wmismatched-new-delete:
// Asio's frame operator new (through its recycling allocator) and its
// matching delete.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace taskgroup {

namespace asio = boost::asio;

using detail::compiled_group;
using detail::fetched_outputs;
using detail::node_state;
using detail::run_state;
using detail::strand_t;

struct local_session::impl {
  explicit impl(asio::any_io_executor e) : ex(std::move(e)) {}
  explicit impl(std::size_t threads)
      : pool(std::in_place, std::max<std::size_t>(threads, 1)), ex(pool->get_executor()) {}

  std::optional<asio::thread_pool> pool;
  asio::any_io_executor ex;
  detail::erased_strand coordinator = detail::make_erased_strand(ex);
  const strand_t& coord = coordinator.strand;
  const asio::any_io_executor& coord_ex = coordinator.executor;

  mutable std::mutex mutex;  // guards what follows
  bool closed = false;
  const operator_registry* registry = nullptr;
  std::optional<asio::any_io_executor> compute;                  // offloaded kernels' (none: the default)
  std::vector<std::unique_ptr<node_state>> nodes;                // in order of first use
  std::unordered_map<std::string_view, node_state*> node_index;  // names in `nodes`
  struct cached {
    std::weak_ptr<const void> token;  // the group (detail::group_access::identity)
    std::shared_ptr<const compiled_group> compiled;
    std::uint64_t checked = 0;  // detail::task_misuse_epoch() when its tasks were last checked
  };
  std::map<const void*, cached> compiled;

  node_state& node(const std::string& name) {
    if (auto it = node_index.find(name); it != node_index.end()) return *it->second;
    detail::erased_strand strand = detail::make_erased_strand(ex);
    nodes.push_back(std::make_unique<node_state>(node_state{name,
                                                            std::move(strand.strand),
                                                            std::move(strand.executor),
                                                            workspace::make(name),
                                                            std::make_shared<detail::node_turns>(),
                                                            {}}));
    if (compute) nodes.back()->ws->set_compute_executor(*compute);
    node_index.emplace(nodes.back()->name, nodes.back().get());
    return *nodes.back();
  }

  result<std::shared_ptr<const compiled_group>> compile(const task_group& g) {
    std::lock_guard lock(mutex);
    if (closed) return fail(errc::session_closed, "Session is closed.");
    // Read before the check: a misuse recorded meanwhile makes the next
    // run check again.
    const std::uint64_t epoch = detail::task_misuse_epoch();
    const std::shared_ptr<const void> id = detail::group_access::identity(g);
    auto it = compiled.find(id.get());
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
    TASKGROUP_TRY(auto c, detail::compile_group(g));  // checks every task
    compiled[id.get()] = cached{id, c, epoch};
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

namespace {

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
asio::awaitable<run_report> local_session::run_here(std::shared_ptr<impl> state, task_group group,
                                                    run_options options) {
  // Terminal and partial cancellation stop a run; total cannot be honoured
  // (see async_run) and is filtered out here.
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  const auto started = std::chrono::system_clock::now();
  // Only the upper bound: a deadline of 0 (or less) expires at once.
  if (options.timeout && *options.timeout > max_duration) {
    co_return detail::refused_report(
        group, error(errc::invalid_task, "run_options::timeout " + detail::duration_fault(options.timeout->count())),
        started);
  }
  auto compiled_or = state->compile(group);
  if (!compiled_or) co_return detail::refused_report(group, compiled_or.error(), started);
  std::shared_ptr<const compiled_group> compiled = std::move(compiled_or).value();
  auto active_or = detail::active_nodes(group, *compiled, options);
  if (!active_or) co_return detail::refused_report(group, active_or.error(), started);
  const std::vector<std::size_t> active = std::move(active_or).value();
  if (options.strict_codecs != nullptr) {
    if (status st = check_output_codecs(group, *options.strict_codecs); !st)
      co_return detail::refused_report(group, st.error(), started);
  }
  auto rs = std::make_shared<run_state>();
  rs->group = compiled;
  rs->options = std::move(options);
  const run_options& opt = rs->options;
  // Checked against the run's own copy, which the nodes read.
  if (status st = detail::check_feeds(group, *compiled, opt.feeds, active, *rs); !st) {
    co_return detail::refused_report(group, st.error(), started);
  }
  rs->nodes.resize(compiled->nodes.size(), nullptr);
  std::vector<node_state*> remote_on;  // the node of each remote net, null when left out
  {
    std::lock_guard lock(state->mutex);
    rs->registry = state->registry;
    for (std::size_t i : active) rs->nodes[i] = &state->node(compiled->nodes[i].name);
    for (const auto& r : group.remote_nets()) {
      remote_on.push_back(detail::takes_part(opt, r.node) ? &state->node(r.node) : nullptr);
    }
  }
  if (!remote_on.empty()) {
    const operator_registry& registry = rs->registry != nullptr ? *rs->registry : operator_registry::global();
    if (status st = co_await detail::make_remote_nets(state->coord_ex, group, remote_on, registry); !st) {
      co_return detail::refused_report(group, st.error(), started);
    }
  }
  rs->records.resize(compiled->tasks.size());
  rs->outputs.resize(compiled->nodes.size());
  rs->workspaces.resize(compiled->nodes.size());
  rs->watch.resize(compiled->nodes.size());
  if (opt.probe != nullptr) {
    rs->coord = state->coord_ex;
    rs->session = state;
    if (status st = detail::probe_access::attach(*opt.probe, rs); !st) {
      co_return detail::refused_report(group, st.error(), started);
    }
  }
  run_report report;
  report.started = started;
  if (opt.observer != nullptr) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& ct : compiled->tasks) names.emplace_back(*ct.name, *ct.node);
    opt.observer->run_begin(names);
  }

  const asio::any_io_executor& coord = state->coord_ex;
  const auto mode = opt.policy == run_policy::gather ? detail::join_mode::gather : detail::join_mode::fail_fast;
  // The join of the nodes (and of it and the deadline), made outside the
  // co_await: GCC 12 destroys the temporaries of a call inside one twice
  // when the coroutine is destroyed suspended.
  auto all_nodes = [&] {
    return detail::join(
        coord, active.size(), [&](std::size_t j) { return detail::run_node(rs, active[j]); },
        [&](std::size_t j) { return rs->nodes[active[j]]->executor; }, mode);
  };
  status st = ok();
  bool expired = false;
  try {
    asio::awaitable<status> joined =
        opt.timeout
            ? detail::join(
                  coord, 2,
                  [&, limit = *opt.timeout](std::size_t i) { return i == 0 ? all_nodes() : deadline(limit, expired); },
                  detail::join_mode::race)
            : all_nodes();
    st = co_await std::move(joined);
  } catch (...) {
    st = detail::error_from_exception(std::current_exception());
  }
  if (opt.probe != nullptr) detail::probe_access::detach(*opt.probe, *rs);
  if (opt.strict_codecs != nullptr) {
    if (status sc = detail::round_trip_outputs(*rs, active, *opt.strict_codecs); !sc && st) st = sc;
  }
  report.finished = std::chrono::system_clock::now();
  // In task order, each report made in place: a node's tasks are in task
  // order in its list, so task k is at `next[node]` there.
  report.tasks.reserve(rs->records.size());
  boost::container::small_vector<std::size_t, 8> next(compiled->nodes.size(), 0);
  for (std::size_t k = 0; k < rs->records.size(); ++k) {
    const detail::compiled_task& ct = compiled->tasks[k];
    std::vector<fetched_outputs>& fetched = rs->outputs[ct.node_index];
    const std::size_t j = next[ct.node_index]++;
    detail::fill_report(report.tasks.emplace_back(), ct, rs->records[k], fetched.empty() ? nullptr : &fetched[j]);
  }
  // The run's own ends (deadline, cancellation from outside) are errors
  // under every policy; a task's failure (even its own step timeout) is the
  // run's error under join only.
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  if (expired) {
    report.failure = detail::with_waiting_tasks(report.tasks, st.error());
  } else if (cs.cancelled() != asio::cancellation_type::none) {
    report.failure = detail::with_waiting_tasks(report.tasks, error(errc::cancelled, "run cancelled"));
  } else if (!st && opt.policy == run_policy::join) {
    report.failure = st.error();
  }
  // Every run of the session ends here, on the coordinator: the handles'
  // "last run" is filled on one strand whatever runs overlap.
  detail::publish_outputs(*compiled, report, active);
  co_return report;
}

asio::any_io_executor local_session::coordinator(const impl& state) { return state.coord_ex; }

std::shared_ptr<asio::cancellation_signal> local_session::relay_cancellation(asio::cancellation_slot from,
                                                                             const impl& state) {
  return detail::forward_cancellation(from, state.coord_ex);
}

asio::awaitable<result<run_report>> local_session::run(task_group group, run_options options) {
  auto [ec, report] = co_await async_run(std::move(group), std::move(options), asio::as_tuple(asio::use_awaitable));
  co_return detail::result_of(std::move(report));
}

result<run_report> local_session::run_blocking(task_group group, run_options options) {
  if (impl_->coord.running_in_this_thread()) {
    return fail(errc::invalid_task, "run_blocking called from the session's own coordinator would deadlock");
  }
  std::future<run_report> f =
      asio::co_spawn(impl_->coord, run_here(impl_, std::move(group), std::move(options)), asio::use_future);
  try {
    return detail::result_of(f.get());
  } catch (...) {
    return detail::error_from_exception(std::current_exception());
  }
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

asio::awaitable<result<run_report>> task_group::run(run_options options) {
  local_session session(co_await asio::this_coro::executor);
  co_return co_await session.run(*this, options);
}

detail::driver_hooks& detail::test_driver_hooks() noexcept {
  static driver_hooks hooks;
  return hooks;
}

}  // namespace taskgroup
