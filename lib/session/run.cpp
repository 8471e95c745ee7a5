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

// Whether the run's end is counted: tallied as its report is made.
bool counting(const run_state& rs) noexcept {
  return rs.metrics != nullptr && rs.metrics->enabled.load(std::memory_order_relaxed);
}

// The run's counts (`t`, its tasks' tallied) go to its label's series.
void count_run(run_state& rs, run_tally& t) noexcept {
  t.outcome = outcome_of(rs.report);
  t.admitted = rs.admitted;
  if (t.admitted) {
    t.queue_wait = std::chrono::duration_cast<std::chrono::nanoseconds>(rs.ticket.queued_for);
    // From the call: the queue, the hop to the coordinator and the run.
    t.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(rs.report.finished - rs.report.arrived);
  }
  metrics_series* series = rs.group ? rs.group->series : nullptr;
  if (series == nullptr) {  // refused before its group was compiled
    try {
      series = &rs.metrics->series_for(rs.source.name());
    } catch (...) {
      return;  // out of memory: the run goes uncounted
    }
  }
  series->add(t, &rs.scope);
}

// The run's report (`rs.report`, made) goes to the caller's handler, its
// counts (`tally`, when counted) to the session's metrics first: a caller
// that reads them from its handler sees its run.
void complete_run(run_state& rs, run_tally* tally) {
  if (tally != nullptr) count_run(rs, *tally);
  rs.report.group = group_access::weak_identity(rs.source);
  // Its place goes to the next run queued before its caller hears of it
  // (a caller that runs again from its handler finds the place free).
  if (rs.ticket.by != nullptr) rs.ticket.by->ended(rs);
  run_completion_ptr done = std::move(rs.done);
  // It frees itself; the report travels as a pointer into the run.
  if (done) done.release()->complete(std::shared_ptr<run_report>(rs.shared_from_this(), &rs.report));
}

void deadline_fired(const std::shared_ptr<run_state>& rs, const boost::system::error_code& ec) {
  if (ec || rs->running.load(std::memory_order_acquire) == 0 || rs->expired) return;
  rs->expired = run_timed_out(*rs->options.timeout, rs->report.trace_id);
  rs->cancel();  // the join's own cancellation: the nodes' cancelled ends are no failures
}

// The run's report, in task order, each task's made in place: a node's
// tasks are in task order in its list, so task k is at `next[node]` there.
// Each task is tallied in `tally` when given.
void make_report(run_state& rs, run_tally* tally) {
  run_report& report = rs.report;
  report.arrived = rs.arrival();
  report.started = rs.started;
  // One node, coordinated on its strand, whose last task's end was read
  // in this same handler: the run ends then too.
  const node_run* one = rs.active.size() == 1 ? &rs.nodes[rs.active.front()] : nullptr;
  const bool reuse = one != nullptr && one->node == rs.coord_node && rs.options.strict_codecs == nullptr &&
                     one->tasks_ended_at != std::chrono::system_clock::time_point{};
  report.finished = reuse ? one->tasks_ended_at : std::chrono::system_clock::now();
  const compiled_group& g = *rs.group;
  report.tasks.reserve(rs.records.size());
  boost::container::small_vector<std::size_t, 8> next(g.nodes.size(), 0);
  for (std::size_t k = 0; k < rs.records.size(); ++k) {
    const compiled_task& ct = g.tasks[k];
    std::vector<fetched_outputs>& fetched = rs.nodes[ct.node_index].outputs;
    const std::size_t j = next[ct.node_index]++;
    const task_record& r = rs.records[k];
    fill_report(report.tasks.emplace_back(), ct, r, fetched.empty() ? nullptr : &fetched[j]);
    if (tally != nullptr) {
      ++tally->tasks[static_cast<std::size_t>(r.status)];
      if (r.status != task_status::not_run && !r.unstarted) {
        tally->task_duration.add(std::chrono::duration_cast<std::chrono::nanoseconds>(r.finished - r.started));
      }
      tally->retried += r.retries;
    }
    if (rs.records[k].retries != 0) [[unlikely]] {
      for (auto& [task, errors] : rs.nodes[ct.node_index].attempt_failures) {
        if (task == k && !errors.empty()) report.retries.push_back(task_retries{k, std::move(errors)});
      }
    }
  }
}

