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
// Usage: 06_http_server [--address A] [--port P] [--threads N]
// (defaults 127.0.0.1, 8080, 2; --port 0 picks a free port). It prints
// "listening on A:P" once ready. SIGINT or SIGTERM: it stops accepting,
// lets requests in flight finish, closes keep-alive connections at their
// next request (idle ones within 5 s), and exits 0.
#include <taskgroup/taskgroup.hpp>

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

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace tg = taskgroup;
using tcp = asio::ip::tcp;
using i64 = std::int64_t;
using namespace std::chrono_literals;

namespace {

constexpr int tasks = 16;
constexpr int nodes = 4;
constexpr i64 max_n = 1'000'000;      // keeps each sum within int64 and a request under ~10 ms
constexpr i64 max_sleep_ms = 60'000;  // the longest Nap a request may ask for
constexpr i64 max_timeout_ms = 60'000;
constexpr i64 default_timeout_ms = 2'000;
constexpr std::size_t max_pipelined = 64 * 1024;  // bytes kept while a run is in flight
constexpr auto idle_timeout = 5s;

struct counters {
  std::atomic<std::uint64_t> started{0}, completed{0}, timed_out{0}, cancelled{0}, failed{0};
};

std::string node_name(int j) { return "n" + std::to_string(j); }

// Task k: wait `sleep_ms` (cancellable), then value<k> = sum of i*(k+1),
// i = 1..n. The tasks of a node share the run's workspace there, hence a
// blob name per task.
std::string value_blob(int k) { return "value" + std::to_string(k); }

tg::net work_net(int k) {
  tg::net n("work");
  n.lambda("Nap", {"sleep_ms"}, {}, [](tg::op_context& ctx) -> asio::awaitable<tg::status> {
    const i64 ms = ctx.input<i64>(0);
    if (ms == 0) co_return tg::ok();
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return tg::fail(tg::errc::cancelled, "nap cancelled");
    co_return tg::ok();
  });
  n.lambda("Sum", {"n"}, {value_blob(k)}, [k](tg::op_context& ctx) -> tg::status {
    const i64 count = ctx.input<i64>(0);
    i64 s = 0;
    for (i64 i = 1; i <= count; ++i) s += i * (k + 1);
    ctx.set_output(0, s);
    return tg::ok();
  });
  return n;
}

struct service {
  tg::task_group group;
  std::vector<tg::task_output<i64>> values;
  tg::local_session session;
  counters stats;
  std::atomic<bool> stopping{false};

  explicit service(asio::any_io_executor ex) : session(std::move(ex)) {
    for (int j = 0; j < nodes; ++j) {
      check(group.input<i64>("n", tg::node(node_name(j))));
      check(group.input<i64>("sleep_ms", tg::node(node_name(j))));
    }
    for (int k = 0; k < tasks; ++k) {
      tg::task t("t" + std::to_string(k), tg::step("work").add_net(work_net(k)));
      values.push_back(t.output<i64>(value_blob(k)));
      check(group.add(t, tg::node(node_name(k % nodes))));
    }
  }
  template <class R>
  static void check(const R& r) {
    if (!r) throw std::runtime_error(r.error().message);
  }
};

using response = http::response<http::string_body>;

response json_response(http::status status, const json::value& body, const http::request<http::string_body>& req) {
  response res(status, req.version());
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = json::serialize(body);
  res.prepare_payload();
  return res;
}

response error_response(http::status status, std::string_view code, std::string_view message,
                        const http::request<http::string_body>& req) {
  return json_response(status, json::object{{"error", code}, {"message", message}}, req);
}

// The query of /sum: known parameters only, each once, each a decimal
// integer within its limits; otherwise the message says which and why.
struct sum_query {
  i64 n = 0;
  i64 sleep_ms = 0;
  i64 timeout_ms = default_timeout_ms;
};

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

std::optional<std::string> parse_sum_query(std::string_view query, sum_query& q) {
  std::map<std::string_view, bool> seen;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (seen[key]) return "parameter \"" + std::string(key) + "\" given twice";
    seen[key] = true;
    std::optional<std::string> err;
    if (key == "n") {
      err = parse_int(key, val, 0, max_n, q.n);
    } else if (key == "sleep_ms") {
      err = parse_int(key, val, 0, max_sleep_ms, q.sleep_ms);
    } else if (key == "timeout_ms") {
      err = parse_int(key, val, 1, max_timeout_ms, q.timeout_ms);
    } else {
      err = "unknown parameter \"" + std::string(key) + "\"";
    }
    if (err) return err;
  }
  if (!seen["n"]) return std::string("missing parameter \"n\"");
  return std::nullopt;
}

// Completes only when the peer closes or the socket fails (or when
// cancelled); bytes that arrive are kept in `buffer` for the next request.
asio::awaitable<void> watch_disconnect(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
  for (;;) {
    if (buffer.size() >= max_pipelined) co_return;  // a client flooding us: treat it as gone
    stream.expires_never();
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    buffer.commit(n);
  }
}

