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
// Endpoints: /sum?n=N[&sleep_ms=S][&timeout_ms=T] with the example's limits
// (400 naming the parameter otherwise), another path 404, another method
// 405. Usage: w8_http_asio_server [--address A] [--port P] [--threads N]
// [--guards] (--port 0 picks a free port); prints "listening on A:P" once ready;
// SIGINT or SIGTERM: stops accepting, closes connections at their next
// request, exits 0.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using i64 = std::int64_t;
using namespace std::chrono_literals;

namespace {

constexpr int tasks = 16;
constexpr int nodes = 4;
constexpr i64 max_n = 1'000'000;  // the example's limits
constexpr i64 max_sleep_ms = 60'000;
constexpr i64 max_timeout_ms = 60'000;
constexpr i64 default_timeout_ms = 2'000;
constexpr std::size_t max_pipelined = 64 * 1024;  // bytes kept while a run is in flight (--guards)
constexpr auto idle_timeout = 5s;

using strand_t = asio::strand<asio::io_context::executor_type>;

struct service {
  bool guards = false;
  std::array<strand_t, nodes> strands;
  std::atomic<bool> stopping{false};
  service(asio::io_context& io, bool with_guards)
      : guards(with_guards),
        strands{asio::make_strand(io), asio::make_strand(io), asio::make_strand(io), asio::make_strand(io)} {}
};

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

response json_response(http::status status, const json::value& body, const request& req) {
  response res(status, req.version());
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = json::serialize(body);
  res.prepare_payload();
  return res;
}

response error_response(http::status status, std::string_view code, std::string_view message, const request& req) {
  return json_response(status, json::object{{"error", code}, {"message", message}}, req);
}

std::optional<std::string> parse_int(std::string_view name, std::string_view text, i64 lo, i64 hi, i64& out) {
  i64 v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return "parameter \"" + std::string(name) + "\": expected an integer, got \"" + std::string(text) + "\"";
  }
  if (v < lo || v > hi) {
    return "parameter \"" + std::string(name) + "\" must be between " + std::to_string(lo) + " and " +
           std::to_string(hi) + ", got " + std::to_string(v);
  }
  out = v;
  return std::nullopt;
}

struct sum_query {
  i64 n = -1;
  i64 sleep_ms = -1;
  i64 timeout_ms = -1;
};