// Starts node i on its strand; a node that cannot even be started (out of
// memory) has ended with that error.
void launch(const std::shared_ptr<run_state>& rs, std::size_t i, bool fresh_clock) {
  rs->nodes[i].live.store(true, std::memory_order_relaxed);
  rs->running.fetch_add(1, std::memory_order_relaxed);
  // The run is coordinated on this node's strand: already there.
  if (rs->nodes[i].node == rs->coord_node) return rs->nodes[i].start(rs, fresh_clock);
  try {
    asio::post(rs->nodes[i].node->executor, [rs, i] { rs->nodes[i].start(rs); });
  } catch (...) {
    rs->node_ended(i, error_from_exception(std::current_exception()));
  }
}

// The run's probe and the observer's run_begin: what may fail or throw
// (out of memory, the observer) before any node starts.
status prepare(const std::shared_ptr<run_state>& rs) {
  const run_options& opt = rs->options;
  if (opt.probe != nullptr) {
    TASKGROUP_TRY(probe_access::attach(*opt.probe, rs));
  }
  rs->observed = observe_with(opt.observer, event_source{{}, {}, rs->report.trace_id});
  if (wants(rs->observed.kinds, observe::tasks)) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& ct : rs->group->tasks) names.emplace_back(*ct.name, *ct.node);
    opt.observer->run_begin(rs->observed.at, names);
  }
  return ok();
}

}  // namespace

void run_state::round_ended(status st) {
  if (deadline) deadline->cancel();
  if (options.probe != nullptr) probe_access::detach(*options.probe, *this);
  if (options.strict_codecs != nullptr) {
    if (status sc = round_trip_outputs(*this, *options.strict_codecs); !sc && st) st = sc;
  }
  std::optional<run_tally> tally;
  if (counting(*this)) tally.emplace();
  make_report(*this, tally ? &*tally : nullptr);
  // The run's own ends (deadline, cancellation from outside) are errors
  // under every policy; a task's failure (even its own step timeout) is the
  // run's error under join only.
  if (expired) {
    report.failure = with_waiting_tasks(report.tasks, *expired);
  } else if (cancelled_outside) {
    report.failure = with_waiting_tasks(report.tasks, error(errc::cancelled, "run cancelled"));
  } else if (!st && options.policy == run_policy::join) {
    report.failure = st.error();
  }
  // Every run of the session ends here, on the coordinator: the handles'
  // "last run" is filled on one strand whatever runs overlap.
  publish_outputs(*group, report, active);
  complete_run(*this, tally ? &*tally : nullptr);
}

void run_state::cancel_running() noexcept {
  for (std::size_t i : active) {
    if (!nodes[i].live.load(std::memory_order_relaxed)) continue;  // ended (a stop would find it so)
    try {
      asio::post(nodes[i].node->executor, [rs = shared_from_this(), i] { rs->nodes[i].stop(); });
    } catch (...) {
      // Out of memory: that node runs to its end.
    }
  }
}

