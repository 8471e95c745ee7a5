// taskgroup: rank 0's part of a run of the MPI protocol: it starts the run
// on every rank, gathers their STATUS and ends the run with CTRL
// (docs/mpi-protocol.md).
#include "mpi/fingerprint.hpp"
#include "mpi/liveness.hpp"
#include "mpi/recycling.hpp"
#include "mpi/run.hpp"
#include "mpi/transport.hpp"
#include "mpi/wire.hpp"

#include "model/limits.hpp"
#include "session/report.hpp"

#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <chrono>
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

// Fills the output handles of a task that ran on another rank.
void set_outputs(const task& t, const task_report& rep) {
  for (const auto& out : detail::task_access::outputs(t)) detail::set_output(*out, rep);
}

// Rank 0's side of decoding a rank's STATUS: receives its detached values
// (into the storage of earlier ones when it can) and fills the output
// handles of each task once decoded.
class client_receiver final : public status_receiver {
 public:
  // `observer`: the run's when it asked for task events, else null.
  client_receiver(const state_ptr& s, int from, const task_group& group, const run_report& report,
                  run_observer* observer)
      : s_(s), from_(from), group_(group), report_(report), observer_(observer) {}

  result<std::shared_ptr<const blob>> receive_detached(std::size_t task, const std::string& output,
                                                       const std::string& tag, std::uint64_t size) override {
    return mpi::receive_detached(s_, from_, tag, size, take_reusable(group_.tasks()[task], output));
  }

  void task_decoded(std::size_t task) override {
    const task_report& t = report_.tasks[task];
    set_outputs(group_.tasks()[task], t);
    if (observer_ != nullptr) {
      const event_source at{t.name, t.node, report_.trace_id};
      observer_->task_begin(at);
      observer_->task_end(at, t);
    }
  }

 private:
  const state_ptr& s_;
  int from_;
  const task_group& group_;
  const run_report& report_;
  run_observer* observer_;
};

// The feeds of each rank's nodes, encoded by the session's codecs, after
// the check a local run makes of them (so refused on every rank alike).
// Rank 0's own are decoded again into `own`, so that its tasks read what
// they would on another rank. Errors: the check's, a feed that cannot be
// encoded or decoded, naming it.
result<std::vector<std::vector<wire_feed>>> feeds_by_rank(const state_ptr& s, const task_group& group,
                                                          const feeds& given, const std::map<std::string, int>& where,
                                                          feeds& own) {
  TASKGROUP_TRY(check_feeds(group, given));
  if (given.empty()) return std::vector<std::vector<wire_feed>>();  // the common case: nothing to encode
  std::vector<std::vector<wire_feed>> out(static_cast<std::size_t>(s->size));
  for (const auto& f : given.entries()) {
    TASKGROUP_TRY(auto encoded, encode_feed(*s->options.codecs, f));
    auto r = where.find(f.node);  // every fed node has a task (checked)
    out[r == where.end() ? 0 : static_cast<std::size_t>(r->second)].push_back(std::move(encoded));
  }
  auto decoded = decode_feeds(*s->options.codecs, out[0]);
  if (!decoded) return decoded.error().with_context("rank 0");
  own = std::move(decoded).value();
  return out;
}

