// 06: an HTTP server (Boost.Beast) that serves one compiled group.
//
// The serving pattern:
// 1. Compile once. At start-up the server builds one task group (16 tasks
//    on 4 nodes) whose inputs are declared (`task_group::input<T>`): `n`
//    and `sleep_ms` on every node. It keeps the group and one
//    `local_session` for the life of the process.
// 2. Run concurrently with feeds. Each request runs that group on the
//    shared session with its own values as feeds
//    (`run_options::feeds`); any number of runs overlap, each in its own
//    workspaces, so no request sees another's blobs.
// 3. Read fetches. Task k's output `value<k>` is read from the request's own
//    report (`handle.get(report)`), never from a shared workspace.
// 4. Deadline. Each request's run has `run_options::timeout`; when it
//    expires the run fails with `errc::timeout` and the server answers 504.
// 5. Disconnect. While the run is in flight the connection races it
//    against a read on the socket (`make_parallel_group`, wait_for_one):
//    the read ends only on end of stream or an error, and then the group
//    cancels the run (terminal cancellation), so an abandoned request stops
//    consuming work. Bytes that arrive meanwhile (a pipelined request) are
//    kept for the next read.
// 6. Load. With --max-in-flight, --max-queued and --max-queue-wait-ms the
//    session admits runs within those limits (`session_limits`): a request
//    shed by them answers 503 with `Retry-After`, and /health runs at a
//    priority above /sum's, so it takes one of the --priority-headroom
//    places beyond --max-in-flight (default 1) and starts at once; with
//    none free it is admitted ahead of every queued /sum and is not shed
//    for them.
// 7. Observe. The groups are named ("sum", "health"), so the session's
//    metrics count their runs apart; /metrics serves them in Prometheus'
//    text format (`local_session::metrics`, `to_prometheus`). With
//    --debug-endpoints, /debug/runs shows every run in flight or queued
//    and where its tasks wait (`local_session::async_describe`). With
//    --trace-every N, one /sum run in N is recorded (`trace_recorder`, its
//    observer) and written as trace-<trace id>.json in the working
//    directory once it ends, by a thread of its own (never the I/O
//    threads'; before the server exits): a log line's trace id names the
//    file.
// 8. Trace. A request's W3C `traceparent` header, when well formed, puts
//    its run in the caller's trace (`run_options::trace_parent`); every
//    /sum answer names the run's span in `traceresponse`.
// 9. Stop. On SIGINT or SIGTERM the session drains (`async_drain`): runs in
//    flight and queued finish, a request that comes after answers 503.
//
// Endpoints (GET only, JSON answers but /metrics', keep-alive):
//   /sum?n=N[&sleep_ms=S][&timeout_ms=T]  task k (k = 0..15) sums i*(k+1)
//       for i = 1..N after sleeping S ms; answers {"n", "total", "values"}.
//       Limits: 0 <= N <= 1000000, 0 <= S <= 60000, 1 <= T <= 60000
//       (default T: 2000). Anything else, or an unknown parameter: 400.
//   /health  runs a one-task group at priority 1 (in the headroom when the
//       limits' places are taken); answers {"status": "ok"}.
//   /stats  runs started, completed, timed_out, cancelled, failed, shed,
//       refused (while stopping); in_flight and queued (the session's load).
//   /metrics  the session's metrics in Prometheus' text format, version
//       0.0.4 (docs/observing.md): runs and tasks by group and outcome,
//       retries, offloaded ops, latency and queue-wait histograms.
//   /debug/runs  only with --debug-endpoints (404 otherwise: its lines
//       name ops and blobs, not for a public port): every run in flight or
//       queued, its trace id, group, phase, priority, age and where its
//       tasks wait (`to_json(session_description)`, docs/observing.md).
//   Another path: 404; another method: 405.
//
// The HTTP plumbing (routes, limits, the connection loop, options, start
// and stop) is in http_sum_server.hpp, shared with the hand-written
// baseline of the benchmark (bench/w8_http/asio_server.cpp).
//
// Usage: 06_http_server [--address A] [--port P] [--threads N] [--offload]
//   [--max-in-flight N] [--max-queued N] [--max-queue-wait-ms MS]
//   [--priority-headroom N] [--debug-endpoints] [--trace-every N]
// (defaults 127.0.0.1, 8080, 2, no limits, a headroom of 1 for /health
// when --max-in-flight is given; --port 0 picks a free port;
// --offload runs the Sum ops on the compute executor, off the I/O
// threads). It prints "listening on A:P" once ready. SIGINT or SIGTERM: it
// stops accepting, drains the session, closes keep-alive connections at
// their next request (idle ones within 5 s), and exits 0.
#include <taskgroup/taskgroup.hpp>