// Runs the group for one /sum request, racing it against the client.
asio::awaitable<response> run_sum(service& svc, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                  const http::request<http::string_body>& req, const sum_query& q) {
  tg::feeds f;
  for (int j = 0; j < nodes; ++j) f.set(node_name(j), "n", q.n).set(node_name(j), "sleep_ms", q.sleep_ms);
  tg::run_options opts{.timeout = std::chrono::milliseconds(q.timeout_ms), .feeds = std::move(f)};
  svc.stats.started.fetch_add(1, std::memory_order_relaxed);
  auto [order, run_ec, report, watch_ex] =
      co_await asio::experimental::make_parallel_group(
          svc.session.async_run(svc.group, std::move(opts), asio::deferred),
          asio::co_spawn(stream.get_executor(), watch_disconnect(stream, buffer), asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  (void)order;
  (void)watch_ex;
  if (run_ec == tg::errc::timeout) {
    svc.stats.timed_out.fetch_add(1, std::memory_order_relaxed);
    co_return error_response(http::status::gateway_timeout, "timeout", report.failure->message, req);
  }
  if (run_ec == tg::errc::cancelled) {
    svc.stats.cancelled.fetch_add(1, std::memory_order_relaxed);
    // Only the watch cancels: the client left or flooded us, so close.
    auto res = error_response(http::status::service_unavailable, "cancelled", report.failure->message, req);
    res.keep_alive(false);
    co_return res;
  }
  if (run_ec) {
    svc.stats.failed.fetch_add(1, std::memory_order_relaxed);
    const std::string msg = report.failure ? report.failure->message : run_ec.message();
    co_return error_response(http::status::internal_server_error, "run_failed", msg, req);
  }
  json::array values;
  i64 total = 0;
  for (const auto& h : svc.values) {
    const i64 v = h.get(report).value();
    values.push_back(v);
    total += v;
  }
  svc.stats.completed.fetch_add(1, std::memory_order_relaxed);
  co_return json_response(http::status::ok, json::object{{"n", q.n}, {"total", total}, {"values", std::move(values)}},
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

asio::awaitable<response> handle(service& svc, beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                 const http::request<http::string_body>& req) {
  if (req.method() != http::verb::get) {
    co_return error_response(http::status::method_not_allowed, "method_not_allowed", "only GET is served", req);
  }
  const std::string_view target = req.target();
  const auto qmark = target.find('?');
  const std::string_view path = target.substr(0, qmark);
  const std::string_view query = qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);
  if (path == "/stats") co_return json_response(http::status::ok, stats_json(svc.stats), req);
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
    http::request<http::string_body> req;
    stream.expires_after(idle_timeout);
    auto [ec, bytes] = co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    (void)bytes;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::connection_reset ||
        ec == asio::error::eof) {
      break;
    }
    if (ec) {  // a malformed request: answer it, then close
      http::request<http::string_body> none;
      auto res = error_response(http::status::bad_request, "bad_request", "malformed request: " + ec.message(), none);
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

// On the acceptor's strand, which the signal handler shares.
asio::awaitable<void> listen(service& svc, asio::io_context& io, tcp::acceptor& acceptor) {
  for (;;) {
    // Each connection gets a strand of its own: its coroutine and the
    // disconnect watch never run at once.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(io), asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {  // e.g. too many open files: back off, then go on
      asio::steady_timer pause(acceptor.get_executor(), 100ms);
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    auto ex = socket.get_executor();
    asio::co_spawn(ex, serve(svc, std::move(socket)), [](std::exception_ptr ep) {
      if (ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          std::cerr << "connection failed: " << e.what() << '\n';
        }
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
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::optional<i64> v;
    if (arg == "--address" && i + 1 < argc) {
      address = argv[++i];
      continue;
    }
    if (arg == "--port" && (v = option_value(argc, argv, i, 0, 65535))) {
      port = *v;
    } else if (arg == "--threads" && (v = option_value(argc, argv, i, 1, 64))) {
      threads = *v;
    } else {
      std::cerr << "usage: 06_http_server [--address A] [--port 0..65535] [--threads 1..64]\n"
                << "bad or incomplete option: " << arg << '\n';
      return 2;
    }
  }
  try {
    asio::io_context io(static_cast<int>(threads));
    service svc(io.get_executor());
    auto accept_strand = asio::make_strand(io);
    tcp::acceptor acceptor(accept_strand, {asio::ip::make_address(address), static_cast<unsigned short>(port)});
    std::cout << "listening on " << address << ':' << acceptor.local_endpoint().port() << std::endl;

    asio::signal_set signals(accept_strand, SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code ec, int) {
      if (ec) return;
      svc.stopping = true;
      acceptor.close();  // in-flight requests finish; connections end at their next request
    });
    asio::co_spawn(accept_strand, listen(svc, io, acceptor), asio::detached);

    std::vector<std::thread> pool;
    for (i64 t = 1; t < threads; ++t) pool.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& t : pool) t.join();
    std::cout << "stopped: " << json::serialize(stats_json(svc.stats)) << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "06_http_server: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