// Sends START to every rank: the run with the feeds of its nodes, or the
// error that keeps every rank from starting it (then returned). Fills
// `own` with rank 0's feeds.
std::optional<error> send_start(const state_ptr& s, run_ctx& ctx, std::uint64_t run_id, const task_group& group,
                                const run_options& options,
                                const result<std::shared_ptr<const group_description>>& described, feeds& own) {
  start_message start;
  start.run_id = run_id;
  start.policy = options.policy;
  start.timeout = options.timeout;
  std::vector<std::vector<wire_feed>> fed;
  result<trace_context> trace = run_trace(options.trace_parent);
  // Refused as the local session refuses it, and on every rank alike.
  if (std::string f = run_timeout_fault(options.timeout); !f.empty()) {
    start.failure = error(errc::invalid_task, "run_options::timeout " + f);
  } else if (!trace) {
    start.failure = trace.error();
  } else if (!described) {
    start.failure = described.error();
  } else if (auto by_rank = feeds_by_rank(s, group, options.feeds, described.value()->where, own); !by_rank) {
    start.failure = by_rank.error();
  } else {
    start.fingerprint = described.value()->text;
    fed = std::move(by_rank).value();
    start.trace = ctx.trace = trace.value();
  }
  ctx.start_ns = wall_now_ns();
  if (start.failure || options.feeds.empty()) {
    const std::string start_bytes = encode_start(start);
    for (int r = 1; r < s->size; ++r) send(s, ctx, r, tag_start, start_bytes);
    return start.failure;
  }
  for (int r = 1; r < s->size; ++r) {
    start.feeds = std::move(fed[static_cast<std::size_t>(r)]);
    send(s, ctx, r, tag_start, encode_start(start));
  }
  return std::nullopt;
}

// Waits until every send has completed (or MPI failed).
asio::awaitable<void> flush_sends(const state_ptr& s, run_ctx& ctx) {
  pacer pace(s->options);
  while (!ctx.sends.empty() && !ctx.mpi_error) {
    const bool progressed = progress_sends(ctx);
    if (ctx.sends.empty()) break;
    co_await pace.wait(ctx, progressed, std::nullopt);
  }
}

// Rank 0's view of a run once started: who answered, who was told how it
// ended, the run's first error and its clocks. Each step of the polling
// loop returns true when it made progress.
class client_run {
 public:
  client_run(state_ptr s, const task_group& group, const run_options& options, std::uint64_t run_id,
             std::shared_ptr<run_ctx> ctx)
      : s_(std::move(s)),
        group_(group),
        options_(options),
        run_id_(run_id),
        ctx_(std::move(ctx)),
        answered_(static_cast<std::size_t>(s_->size), false),
        told_(static_cast<std::size_t>(s_->size), false),
        live_(s_->options, s_->size) {
    answered_[0] = told_[0] = true;
    // Asked once, as a local run asks it.
    if (options_.observer != nullptr && wants(options_.observer->interests(), observe::tasks)) {
      tasks_observer_ = options_.observer;
    }
    if (options_.timeout) deadline_ = deadline_after(clock_type::now(), *options_.timeout);
    report_.trace = ctx_->trace;
    report_.trace_id = ctx_->trace.trace_id_hex();
  }

  // The report's frame, the observer's run_begin, and this rank's tasks
  // (fed `own`).
  void begin(const std::map<std::string, int>& where, feeds own) {
    report_.arrived = report_.started = std::chrono::system_clock::now();
    for (const auto& t : group_.tasks()) {
      task_report& rep = report_.tasks.emplace_back();
      rep.name = t.name();
      rep.node = t.node_name();
    }
    if (tasks_observer_ != nullptr) {
      std::vector<std::pair<std::string, std::string>> names;
      for (const auto& t : report_.tasks) names.emplace_back(t.name, t.node);
      tasks_observer_->run_begin(event_source{{}, {}, report_.trace_id}, names);
    }
    run_options local = options_;
    local.feeds = std::move(own);
    local.trace_parent = report_.trace.traceparent();
    start_local(s_, ctx_, group_, where, std::move(local));
  }

  // The run's error: CANCEL to every rank not yet told, this rank's tasks
  // cancelled, and the grace period started. Only the first counts.
  void fail_run(error e) {
    if (first_) return;
    first_ = std::move(e);
    for (int r = 1; r < s_->size; ++r) {
      if (!told_[static_cast<std::size_t>(r)]) {
        send(s_, *ctx_, r, tag_ctrl, encode_ctrl(run_id_, first_));
        told_[static_cast<std::size_t>(r)] = true;
      }
    }
    cancel_local(*ctx_);
    grace_until_ = deadline_after(clock_type::now(), s_->options.grace);
  }

