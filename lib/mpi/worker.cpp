// taskgroup: the part of a run of the MPI protocol on ranks other than 0:
// START, this rank's tasks, STATUS, then CTRL (docs/mpi-protocol.md).
#include "mpi/fingerprint.hpp"
#include "mpi/liveness.hpp"
#include "mpi/run.hpp"
#include "mpi/transport.hpp"
#include "mpi/wire.hpp"

#include "session/report.hpp"

#include <boost/asio/this_coro.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail::mpi {

namespace asio = boost::asio;

namespace {

// While a worker runs its tasks, their outputs are fetched as the node
// workspaces' blobs themselves (output_state::borrow), so that STATUS sends
// them from there without a copy.
class borrowed_outputs {
 public:
  borrowed_outputs(const task_group& g, const std::map<std::string, int>& where, int rank) {
    for (const auto& t : g.tasks()) {
      if (where.at(t.node_name()) != rank) continue;
      for (const auto& out : detail::task_access::outputs(t)) {
        out->borrow = true;
        states_.push_back(out);
      }
    }
  }
  ~borrowed_outputs() {
    for (const auto& out : states_) out->borrow = false;
  }
  borrowed_outputs(const borrowed_outputs&) = delete;
  borrowed_outputs& operator=(const borrowed_outputs&) = delete;

 private:
  std::vector<std::shared_ptr<detail::output_state>> states_;
};

// Once sent, borrowed values are copied for the worker's own report and
// output handles (what a local run gives), so that those do not change
// with the workspace in later runs. A value that cannot be copied leaves
// its handle with the copy's error and the report without it.
void keep_copies(const state_ptr& s, const task_group& group, run_report& report) {
  for (std::size_t k = 0; k < report.tasks.size() && k < group.tasks().size(); ++k) {
    task_report& rep = report.tasks[k];
    if (rep.outputs.empty()) continue;
    auto ws = s->local->node_workspace(rep.node);
    std::map<const blob*, std::shared_ptr<const blob>> copies;
    std::map<const blob*, error> failures;
    for (auto& [name, value] : rep.outputs) {
      if (value.get() != ws->find(name)) continue;  // a copy already
      auto copy = value->clone();
      if (copy) {
        copies[value.get()] = std::make_shared<const blob>(std::move(copy).value());
      } else {
        failures.emplace(value.get(), copy.error());
      }
    }
    if (copies.empty() && failures.empty()) continue;
    for (const auto& out : detail::task_access::outputs(group.tasks()[k])) {
      for (std::size_t i = 0; i < out->values.size(); ++i) {
        const blob* b = out->values[i].get();
        if (auto it = failures.find(b); it != failures.end()) {
          out->failure = std::make_unique<const error>(
              it->second.with_context("task " + quote(out->task) + " output " + quote(out->blobs.at(i))));
          out->set = false;
          out->values.clear();
          break;
        }
        if (auto it = copies.find(b); it != copies.end()) out->values[i] = it->second;
      }
    }
    std::erase_if(rep.outputs, [&](const auto& kv) { return failures.count(kv.second.get()) != 0; });
    for (auto& kv : rep.outputs) {
      if (auto it = copies.find(kv.second.get()); it != copies.end()) kv.second = it->second;
    }
  }
}

// Waits for rank 0's START, noting a cancellation from outside meanwhile
// (answered once the run is known). Ends the job when `watchdog` passes
// first. Errors: a START that cannot be decoded, MPI's.
asio::awaitable<result<start_message>> await_start(const state_ptr& s, run_ctx& ctx, pacer& pace,
                                                   std::optional<clock_type::time_point> watchdog,
                                                   bool& cancelled_outside) {
  std::string bytes;
  int from = 0;
  for (;;) {
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;
    }
    if (try_receive(s, ctx, 0, tag_start, bytes, from)) {
      auto m = decode_start(bytes);
      if (!m) co_return m.error().with_context("rank " + std::to_string(s->rank) + ": the run's start from rank 0");
      co_return std::move(m).value();
    }
    if (ctx.mpi_error) co_return *ctx.mpi_error;
    if (watchdog && clock_type::now() >= *watchdog) abort_job(s, "rank 0 did not start the run in time");
    co_await pace.wait(ctx, false, watchdog);
  }
}