#include "http_sum_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tg = taskgroup;
// asio, beast, http, json, i64, request, response and the /sum protocol.
using namespace sum_server;

namespace {

struct counters {
  std::atomic<std::uint64_t> started{0}, completed{0}, timed_out{0}, cancelled{0}, failed{0}, shed{0}, refused{0};
};

std::string node_name(int j) { return "n" + std::to_string(j); }

// Task k: Sleep `sleep_ms` (cancellable), then value<k> = sum of i*(k+1),
// i = 1..n. The tasks of a node share the run's workspace there, hence a
// blob name per task.
std::string value_blob(int k) { return "value" + std::to_string(k); }

// With `offload`, Sum (CPU work that grows with n) runs on the default
// compute executor instead of the I/O thread running the node's strand.
tg::net work_net(int k, bool offload) {
  tg::net n("work");
  // The built-in Sleep reads its duration from the fed blob at each run: it
  // waits without a coroutine frame, and a feed of 0 ends it at once.
  n.op("Sleep", {"sleep_ms"}, {});
  auto sum = [k](tg::op_context& ctx) -> tg::status {
    const i64 count = ctx.input<i64>(0);
    i64 s = 0;
    for (i64 i = 1; i <= count; ++i) s += i * (k + 1);
    ctx.set_output(0, s);
    return tg::ok();
  };
  if (!offload) return n.lambda("Sum", {"n"}, {value_blob(k)}, sum);
  // An inline op asked to be offloaded: its definition says so.
  tg::op_def def{"Sum", {"n"}, {value_blob(k)}, {}, nullptr};
  def.offload = true;
  def.inline_schema = std::make_shared<const tg::operator_schema>(tg::operator_schema("Sum").sync(sum));
  return n.add(std::move(def));
}

struct service {
  tg::task_group group;
  tg::task_group health;  // one task, one empty net
  std::vector<tg::task_output<i64>> values;
  tg::local_session session;
  counters stats;
  std::atomic<bool> stopping{false};
  std::atomic<bool> drained{false};
  bool debug_endpoints = false;
  i64 trace_every = 0;  // record one /sum run in this many (0: none)
  std::atomic<i64> sums{0};
  // Writes the sampled runs' trace files, away from the I/O threads (a
  // file is blocking I/O); made when sampling is on.
  std::optional<asio::thread_pool> trace_writer;

  service(asio::any_io_executor ex, bool offload, const tg::session_limits& limits, bool debug, i64 trace_one_in)
      : session(std::move(ex), limits), debug_endpoints(debug), trace_every(trace_one_in) {
    if (trace_every > 0) trace_writer.emplace(1);
    // The names label the session's metrics (GET /metrics): one per kind
    // of request, never one per request.
    group.name("sum");
    health.name("health");
    check(health.add(tg::task("health", tg::step("health").add_net(tg::net("health"))), tg::node(node_name(0))));
    for (int j = 0; j < nodes; ++j) {
      check(group.input<i64>("n", tg::node(node_name(j))));
      check(group.input<i64>("sleep_ms", tg::node(node_name(j))));
    }
    for (int k = 0; k < tasks; ++k) {
      tg::task t("t" + std::to_string(k), tg::step("work").add_net(work_net(k, offload)));
      values.push_back(t.output<i64>(value_blob(k)));
      check(group.add(t, tg::node(node_name(k % nodes))));
    }
  }
  // The files still to write are written before the server exits.
  ~service() {
    if (trace_writer) trace_writer->join();
  }
  service(const service&) = delete;
  service& operator=(const service&) = delete;
  template <class R>
  static void check(const R& r) {
    if (!r) throw std::runtime_error(r.error().message);
  }