  // A cancellation from outside: the run's error, unless it already has one.
  void cancelled_outside() {
    if (first_) return;
    fail_run(error(errc::cancelled, "run cancelled"));
    stuck_ = true;
  }

  // Takes in this rank's own reports once its tasks have ended.
  bool take_local() {
    if (!ctx_->local_done || local_seen_) return false;
    local_seen_ = true;
    const run_report* local = ctx_->local_report();
    if (local != nullptr) {
      for (std::size_t k = 0; k < report_.tasks.size(); ++k) {
        const task_report& mine = local->tasks[k];
        if (mine.status != task_status::not_run) report_.tasks[k] = mine;
      }
      for (const task_retries& r : local->retries) keep_retries(report_, r);
    }
    if (!ctx_->local) fail_run(ctx_->local.error().with_context("rank 0"));
    return true;
  }

  // Decodes every STATUS that has arrived.
  bool receive_statuses() {
    bool progressed = false;
    int from = 0;
    while (try_receive(s_, *ctx_, MPI_ANY_SOURCE, tag_status, bytes_, from)) {
      progressed = true;
      answered_[static_cast<std::size_t>(from)] = true;
      detached_counts counts;
      const std::int64_t seen_ns = wall_now_ns();  // before its detached values arrive
      client_receiver receiver(s_, from, group_, report_, tasks_observer_);
      auto got = decode_status(from, run_id_, bytes_, *s_->options.codecs, report_, receiver, counts);
      if (counts.received < counts.announced) drain_detached(s_, from, counts.announced - counts.received);
      if (got && got.value().clock.start_seen_ns != 0) tell_clock(from, seen_ns, got.value().clock);
      if (!got) {
        fail_run(got.error());
      } else if (got.value().e) {
        fail_run(*got.value().e);
      }
    }
    return progressed;
  }

  // The observer hears how rank `from`'s clock stands against this one's.
  void tell_clock(int from, std::int64_t seen_ns, clock_sample sample) {
    if (tasks_observer_ == nullptr) return;
    const clock_estimate c = estimate_offset(ctx_->start_ns, seen_ns, sample);
    tasks_observer_->rank_clock(event_source{{}, {}, report_.trace_id}, from, c.offset, c.round_trip);
  }

  // Heartbeats in (any run's: a late one of an earlier run is dropped) and
  // out (to every rank not yet told how the run ended), and ranks lost: a
  // rank silent for lost_after before its STATUS fails the run, and
  // nothing more is expected from or sent to it.
  bool watch() {
    int from = 0;
    while (try_receive(s_, *ctx_, MPI_ANY_SOURCE, tag_heartbeat, bytes_, from)) {
      auto id = decode_heartbeat(bytes_);
      if (id && id.value() == run_id_) live_.heard(from);
    }
    if (live_.beat_due()) {
      const std::string beat = encode_heartbeat(run_id_);
      for (int r = 1; r < s_->size; ++r) {
        if (!told_[static_cast<std::size_t>(r)]) send(s_, *ctx_, r, tag_heartbeat, beat);
      }
    }
    bool progressed = false;
    for (int r = 1; r < s_->size; ++r) {
      if (answered_[static_cast<std::size_t>(r)] || !live_.silent(r)) continue;
      answered_[static_cast<std::size_t>(r)] = told_[static_cast<std::size_t>(r)] = true;
      abandon_sends(s_, *ctx_, r);
      fail_run(live_.lost(r));
      progressed = true;
    }
    return progressed;
  }

  // Once every rank answered and this rank's tasks ended: DONE to every
  // rank not yet told. True when the run is over (every send completed).
  bool send_done() {
    const bool all_answered = std::all_of(answered_.begin(), answered_.end(), [](bool b) { return b; });
    if (!ctx_->local_done || !all_answered || ctx_->mpi_error) return false;
    std::string done;
    for (int r = 1; r < s_->size; ++r) {
      if (!told_[static_cast<std::size_t>(r)]) {
        if (done.empty()) done = encode_ctrl(run_id_, std::nullopt, &report_);
        send(s_, *ctx_, r, tag_ctrl, done);
        told_[static_cast<std::size_t>(r)] = true;
      }
    }
    // A short message usually completes at once: no extra poll.
    progress_sends(*ctx_);
    return ctx_->sends.empty() && !ctx_->mpi_error;
  }