// Why this rank does not run what `start` asks for, if it does not: another
// run, another group, an output type without a codec, a feed that does not
// decode, a cancellation. Otherwise `fed` holds the feeds rank 0 sent.
std::optional<error> refusal(const state_ptr& s, const task_group& group, const start_message& start,
                             std::uint64_t run_id, const result<std::shared_ptr<const group_description>>& described,
                             bool cancelled_outside, feeds& fed) {
  if (start.run_id != run_id) {
    return error(errc::group_mismatch,
                 "is at run " + std::to_string(run_id) + ", rank 0 at run " + std::to_string(start.run_id));
  }
  if (!described) return described.error();
  if (start.fingerprint != described.value()->text) {
    return group_mismatch(s->rank, split_lines(start.fingerprint), described.value()->lines);
  }
  if (auto st = check_output_codecs(group, *s->options.codecs); !st) return st.error();
  auto decoded = decode_feeds(*s->options.codecs, start.feeds);
  if (!decoded) return decoded.error();
  fed = std::move(decoded).value();
  if (cancelled_outside) return error(errc::cancelled, "run cancelled");
  return std::nullopt;
}

// The other ranks' tasks in this rank's report: their status and failure
// from DONE (their outputs stay on rank 0).
void merge_others(run_report& local, std::vector<std::pair<task_status, std::optional<error>>>& others) {
  if (others.size() != local.tasks.size()) return;
  for (std::size_t k = 0; k < others.size(); ++k) {
    task_report& t = local.tasks[k];
    if (t.status != task_status::not_run) continue;
    t.status = others[k].first;
    t.failure = std::move(others[k].second);
  }
}

// The report of this rank's part names the run's trace context (its
// trace id and the run's span, as on rank 0), not the one its local run
// made (a child span of that), so that every rank's trace file hangs its
// spans under the same run span.
run_report under_run(run_report r, const run_ctx& ctx) {
  if (ctx.trace.valid()) {
    r.trace = ctx.trace;
    r.trace_id = ctx.trace.trace_id_hex();
  }
  return r;
}

// This rank's report of a failed run: its local report when it has one
// (what its own tasks and, from DONE, the others did), else every task
// not run.
run_report failed_report(run_ctx* ctx, const task_group& group, error e) {
  run_report* mine = ctx != nullptr ? ctx->local_report() : nullptr;
  if (mine == nullptr) {
    run_report r = refused_report(group, std::move(e), std::chrono::system_clock::now());
    return ctx != nullptr ? under_run(std::move(r), *ctx) : r;
  }
  run_report r = under_run(std::move(*mine), *ctx);
  r.failure = std::move(e);
  return r;
}

// Rank 0's heartbeats in (they come until its CTRL: `ctrl_seen` stops the
// watch), this rank's out until its STATUS is sent. Once rank 0 has been
// silent for lost_after: this rank's tasks cancelled, its sends to rank 0
// given up, and the run's error.
std::optional<error> watch_rank0(const state_ptr& s, run_ctx& ctx, liveness& live, std::uint64_t beat_id,
                                 bool status_sent, bool ctrl_seen) {
  std::string bytes;
  int from = 0;
  while (try_receive(s, ctx, 0, tag_heartbeat, bytes, from)) {
    auto id = decode_heartbeat(bytes);
    if (id && id.value() == beat_id) live.heard(0);
  }
  if (!status_sent && live.beat_due()) send(s, ctx, 0, tag_heartbeat, encode_heartbeat(beat_id));
  if (ctrl_seen || !live.silent(0)) return std::nullopt;
  abandon_sends(s, ctx, 0);
  cancel_local(ctx);
  return live.lost(0);
}

// This rank's part of the run, unless it is refused (the refusal is then
// its local result): its nodes started on the local session with rank 0's
// policy and feeds, their outputs borrowed while they run.
void start_part(const state_ptr& s, const std::shared_ptr<run_ctx>& ctx, const task_group& group,
                const run_options& options, const start_message& start, std::uint64_t run_id, bool cancelled_outside,
                std::optional<borrowed_outputs>& borrowed) {
  auto described = describe_group(*s, group);
  feeds fed;
  ctx->trace = start.trace;
  if (auto refused = refusal(s, group, start, run_id, described, cancelled_outside, fed)) {
    ctx->local_done = true;
    ctx->local = *refused;
    return;
  }
  run_options local = options;
  local.policy = start.policy;
  local.trace_parent = start.trace.traceparent();
  local.feeds = std::move(fed);  // rank 0's: this rank's own are not read
  borrowed.emplace(group, described.value()->where, s->rank);
  start_local(s, ctx, group, described.value()->where, local);
}

// STATUS to rank 0: this rank's report, its values as payloads.
void send_status(const state_ptr& s, run_ctx& ctx, std::uint64_t run_id) {
  status_message m = encode_status(*s->options.codecs, run_id, ctx.local, ctx.local ? nullptr : ctx.local_report(),
                                   clock_sample{ctx.start_ns, wall_now_ns()});
  send(s, ctx, 0, tag_status, std::move(m.bytes));
  for (auto& p : m.payloads) send_bytes(s, ctx, 0, tag_payload, p.bytes, std::move(p.keep));
}