  // What sum_server::handle asks of a service (http_sum_server.hpp).
  asio::awaitable<response> sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                const sum_query& q);
  asio::awaitable<std::optional<response>> route(std::string_view path, const request& req);
  response answer(const boost::system::error_code& run_ec, const tg::run_report& report, const request& req,
                  const sum_query& q);
  void write_trace(std::unique_ptr<tg::trace_recorder> recorder, const tg::trace_context& trace);
  void stop() {
    session.async_drain([this](boost::system::error_code ec) { drained = !ec; });
  }
  [[nodiscard]] std::string stopped() const;
};

// A run that never started: shed by the session's limits (503, try again
// later) or refused while the session drains (503, and the connection
// closes). Otherwise nullopt.
std::optional<response> not_admitted(const boost::system::error_code& ec, const tg::run_report& report, counters& stats,
                                     const request& req) {
  if (ec == tg::errc::overloaded) {
    stats.shed.fetch_add(1, std::memory_order_relaxed);
    auto res = error_response(http::status::service_unavailable, "overloaded", report.failure->message, req);
    res.set(http::field::retry_after, "1");
    return res;
  }
  if (ec == tg::errc::session_closed) {
    stats.refused.fetch_add(1, std::memory_order_relaxed);
    auto res = error_response(http::status::service_unavailable, "stopping", report.failure->message, req);
    res.keep_alive(false);
    return res;
  }
  return std::nullopt;
}

