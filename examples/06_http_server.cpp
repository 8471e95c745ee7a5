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
//
// Endpoints (GET only, JSON answers, keep-alive):
//   /sum?n=N[&sleep_ms=S][&timeout_ms=T]  task k (k = 0..15) sums i*(k+1)
//       for i = 1..N after sleeping S ms; answers {"n", "total", "values"}.
//       Limits: 0 <= N <= 1000000, 0 <= S <= 60000, 1 <= T <= 60000
//       (default T: 2000). Anything else, or an unknown parameter: 400.
//   /stats  runs started, completed, timed_out, cancelled, failed, in_flight.
//   Another path: 404; another method: 405.
//
// The HTTP plumbing (routes, limits, the connection loop, options, start
// and stop) is in http_sum_server.hpp, shared with the hand-written
// baseline of the benchmark (bench/w8_http/asio_server.cpp).
//
// Usage: 06_http_server [--address A] [--port P] [--threads N] [--offload]
// (defaults 127.0.0.1, 8080, 2; --port 0 picks a free port; --offload runs
// the Sum ops on the compute executor, off the I/O threads). It prints
// "listening on A:P" once ready. SIGINT or SIGTERM: it stops accepting,
// lets requests in flight finish, closes keep-alive connections at their
// next request (idle ones within 5 s), and exits 0.
#include <taskgroup/taskgroup.hpp>

#include "http_sum_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
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
  std::atomic<std::uint64_t> started{0}, completed{0}, timed_out{0}, cancelled{0}, failed{0};
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
  std::vector<tg::task_output<i64>> values;
  tg::local_session session;
  counters stats;
  std::atomic<bool> stopping{false};

  service(asio::any_io_executor ex, bool offload) : session(std::move(ex)) {
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
  template <class R>
  static void check(const R& r) {
    if (!r) throw std::runtime_error(r.error().message);
  }

  // What sum_server::handle asks of a service (http_sum_server.hpp).
  asio::awaitable<response> sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                const sum_query& q);
  std::optional<response> route(std::string_view path, const request& req) const;
  [[nodiscard]] std::string stopped() const;
};

// Runs the group for one /sum request, racing it against the client.
asio::awaitable<response> service::sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                       const sum_query& q) {
  tg::feeds f;
  for (int j = 0; j < nodes; ++j) f.set(node_name(j), "n", q.n).set(node_name(j), "sleep_ms", q.sleep_ms);
  tg::run_options opts{.timeout = std::chrono::milliseconds(q.timeout_ms), .feeds = std::move(f)};
  stats.started.fetch_add(1, std::memory_order_relaxed);
  auto [order, run_ec, report, watch_ex] =
      co_await asio::experimental::make_parallel_group(
          session.async_run(group, std::move(opts), asio::deferred),
          asio::co_spawn(stream.get_executor(), watch_disconnect(stream, buffer), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)order;
  (void)watch_ex;
  if (run_ec == tg::errc::timeout) {
    stats.timed_out.fetch_add(1, std::memory_order_relaxed);
    co_return error_response(http::status::gateway_timeout, "timeout", report.failure->message, req);
  }
  if (run_ec == tg::errc::cancelled) {
    stats.cancelled.fetch_add(1, std::memory_order_relaxed);
    // Only the watch cancels: the client left or flooded us, so close.
    auto res = error_response(http::status::service_unavailable, "cancelled", report.failure->message, req);
    res.keep_alive(false);
    co_return res;
  }
  if (run_ec) {
    stats.failed.fetch_add(1, std::memory_order_relaxed);
    const std::string msg = report.failure ? report.failure->message : run_ec.message();
    co_return error_response(http::status::internal_server_error, "run_failed", msg, req);
  }
  json::array out;
  i64 total = 0;
  for (const auto& h : values) {
    const i64 v = h.get(report).value();
    out.push_back(v);
    total += v;
  }
  stats.completed.fetch_add(1, std::memory_order_relaxed);
  co_return json_response(http::status::ok, json::object{{"n", q.n}, {"total", total}, {"values", std::move(out)}},
                          req);
}

json::object stats_json(const counters& c) {
  // `started` read last: a run counted as ended was started before.
  const std::uint64_t ended = c.completed + c.timed_out + c.cancelled + c.failed;
  const std::uint64_t started = c.started;
  return {{"started", started},
          {"completed", c.completed.load()},
          {"timed_out", c.timed_out.load()},
          {"cancelled", c.cancelled.load()},
          {"failed", c.failed.load()},
          {"in_flight", started - ended}};
}

std::optional<response> service::route(std::string_view path, const request& req) const {
  if (path == "/stats") return json_response(http::status::ok, stats_json(stats), req);
  return std::nullopt;
}

std::string service::stopped() const { return "stopped: " + json::serialize(stats_json(stats)); }

}  // namespace

int main(int argc, char** argv) {
  const auto options = sum_server::parse_options(argc, argv, "06_http_server", {"--offload"});
  if (!options) return 2;
  const bool offload = options->has("--offload");
  return sum_server::run(*options, "06_http_server", [offload](asio::io_context& io) {
    return std::make_unique<service>(io.get_executor(), offload);
  });
}
