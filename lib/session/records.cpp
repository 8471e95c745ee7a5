#include "session/run.hpp"

#include "session/workspace_reuse.hpp"

namespace taskgroup::detail {

namespace asio = boost::asio;

error task_error(std::string_view task, std::string_view node, const error& e) {
  return {e.code, "task " + quote(task) + " (node " + quote(node) + "): " + e.message};
}

error task_error(const compiled_task& ct, const error& e) { return task_error(*ct.name, *ct.node, e); }

void fill_report(task_report& out, const compiled_task& ct, const task_record& r, fetched_outputs* outputs) {
  out.name = *ct.name;
  out.node = *ct.node;
  out.status = r.status;
  if (r.failure) out.failure = *r.failure;
  out.started = r.started;
  out.finished = r.finished;
  out.iterations = r.iterations;
  out.began = r.status != task_status::not_run && !r.unstarted;
  out.attempts = out.began ? 1 + r.retries : 0;
  if (outputs != nullptr) {
    out.outputs = std::move(outputs->values);
    out.output_errors = std::move(outputs->errors);
  }
}

task_report report_of(const compiled_task& ct, const task_record& r) {
  task_report out;
  fill_report(out, ct, r, nullptr);
  return out;
}

std::shared_ptr<workspace> task_workspace(const run_state& rs, std::size_t k, std::shared_ptr<workspace>* spare) {
  const compiled_task& ct = rs.group->tasks[k];
  const std::shared_ptr<workspace>& ws = rs.nodes[ct.node_index].ws;
  if (!ct.is_private) return ws;
  if (spare != nullptr && *spare) {
    workspace_reuse::rename(**spare, *ct.name);
    return std::move(*spare);
  }
  return ws->create_child(*ct.name);
}

status end_task(run_state& rs, std::size_t k, const status& st, const step_stats& stats,
                std::chrono::system_clock::time_point finished) {
  const compiled_task& ct = rs.group->tasks[k];
  task_record& rec = rs.records[k];
  rec.finished = finished;
  rec.iterations = stats.iterations;
  // Ended by the run's cancellation, it was still there to feed a queue.
  if (ct.may_feed && (st || !st.error().is_cancelled())) --rs.nodes[ct.node_index].watch.feeders;
  if (st) {
    rec.status = task_status::succeeded;
    return ok();
  }
  rec.status = st.error().is_cancelled() ? task_status::cancelled : task_status::failed;
  rec.failure = std::make_unique<error>(task_error(ct, st.error()));
  return *rec.failure;
}

void cancel_unstarted(run_state& rs, std::size_t k) {
  rs.records[k].started = std::chrono::system_clock::now();
  rs.records[k].unstarted = true;
  (void)end_task(rs, k, error(errc::cancelled, std::string(detail::root_name(rs.group->step(k))) + ": cancelled"), {});
}

}  // namespace taskgroup::detail