// This rank's report once the run is over: its own tasks' with copies of
// their outputs, the others' statuses from rank 0's CTRL (`others`), and
// the run's failure (`ctrl`, rank 0's word) if any.
run_report worker_report(const state_ptr& s, run_ctx& ctx, const task_group& group,
                         std::vector<std::pair<task_status, std::optional<error>>>& others,
                         const std::optional<error>& ctrl) {
  if (ctx.local) keep_copies(s, group, ctx.local.value());
  if (run_report* mine = ctx.local_report()) merge_others(*mine, others);
  if (ctrl) return failed_report(&ctx, group, *ctrl);
  if (!ctx.local) return failed_report(nullptr, group, ctx.local.error());
  return under_run(std::move(ctx.local).value(), ctx);
}

}  // namespace

asio::awaitable<run_report> run_worker(state_ptr s, task_group group, run_options options, std::uint64_t run_id) {
  auto ctx = std::make_shared<run_ctx>(co_await asio::this_coro::executor);
  bool cancelled_outside = false;
  pacer pace(s->options);
  // A watchdog while waiting for rank 0: this rank's own deadline, if any.
  std::optional<clock_type::time_point> watchdog;
  if (options.timeout) watchdog = deadline_after(deadline_after(clock_type::now(), *options.timeout), s->options.grace);
  auto start = co_await await_start(s, *ctx, pace, watchdog, cancelled_outside);
  ctx->start_ns = wall_now_ns();
  if (!start) co_return failed_report(nullptr, group, start.error());
  if (start.value().failure) {  // rank 0 told everyone not to start
    co_return failed_report(nullptr, group, *start.value().failure);
  }

  std::optional<borrowed_outputs> borrowed;
  start_part(s, ctx, group, options, start.value(), run_id, cancelled_outside, borrowed);
  watchdog.reset();
  if (start.value().timeout) {
    watchdog = deadline_after(deadline_after(clock_type::now(), *start.value().timeout), s->options.grace);
  }

  std::string bytes;
  int from = 0;
  bool status_sent = false;
  // Rank 0's heartbeats come until its CTRL; this rank's go until its
  // STATUS. Rank 0 silent for lost_after before its CTRL is lost.
  liveness live(s->options, s->size);
  const std::uint64_t beat_id = start.value().run_id;
  std::optional<error> lost;
  std::optional<std::optional<error>> ctrl;                          // set once CTRL arrived
  std::vector<std::pair<task_status, std::optional<error>>> others;  // from DONE
  for (;;) {
    bool progressed = false;
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;
      progressed = true;
      cancel_local(*ctx);
    }
    if (!ctrl && try_receive(s, *ctx, 0, tag_ctrl, bytes, from)) {
      progressed = true;
      auto c = decode_ctrl(bytes, run_id);
      ctrl = c ? c.value().e : std::optional<error>(c.error());
      if (c) others = std::move(c.value().tasks);
      if (*ctrl) cancel_local(*ctx);
    }
    if (!lost && (lost = watch_rank0(s, *ctx, live, beat_id, status_sent, ctrl.has_value()))) progressed = true;
    if (lost) {
      if (!ctx->local_done) {
        co_await pace.wait(*ctx, progressed, watchdog);
        continue;
      }
      abandon_sends(s, *ctx, 0);
      if (ctx->local) keep_copies(s, group, ctx->local.value());
      co_return failed_report(ctx.get(), group, *lost);
    }
    if (ctx->local_done && !status_sent) {
      progressed = true;
      status_sent = true;
      send_status(s, *ctx, run_id);
    }
    // Pending sends keep the loop polling closely: a large value only
    // moves while this rank calls into MPI.
    progressed = progress_sends(*ctx) || !ctx->sends.empty() || progressed;
    if (ctx->mpi_error) {
      cancel_local(*ctx);
      if (ctx->local_done) {
        if (ctx->local) keep_copies(s, group, ctx->local.value());
        co_return failed_report(ctx.get(), group, *ctx->mpi_error);
      }
    }
    if (status_sent && ctrl && ctx->sends.empty()) break;
    if (watchdog && clock_type::now() >= *watchdog) {
      abort_job(s, "no word from rank 0 within the run's deadline and the grace period");
    }
    co_await pace.wait(*ctx, progressed, watchdog);
  }
  // The heartbeats rank 0 sent before its CTRL have arrived by now.
  (void)watch_rank0(s, *ctx, live, beat_id, true, true);
  co_return worker_report(s, *ctx, group, others, *ctrl);
}

}  // namespace taskgroup::detail::mpi