// Runs the group for one /sum request, racing it against the client. The
// request's `traceparent` (W3C trace context), when well formed, makes the
// run a part of the caller's trace; a malformed one is ignored (the run
// starts a trace of its own), as W3C asks of a server. The answer names
// the run's span in `traceresponse` (a W3C draft, not yet a
// recommendation): `00-<trace id>-<the run's span id>-<flags>`.
asio::awaitable<response> service::sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                       const sum_query& q) {
  tg::feeds f;
  for (int j = 0; j < nodes; ++j) f.set(node_name(j), "n", q.n).set(node_name(j), "sleep_ms", q.sleep_ms);
  tg::run_options opts{.timeout = std::chrono::milliseconds(q.timeout_ms), .feeds = std::move(f)};
  if (auto tp = req.find("traceparent"); tp != req.end() && tg::trace_context::parse(tp->value())) {
    opts.trace_parent = std::string_view(tp->value());
  }
  stats.started.fetch_add(1, std::memory_order_relaxed);
  // Sampled: this run's observer records it for a trace file. The others
  // have none, and keep every fast path.
  std::unique_ptr<tg::trace_recorder> recorder;
  if (trace_every > 0 && sums.fetch_add(1, std::memory_order_relaxed) % trace_every == 0) {
    recorder = std::make_unique<tg::trace_recorder>();
    opts.observer = recorder.get();
  }
  auto [order, run_ec, report, watch_ex] =
      co_await asio::experimental::make_parallel_group(
          session.async_run(group, std::move(opts), asio::deferred),
          asio::co_spawn(stream.get_executor(), watch_disconnect(stream, buffer), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)order;
  (void)watch_ex;
  response res = answer(run_ec, report, req, q);
  if (report.trace.valid()) res.set("traceresponse", report.trace.traceparent());
  if (recorder && report.trace.valid()) write_trace(std::move(recorder), report.trace);
  co_return res;
}

// On the trace writer: the run has ended, its recorder is told nothing
// more. A file that cannot be written is said on stderr; the answer has
// gone already.
void service::write_trace(std::unique_ptr<tg::trace_recorder> recorder, const tg::trace_context& trace) {
  asio::post(*trace_writer, [recorder = std::move(recorder), trace] {
    const std::string name = "trace-" + trace.trace_id_hex() + ".json";
    std::ofstream out(name);
    out << recorder->to_json(trace) << '\n';
    out.close();
    if (!out) std::fprintf(stderr, "06_http_server: cannot write %s: %s\n", name.c_str(), std::strerror(errno));
  });
}

// The answer to a /sum request whose run ended with `run_ec` and `report`.
response service::answer(const boost::system::error_code& run_ec, const tg::run_report& report, const request& req,
                         const sum_query& q) {
  if (auto refused = not_admitted(run_ec, report, stats, req)) return std::move(*refused);
  if (run_ec == tg::errc::timeout) {
    stats.timed_out.fetch_add(1, std::memory_order_relaxed);
    return error_response(http::status::gateway_timeout, "timeout", report.failure->message, req);
  }
  if (run_ec == tg::errc::cancelled) {
    stats.cancelled.fetch_add(1, std::memory_order_relaxed);
    // Only the watch cancels: the client left or flooded us, so close.
    auto res = error_response(http::status::service_unavailable, "cancelled", report.failure->message, req);
    res.keep_alive(false);
    return res;
  }
  if (run_ec) {
    stats.failed.fetch_add(1, std::memory_order_relaxed);
    const std::string msg = report.failure ? report.failure->message : run_ec.message();
    return error_response(http::status::internal_server_error, "run_failed", msg, req);
  }
  json::array out;
  i64 total = 0;
  for (const auto& h : values) {
    const i64 v = h.get(report).value();
    out.push_back(v);
    total += v;
  }
  stats.completed.fetch_add(1, std::memory_order_relaxed);
  return json_response(http::status::ok, json::object{{"n", q.n}, {"total", total}, {"values", std::move(out)}}, req);
}

json::object stats_json(const counters& c, const tg::session_load& load) {
  return {{"started", c.started.load()},     {"completed", c.completed.load()}, {"timed_out", c.timed_out.load()},
          {"cancelled", c.cancelled.load()}, {"failed", c.failed.load()},       {"shed", c.shed.load()},
          {"refused", c.refused.load()},     {"in_flight", load.in_flight},     {"queued", load.queued}};
}

asio::awaitable<std::optional<response>> service::route(std::string_view path, const request& req) {
  if (path == "/stats") co_return json_response(http::status::ok, stats_json(stats, session.load()), req);
  if (path == "/metrics") {
    // Prometheus' text format: runs and tasks by outcome, latencies, queue.
    response res(http::status::ok, req.version());
    res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    res.keep_alive(req.keep_alive());
    res.body() = tg::to_prometheus(session.metrics());
    res.prepare_payload();
    co_return res;
  }
  if (path == "/debug/runs" && debug_endpoints) {
    // Answers within run_probe::answer_within even when a task holds a
    // node's thread.
    auto [ec, d] = co_await session.async_describe(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return error_response(http::status::internal_server_error, "describe_failed", ec.message(), req);
    response res(http::status::ok, req.version());
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = tg::to_json(d);
    res.prepare_payload();
    co_return res;
  }
  if (path != "/health") co_return std::nullopt;
  // Admitted ahead of every /sum queued (priority 1 against 0).
  auto [ec, report] = co_await session.async_run(health, {.timeout = std::chrono::seconds(10), .priority = 1},
                                                 asio::as_tuple(asio::use_awaitable));
  if (auto refused = not_admitted(ec, report, stats, req)) co_return std::move(*refused);
  if (ec) co_return error_response(http::status::internal_server_error, "run_failed", report.failure->message, req);
  co_return json_response(http::status::ok, json::object{{"status", "ok"}}, req);
}

std::string service::stopped() const {
  json::object o = stats_json(stats, session.load());
  o["drained"] = drained.load();
  return "stopped: " + json::serialize(o);
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = sum_server::parse_options(argc, argv, "06_http_server", {"--offload", "--debug-endpoints"},
                                                 {{"--max-in-flight", 1, 1000000},
                                                  {"--max-queued", 0, 1000000},
                                                  {"--max-queue-wait-ms", 0, 3600000},
                                                  {"--priority-headroom", 0, 1000000},
                                                  {"--trace-every", 1, 1000000}});
  if (!options) return 2;
  const bool offload = options->has("--offload");
  const bool debug = options->has("--debug-endpoints");
  const i64 trace_every = options->value("--trace-every").value_or(0);
  tg::session_limits limits;
  if (auto v = options->value("--max-in-flight")) limits.max_runs_in_flight = static_cast<std::size_t>(*v);
  if (auto v = options->value("--max-queued")) limits.max_queued = static_cast<std::size_t>(*v);
  if (auto v = options->value("--max-queue-wait-ms")) limits.max_queue_wait = std::chrono::milliseconds(*v);
  limits.priority_headroom = static_cast<std::size_t>(options->value("--priority-headroom").value_or(1));
  return sum_server::run(*options, "06_http_server", [offload, limits, debug, trace_every](asio::io_context& io) {
    return std::make_unique<service>(io.get_executor(), offload, limits, debug, trace_every);
  });
}
