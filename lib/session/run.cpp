// A run as a whole, on the session's coordinator strand: its nodes started
// and joined, its deadline, cancellation from outside, its report.
#include "session/run.hpp"

#include "detail/errors.hpp"
#include "session/report.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/container/small_vector.hpp>

#include <exception>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

void complete(const std::shared_ptr<run_state>& rs, run_report report) {
  report.group = group_access::identity(rs->source);
  std::unique_ptr<run_completion> done = std::move(rs->done);
  if (done) done->complete(std::move(report));
}

// Asks every node that runs to stop (the join's own cancellation: their
// cancelled ends are no failures).
void cancel_nodes(const std::shared_ptr<run_state>& rs) {
  rs->nodes_rule.cancelling();
  for (std::size_t i : rs->active) {
    if (rs->running[i] == 0) continue;
    try {
      asio::post(rs->nodes[i]->executor, [rs, i] { cancel_node(*rs, i); });
    } catch (...) {
      // Out of memory: that node runs to its end.
    }
  }
}

void deadline_fired(const std::shared_ptr<run_state>& rs, const boost::system::error_code& ec) {
  if (ec || rs->nodes_left == 0 || rs->expired) return;
  rs->expired = error(errc::timeout, "run timed out after " + std::to_string(rs->options.timeout->count()) + " ms");
  cancel_nodes(rs);
}

void finish(const std::shared_ptr<run_state>& rs) {
  if (rs->deadline) rs->deadline->cancel();
  const run_options& opt = rs->options;
  status st = rs->nodes_rule.result();
  if (opt.probe != nullptr) probe_access::detach(*opt.probe, *rs);
  if (opt.strict_codecs != nullptr) {
    if (status sc = round_trip_outputs(*rs, rs->active, *opt.strict_codecs); !sc && st) st = sc;
  }
  run_report report;
  report.started = rs->started;
  report.finished = std::chrono::system_clock::now();
  // In task order, each report made in place: a node's tasks are in task
  // order in its list, so task k is at `next[node]` there.
  const compiled_group& g = *rs->group;
  report.tasks.reserve(rs->records.size());
  boost::container::small_vector<std::size_t, 8> next(g.nodes.size(), 0);
  for (std::size_t k = 0; k < rs->records.size(); ++k) {
    const compiled_task& ct = g.tasks[k];
    std::vector<fetched_outputs>& fetched = rs->outputs[ct.node_index];
    const std::size_t j = next[ct.node_index]++;
    fill_report(report.tasks.emplace_back(), ct, rs->records[k], fetched.empty() ? nullptr : &fetched[j]);
  }
  // The run's own ends (deadline, cancellation from outside) are errors
  // under every policy; a task's failure (even its own step timeout) is the
  // run's error under join only.
  if (rs->expired) {
    report.failure = with_waiting_tasks(report.tasks, *rs->expired);
  } else if (rs->cancelled_outside) {
    report.failure = with_waiting_tasks(report.tasks, error(errc::cancelled, "run cancelled"));
  } else if (!st && opt.policy == run_policy::join) {
    report.failure = st.error();
  }
  // Every run of the session ends here, on the coordinator: the handles'
  // "last run" is filled on one strand whatever runs overlap.
  publish_outputs(g, report, rs->active);
  complete(rs, std::move(report));
}

// Starts node i on its strand; a node that cannot even be started (out of
// memory) has ended with that error.
void launch(const std::shared_ptr<run_state>& rs, std::size_t i) {
  rs->running[i] = 1;
  ++rs->nodes_left;
  try {
    asio::post(rs->nodes[i]->executor, [rs, i] { start_node(rs, i); });
  } catch (...) {
    node_ended(rs, i, error_from_exception(std::current_exception()));
  }
}

}  // namespace

void refuse_run(const std::shared_ptr<run_state>& rs, const error& e) {
  complete(rs, refused_report(rs->source, e, rs->started));
}

namespace {

// The run's bookkeeping, its probe and the observer's run_begin: what may
// fail or throw (out of memory, the observer) before any node starts.
status prepare_nodes(const std::shared_ptr<run_state>& rs) {
  const compiled_group& g = *rs->group;
  const run_options& opt = rs->options;
  const std::size_t nodes = g.nodes.size();
  rs->records.resize(g.tasks.size());
  rs->outputs.resize(nodes);
  rs->workspaces.resize(nodes);
  rs->watch.resize(nodes);
  rs->running.assign(nodes, 0);
  rs->parts = std::make_unique<node_part[]>(nodes);
  if (opt.probe != nullptr) {
    TASKGROUP_TRY(probe_access::attach(*opt.probe, rs));
  }
  if (opt.observer != nullptr) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& ct : g.tasks) names.emplace_back(*ct.name, *ct.node);
    opt.observer->run_begin(names);
  }
  return ok();
}

}  // namespace

void start_nodes(const std::shared_ptr<run_state>& rs) {
  // A failure here refuses the run, wherever start_nodes is called from
  // (the session's begin, or the completion of the remote nets' setup).
  status ready = ok();
  try {
    ready = prepare_nodes(rs);
  } catch (...) {
    ready = error_from_exception(std::current_exception());
  }
  if (!ready) return refuse_run(rs, ready.error());
  const run_options& opt = rs->options;
  rs->nodes_rule = join_rule(opt.policy == run_policy::gather ? join_mode::gather : join_mode::fail_fast);
  rs->nodes_started = true;
  // Cancelled before any node started (perhaps before its cancellation
  // has reached the coordinator): nothing runs.
  if (rs->cancel_asked.load(std::memory_order_acquire)) rs->cancelled_outside = true;
  if (rs->cancelled_outside) return finish(rs);
  if (opt.timeout) {
    rs->deadline.emplace(rs->coord, *opt.timeout);
    rs->deadline->async_wait([rs](const boost::system::error_code& ec) { deadline_fired(rs, ec); });
  }
  // Counted before any starts: a node that ends at once must not end the
  // run before the others started.
  ++rs->nodes_left;
  for (std::size_t i : rs->active) launch(rs, i);
  if (--rs->nodes_left == 0) finish(rs);
}

void node_ended(const std::shared_ptr<run_state>& rs, std::size_t i, status st) {
  rs->running[i] = 0;
  if (rs->nodes_rule.child_ended(st)) cancel_nodes(rs);
  if (--rs->nodes_left == 0) finish(rs);
}

void cancel_run(const std::shared_ptr<run_state>& rs) {
  if (!rs->done || rs->cancelled_outside) return;  // ended, or asked already
  rs->cancelled_outside = true;
  if (!rs->nodes_started) return;  // start_nodes sees it
  rs->nodes_rule.cancelled_from_outside();
  cancel_nodes(rs);
}

void follow_cancellation(const std::shared_ptr<run_state>& rs) {
  asio::cancellation_slot slot = rs->done->slot();
  if (!slot.is_connected()) return;
  slot.assign([weak = std::weak_ptr<run_state>(rs), coord = rs->coord](asio::cancellation_type_t type) {
    // Total cancellation cannot be honoured (a run that has started has
    // had effects): only terminal and partial reach the run.
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none)
      return;
    std::shared_ptr<run_state> asked = weak.lock();
    if (!asked) return;
    asked->cancel_asked.store(true, std::memory_order_release);
    asio::dispatch(coord, [weak] {
      if (std::shared_ptr<run_state> run = weak.lock()) cancel_run(run);
    });
  });
}

}  // namespace taskgroup::detail