void run_state::node_ended(std::size_t i, status st) {
  nodes[i].live.store(false, std::memory_order_relaxed);
  // The join (on the coordinator) needs a failure; a success tells it
  // nothing. So a node that succeeds and is not the last ends here: two
  // nodes that end together on two threads would otherwise meet on the
  // coordinator, and the second would wait for it behind every handler
  // queued on the context. acq_rel: the last one's decrement sees every
  // node's writes (records, outputs), which the report then reads.
  if (st && running.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last node to end, or a failure, which counts itself out there.
  auto told = [](run_state& rs, const status& ended) {
    if (!ended) {
      rs.child_ended(ended);
      if (rs.running.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    }
    rs.complete();
  };
  // Coordinated on this node's strand: already there.
  if (nodes[i].node == coord_node) return told(*this, st);
  asio::dispatch(*coord, [rs = shared_from_this(), told, st = std::move(st)] { told(*rs, st); });
}

void join_trace(run_state& rs) {
  rs.scope.group = rs.source.name();
  result<trace_context> trace = run_trace(rs.options.trace_parent);
  if (trace) {
    rs.scope.trace = trace.value();
  } else {
    rs.scope.trace = trace_context::fresh();  // the run still has one, refused at its begin
    rs.trace_fault = std::move(trace).error();
  }
  // Its events and its report name the trace from the start.
  rs.report.trace = rs.scope.trace;
  rs.report.trace_id = rs.scope.trace.trace_id_hex();
}

void lay_out(run_state& rs) {
  const compiled_group& g = *rs.group;
  rs.records.resize(g.tasks.size());
  rs.nodes.make(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    rs.nodes[i].index = i;
    rs.nodes[i].compiled = &g.nodes[i];
  }
}

void refuse_run(const std::shared_ptr<run_state>& rs, const error& e) {
  // A run that never began (shed, or withdrawn from the admission queue)
  // starts and ends now.
  if (rs->started == std::chrono::system_clock::time_point{}) rs->started = std::chrono::system_clock::now();
  run_report refused = refused_report(rs->source, e, rs->started);
  refused.arrived = rs->arrival();
  refused.trace = rs->report.trace;
  refused.trace_id = std::move(rs->report.trace_id);
  rs->report = std::move(refused);
  if (!counting(*rs)) return complete_run(*rs, nullptr);
  run_tally tally;
  tally.tasks[static_cast<std::size_t>(task_status::not_run)] = rs->report.tasks.size();
  complete_run(*rs, &tally);
}

void start_nodes(const std::shared_ptr<run_state>& rs) {
  // A failure here refuses the run, wherever start_nodes is called from
  // (the session's begin, or the completion of the remote nets' setup).
  status ready = ok();
  try {
    ready = prepare(rs);
  } catch (...) {
    ready = error_from_exception(std::current_exception());
  }
  if (!ready) return refuse_run(rs, ready.error());
  const run_options& opt = rs->options;
  rs->rule_ = join_rule(opt.policy == run_policy::gather ? join_mode::gather : join_mode::fail_fast);
  rs->await_directly();
  rs->nodes_started = true;
  // Cancelled before any node started (perhaps before its cancellation
  // has reached the coordinator): nothing runs.
  if (rs->cancel_asked.load(std::memory_order_acquire)) rs->cancelled_outside = true;
  if (rs->cancelled_outside) {
    rs->rule_.cancelled_from_outside();
    return rs->complete();
  }
  if (opt.timeout && rs->ticket.arrived != std::chrono::steady_clock::time_point{}) {
    // It waited for admission: its deadline counts from its arrival.
    rs->deadline.emplace(*rs->coord, rs->ticket.arrived + *opt.timeout);
    rs->scope.deadline = rs->deadline->expiry();
    rs->deadline->async_wait([rs](const boost::system::error_code& ec) { deadline_fired(rs, ec); });
  } else if (opt.timeout) {
    rs->deadline.emplace(*rs->coord, *opt.timeout);
    rs->scope.deadline = rs->deadline->expiry();
    rs->deadline->async_wait([rs](const boost::system::error_code& ec) { deadline_fired(rs, ec); });
  }
  // Counted before any starts: a node that ends at once must not end the
  // run before the others started.
  // The run's start read in this handler, and no observer's run_begin
  // since.
  const bool fresh = std::exchange(rs->started_fresh, false) && rs->observed.observer == nullptr;
  rs->in_view_since.store(rs->started.time_since_epoch().count(), std::memory_order_release);
  rs->running.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i : rs->active) launch(rs, i, fresh);
  if (rs->running.fetch_sub(1, std::memory_order_acq_rel) == 1) rs->complete();
}

void cancel_run(const std::shared_ptr<run_state>& rs) {
  if (!rs->done || rs->cancelled_outside) return;  // ended, or asked already
  rs->cancelled_outside = true;
  if (rs->ticket.by != nullptr && rs->ticket.by->withdraw(*rs)) {
    return refuse_run(rs, error(errc::cancelled, "run cancelled while waiting for admission"));
  }
  if (!rs->nodes_started) return;  // start_nodes sees it
  rs->cancel_from_outside();
}

void follow_cancellation(const std::shared_ptr<run_state>& rs) {
  asio::cancellation_slot slot = rs->done->slot();
  if (!slot.is_connected()) return;
  slot.assign([weak = std::weak_ptr<run_state>(rs)](asio::cancellation_type_t type) {
    std::shared_ptr<run_state> asked = weak.lock();
    if (!asked) return;
    // Total cancellation cannot be honoured once a run has begun (it has
    // had effects): it reaches only a run still waiting for admission.
    if ((type & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none) {
      if (asked->ticket.by == nullptr) return;
      asio::dispatch(*asked->coord, [weak] {
        std::shared_ptr<run_state> run = weak.lock();
        if (run && run->done && run->ticket.by->withdraw(*run)) {
          refuse_run(run, error(errc::cancelled, "run cancelled while waiting for admission"));
        }
      });
      return;
    }
    asked->cancel_asked.store(true, std::memory_order_release);
    asio::dispatch(*asked->coord, [weak] {
      if (std::shared_ptr<run_state> run = weak.lock()) cancel_run(run);
    });
  });
}

}  // namespace taskgroup::detail
