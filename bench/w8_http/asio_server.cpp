// w8_http / asio: the HTTP example's /sum (examples/06_http_server.cpp)
// hand-written with plain Asio and Beast, no taskgroup: the baseline of the
// requests-per-second comparison (bench/w8_http/run.py).
//
// The same server shape as the example: an io_context run by --threads
// threads (default 2), the acceptor and the signal handler on one strand,
// each connection on a strand of its own, keep-alive, Boost.JSON answers
// serialized the same way. Per /sum request: the 16 tasks (task k sums
// i*(k+1) for i = 1..n, after waiting `sleep_ms` on a timer) are
// co_spawned on 4 strands shared by every request (task k on strand k % 4,
// one per node of the example's group) into a ranged make_parallel_group,
// awaited with wait_for_all, as bench/w8_serve/asio.cpp does.
//
// The example also guards each run with a deadline (`timeout_ms`, default
// 2,000 ms: 504) and races it against a read on the socket (the client
// leaving cancels it: 503 and close). By default this server does neither
// (`timeout_ms` is parsed and range-checked only); with --guards it does
// both by hand: the sums, a read on the socket into the connection's
// buffer and a steady_timer race in one make_parallel_group
// (wait_for_one), so the baseline pays for what the example's guards cost
// without a task group. Neither form has the run's feeds and report, nor
// /stats.
//
// The HTTP side (routes, limits, the connection loop, options, start and
// stop) is the example's own: examples/http_sum_server.hpp.
//
// Endpoints: /sum?n=N[&sleep_ms=S][&timeout_ms=T] with the example's limits
// (400 naming the parameter otherwise), another path 404, another method
// 405. Usage: w8_http_asio_server [--address A] [--port P] [--threads N]
// [--guards] (--port 0 picks a free port); prints "listening on A:P" once ready;
// SIGINT or SIGTERM: stops accepting, closes connections at their next
// request, exits 0.
#include "../../examples/http_sum_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/json.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// asio, beast, http, json, i64, request, response and the /sum protocol.
using namespace sum_server;

namespace {

using strand_t = asio::strand<asio::io_context::executor_type>;

struct service {
  bool guards = false;
  std::array<strand_t, nodes> strands;
  std::atomic<bool> stopping{false};
  service(asio::io_context& io, bool with_guards)
      : guards(with_guards),
        strands{asio::make_strand(io), asio::make_strand(io), asio::make_strand(io), asio::make_strand(io)} {}

  // What sum_server::handle asks of a service (http_sum_server.hpp).
  asio::awaitable<response> sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                const sum_query& q);
  static asio::awaitable<std::optional<response>> route(std::string_view, const request&) { co_return std::nullopt; }
  [[nodiscard]] static std::string stopped() { return "stopped"; }
};

// Task k of one request, on its node's strand.
asio::awaitable<void> task_body(i64 n, i64 sleep_ms, int k, i64* out) {
  if (sleep_ms > 0) {
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(sleep_ms));
    co_await t.async_wait(asio::use_awaitable);
  }
  i64 s = 0;
  for (i64 i = 1; i <= n; ++i) s += i * (k + 1);
  *out = s;
}

// The 16 tasks of one request into `values`; throws when one threw.
asio::awaitable<void> run_tasks(const service& svc, const sum_query& q, std::array<i64, tasks>& values) {
  using op_t = decltype(asio::co_spawn(svc.strands[0], task_body(0, 0, 0, nullptr), asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(tasks);
  for (int k = 0; k < tasks; ++k) {
    ops.push_back(asio::co_spawn(svc.strands[static_cast<std::size_t>(k % nodes)],
                                 task_body(q.n, q.sleep_ms, k, &values[static_cast<std::size_t>(k)]), asio::deferred));
  }
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  (void)order;
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

asio::awaitable<response> service::sum(beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req,
                                       const sum_query& q) {
  std::array<i64, tasks> values{};
  std::exception_ptr failed;
  if (guards) {
    asio::steady_timer deadline(stream.get_executor(), std::chrono::milliseconds(q.timeout_ms));
    auto [order, run_ex, watch_ex, timer_ec] =
        co_await asio::experimental::make_parallel_group(
            asio::co_spawn(stream.get_executor(), run_tasks(*this, q, values), asio::deferred),
            asio::co_spawn(stream.get_executor(), watch_disconnect(stream, buffer), asio::deferred),
            deadline.async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    (void)watch_ex;
    (void)timer_ec;
    if (order[0] == 2) {
      co_return error_response(http::status::gateway_timeout, "timeout", "the run exceeded timeout_ms", req);
    }
    if (order[0] == 1) {
      auto res = error_response(http::status::service_unavailable, "cancelled", "the client left", req);
      res.keep_alive(false);
      co_return res;
    }
    failed = run_ex;
  } else {
    try {
      co_await run_tasks(*this, q, values);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (failed) co_return error_response(http::status::internal_server_error, "run_failed", "a task threw", req);
  json::array out;
  i64 total = 0;
  for (const i64 v : values) {
    out.push_back(v);
    total += v;
  }
  co_return json_response(http::status::ok, json::object{{"n", q.n}, {"total", total}, {"values", std::move(out)}},
                          req);
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = sum_server::parse_options(argc, argv, "w8_http_asio_server", {"--guards"});
  if (!options) return 2;
  return sum_server::run(*options, "w8_http_asio_server",
                         [&](asio::io_context& io) { return std::make_unique<service>(io, options->has("--guards")); });
}