// Known parameters only, each once, within the example's limits.
std::optional<std::string> parse_sum_query(std::string_view query, sum_query& q) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    i64* slot = key == "n" ? &q.n : key == "sleep_ms" ? &q.sleep_ms : key == "timeout_ms" ? &q.timeout_ms : nullptr;
    if (slot == nullptr) return "unknown parameter \"" + std::string(key) + "\"";
    if (*slot != -1) return "parameter \"" + std::string(key) + "\" given twice";
    const i64 lo = slot == &q.timeout_ms ? 1 : 0;
    const i64 hi = slot == &q.n ? max_n : slot == &q.sleep_ms ? max_sleep_ms : max_timeout_ms;
    if (auto err = parse_int(key, val, lo, hi, *slot)) return err;
  }
  if (q.n == -1) return std::string("missing parameter \"n\"");
  if (q.sleep_ms == -1) q.sleep_ms = 0;
  if (q.timeout_ms == -1) q.timeout_ms = default_timeout_ms;
  return std::nullopt;
}

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
asio::awaitable<void> run_tasks(service& svc, const sum_query& q, std::array<i64, tasks>& values) {
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

// --guards: completes only when the peer closes or the socket fails (or
// when cancelled); bytes that arrive are kept for the next request.
asio::awaitable<void> watch_disconnect(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
  for (;;) {
    if (buffer.size() >= max_pipelined) co_return;
    stream.expires_never();
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    buffer.commit(n);
  }
}

asio::awaitable<response> run_sum(service& svc, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                  const request& req, const sum_query& q) {
  std::array<i64, tasks> values{};
  std::exception_ptr failed;
  if (svc.guards) {
    asio::steady_timer deadline(stream.get_executor(), std::chrono::milliseconds(q.timeout_ms));
    auto [order, run_ex, watch_ex, timer_ec] =
        co_await asio::experimental::make_parallel_group(
            asio::co_spawn(stream.get_executor(), run_tasks(svc, q, values), asio::deferred),
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
      co_await run_tasks(svc, q, values);
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

asio::awaitable<response> handle(service& svc, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                 const request& req) {
  if (req.method() != http::verb::get) {
    co_return error_response(http::status::method_not_allowed, "method_not_allowed", "only GET is served", req);
  }
  const std::string_view target = req.target();
  const auto qmark = target.find('?');
  const std::string_view path = target.substr(0, qmark);
  const std::string_view query = qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);
  if (path != "/sum") {
    co_return error_response(http::status::not_found, "not_found", "no such path: " + std::string(path), req);
  }
  sum_query q;
  if (auto err = parse_sum_query(query, q))
    co_return error_response(http::status::bad_request, "bad_request", *err, req);
  co_return co_await run_sum(svc, stream, buffer, req, q);
}

// One connection, on its own strand: read a request, answer it, repeat.
asio::awaitable<void> serve(service& svc, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    request req;
    stream.expires_after(idle_timeout);
    auto [ec, bytes] = co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    (void)bytes;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
      break;
    }
    if (ec) {  // a malformed request: answer it, then close
      auto res = error_response(http::status::bad_request, "bad_request", "malformed request: " + ec.message(), {});
      res.keep_alive(false);
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    response res = co_await handle(svc, stream, buffer, req);
    if (svc.stopping.load()) res.keep_alive(false);
    stream.expires_after(idle_timeout);
    auto [wec, written] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    (void)written;
    if (wec || !res.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> listen(service& svc, asio::io_context& io, tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(io), asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {  // e.g. too many open files: back off, then go on
      asio::steady_timer pause(acceptor.get_executor(), 100ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    auto ex = socket.get_executor();
    asio::co_spawn(ex, serve(svc, std::move(socket)), [](std::exception_ptr ep) {
      if (!ep) return;
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        std::cerr << "connection failed: " << e.what() << '\n';
      }
    });
  }
}

std::optional<i64> option_value(int argc, char** argv, int& i, i64 lo, i64 hi) {
  if (i + 1 >= argc) return std::nullopt;
  i64 v = 0;
  const std::string_view text = argv[++i];
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address = "127.0.0.1";
  i64 port = 8080;
  i64 threads = 2;
  bool guards = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::optional<i64> v;
    if (arg == "--guards") {
      guards = true;
      continue;
    }
    if (arg == "--address" && i + 1 < argc) {
      address = argv[++i];
      continue;
    }
    if (arg == "--port" && (v = option_value(argc, argv, i, 0, 65535))) {
      port = *v;
    } else if (arg == "--threads" && (v = option_value(argc, argv, i, 1, 64))) {
      threads = *v;
    } else {
      std::cerr << "usage: w8_http_asio_server [--address A] [--port 0..65535] [--threads 1..64] [--guards]\n"
                << "bad or incomplete option: " << arg << '\n';
      return 2;
    }
  }
  try {
    asio::io_context io(static_cast<int>(threads));
    service svc(io, guards);
    auto accept_strand = asio::make_strand(io);
    tcp::acceptor acceptor(accept_strand, {asio::ip::make_address(address), static_cast<unsigned short>(port)});
    std::cout << "listening on " << address << ':' << acceptor.local_endpoint().port() << std::endl;

    asio::signal_set signals(accept_strand, SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code ec, int) {
      if (ec) return;
      svc.stopping = true;
      acceptor.close();
    });
    asio::co_spawn(accept_strand, listen(svc, io, acceptor), asio::detached);

    std::vector<std::thread> pool;
    for (i64 t = 1; t < threads; ++t) pool.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& t : pool) t.join();
    std::cout << "stopped" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "w8_http_asio_server: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