  // Fails the run at its deadline; ends the job once the grace period
  // after a failure has passed without every rank answering.
  bool check_clocks() {
    const auto now = clock_type::now();
    bool progressed = false;
    if (deadline_ && now >= *deadline_ && !first_) {
      fail_run(run_timed_out(*options_.timeout, report_.trace_id));
      stuck_ = true;
      progressed = true;
    }
    if (grace_until_ && now >= *grace_until_) {
      std::string silent;
      for (int r = 0; r < s_->size; ++r) {
        if (!answered_[static_cast<std::size_t>(r)]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      }
      abort_job(s_, "the run failed (" + first_->message + ") and " +
                        (silent.empty() ? std::string("this rank's tasks") : "rank(s) " + silent) +
                        " did not finish within " + std::to_string(s_->options.grace.count()) + " ms");
    }
    return progressed;
  }

  // When a sleeping poll must wake at the latest.
  [[nodiscard]] std::optional<clock_type::time_point> until() const { return grace_until_ ? grace_until_ : deadline_; }

  // What the run completes with: every task's report, and the run's
  // error when it failed.
  run_report end() {
    report_.finished = std::chrono::system_clock::now();
    if (ctx_->mpi_error) {
      report_.failure = *ctx_->mpi_error;
    } else if (first_ && stuck_) {
      report_.failure = with_waiting_tasks(report_.tasks, *first_);
    } else if (first_) {
      report_.failure = *first_;
    }
    return std::move(report_);
  }

 private:
  state_ptr s_;
  const task_group& group_;
  const run_options& options_;
  run_observer* tasks_observer_ = nullptr;  // the run's observer, when it asked for task events
  std::uint64_t run_id_;
  std::shared_ptr<run_ctx> ctx_;
  run_report report_;
  std::vector<bool> answered_;
  std::vector<bool> told_;
  liveness live_;
  std::optional<error> first_;  // the run's error
  std::optional<clock_type::time_point> deadline_;
  std::optional<clock_type::time_point> grace_until_;
  bool local_seen_ = false;
  // The run's error is its deadline's or a cancellation from outside: its
  // end lists the tasks that were still running.
  bool stuck_ = false;
  std::string bytes_;
};

}  // namespace

asio::awaitable<run_report> run_client(state_ptr s, task_group group, run_options options, std::uint64_t run_id) {
  auto ctx = std::make_shared<run_ctx>(co_await asio::this_coro::executor);
  auto described = describe_group(*s, group);
  feeds own;
  if (auto failure = send_start(s, *ctx, run_id, group, options, described, own)) {
    // Nobody starts: the other ranks end the run with this error on START.
    co_await flush_sends(s, *ctx);
    co_return refused_report(group, std::move(*failure), std::chrono::system_clock::now());
  }
  client_run run(s, group, options, run_id, ctx);
  run.begin(described.value()->where, std::move(own));
  bool cancelled_outside = false;
  pacer pace(s->options);
  for (;;) {
    bool progressed = false;
    if (!cancelled_outside && outside_cancelled(co_await asio::this_coro::cancellation_state)) {
      cancelled_outside = true;
      progressed = true;
      run.cancelled_outside();
    }
    progressed = run.take_local() || progressed;
    progressed = run.receive_statuses() || progressed;
    progressed = run.watch() || progressed;
    progressed = progress_sends(*ctx) || progressed;
    if (ctx->mpi_error) {
      cancel_local(*ctx);
      if (ctx->local_done) break;
    }
    if (run.send_done()) break;
    progressed = run.check_clocks() || progressed;
    co_await pace.wait(*ctx, progressed, run.until());
  }
  // The heartbeats sent before each STATUS have arrived by now.
  (void)run.watch();
  co_return run.end();
}

}  // namespace taskgroup::detail::mpi
