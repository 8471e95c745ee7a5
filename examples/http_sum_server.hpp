// The HTTP side of the /sum server: routes, limits, query parsing, JSON
// answers, the connection loop, the disconnect watch, options and the
// process's start and stop. Shared by example 06 (examples/06_http_server.cpp,
// which computes a request's sums with a task group) and the hand-written
// baseline of its benchmark (bench/w8_http/asio_server.cpp, plain Asio), so
// that the two servers differ only in how they answer /sum.
//
// A service type `S` provides:
//   std::atomic<bool> stopping;              set once SIGINT or SIGTERM came
//   asio::awaitable<response> sum(beast::tcp_stream&, beast::flat_buffer&,
//                                 const request&, const sum_query&);
//   asio::awaitable<std::optional<response>> route(std::string_view path,
//                                                  const request&);
//                                            other GET paths (nullopt: 404)
//   std::string stopped() const;             the last line printed on stdout
// and may provide:
//   void stop();                             called once SIGINT or SIGTERM came
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace sum_server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using i64 = std::int64_t;
using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

inline constexpr int tasks = 16;
inline constexpr int nodes = 4;
inline constexpr i64 max_n = 1'000'000;      // keeps each sum within int64 and a request under ~10 ms
inline constexpr i64 max_sleep_ms = 60'000;  // the longest wait a request may ask for
inline constexpr i64 max_timeout_ms = 60'000;
inline constexpr i64 default_timeout_ms = 2'000;
inline constexpr std::size_t max_pipelined = 64 * 1024;  // bytes kept while a run is in flight
inline constexpr auto idle_timeout = std::chrono::seconds(5);

inline response json_response(http::status status, const json::value& body, const request& req) {
  response res(status, req.version());
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = json::serialize(body);
  res.prepare_payload();
  return res;
}

inline response error_response(http::status status, std::string_view code, std::string_view message,
                               const request& req) {
  return json_response(status, json::object{{"error", code}, {"message", message}}, req);
}

// The query of /sum: known parameters only, each once, each a decimal
// integer within its limits; otherwise the message says which and why.
struct sum_query {
  i64 n = 0;
  i64 sleep_ms = 0;
  i64 timeout_ms = default_timeout_ms;
};

inline std::optional<std::string> parse_int(std::string_view name, std::string_view text, i64 lo, i64 hi, i64& out) {
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

inline std::optional<std::string> parse_sum_query(std::string_view query, sum_query& q) {
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
inline asio::awaitable<void> watch_disconnect(beast::tcp_stream& stream, beast::flat_buffer& buffer) {
  for (;;) {
    if (buffer.size() >= max_pipelined) co_return;  // a client flooding us: treat it as gone
    stream.expires_never();
    auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    buffer.commit(n);
  }
}

template <class S>
asio::awaitable<response> handle(S& svc, beast::tcp_stream& stream, beast::flat_buffer& buffer, const request& req) {
  if (req.method() != http::verb::get) {
    co_return error_response(http::status::method_not_allowed, "method_not_allowed", "only GET is served", req);
  }
  const std::string_view target = req.target();
  const auto qmark = target.find('?');
  const std::string_view path = target.substr(0, qmark);
  const std::string_view query = qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);
  if (path != "/sum") {
    if (std::optional<response> other = co_await svc.route(path, req)) co_return std::move(*other);
    co_return error_response(http::status::not_found, "not_found", "no such path: " + std::string(path), req);
  }
  sum_query q;
  if (auto err = parse_sum_query(query, q))
    co_return error_response(http::status::bad_request, "bad_request", *err, req);
  co_return co_await svc.sum(stream, buffer, req, q);
}

// One connection, on its own strand: read a request, answer it, repeat.
template <class S>
asio::awaitable<void> serve(S& svc, tcp::socket socket) {
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

// On the acceptor's strand, which the signal handler shares.
template <class S>
asio::awaitable<void> listen(S& svc, asio::io_context& io, tcp::acceptor& acceptor) {
  for (;;) {
    // Each connection gets a strand of its own: its coroutine and the
    // disconnect watch never run at once.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(io), asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {  // e.g. too many open files: back off, then go on
      asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(100));
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

// The command line: --address A, --port 0..65535, --threads 1..64, the
// program's own flags (`flags`, each without a value) and its own integer
// options (`valued`, each within its bounds).
struct valued_option {
  std::string_view name;
  i64 lo;
  i64 hi;
};
struct options {
  std::string address = "127.0.0.1";
  i64 port = 8080;
  i64 threads = 2;
  std::vector<std::string> flags;                   // those given
  std::vector<std::pair<std::string, i64>> values;  // those given
  [[nodiscard]] bool has(std::string_view flag) const {
    for (const auto& f : flags) {
      if (f == flag) return true;
    }
    return false;
  }
  [[nodiscard]] std::optional<i64> value(std::string_view name) const {
    for (const auto& [n, v] : values) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
};

inline std::optional<i64> option_value(int argc, char** argv, int& i, i64 lo, i64 hi) {
  if (i + 1 >= argc) return std::nullopt;
  i64 v = 0;
  const std::string_view text = argv[++i];
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// The options, or nullopt after printing the usage of `program` on stderr.
inline std::optional<options> parse_options(int argc, char** argv, std::string_view program,
                                            std::initializer_list<std::string_view> flags = {},
                                            std::initializer_list<valued_option> valued = {}) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::optional<i64> v;
    auto own = std::find_if(valued.begin(), valued.end(), [&](const valued_option& x) { return x.name == arg; });
    if (own != valued.end() && (v = option_value(argc, argv, i, own->lo, own->hi))) {
      o.values.emplace_back(arg, *v);
    } else if (arg == "--address" && i + 1 < argc) {
      o.address = argv[++i];
    } else if (arg == "--port" && (v = option_value(argc, argv, i, 0, 65535))) {
      o.port = *v;
    } else if (arg == "--threads" && (v = option_value(argc, argv, i, 1, 64))) {
      o.threads = *v;
    } else if (std::find(flags.begin(), flags.end(), arg) != flags.end()) {
      o.flags.emplace_back(arg);
    } else {
      std::cerr << "usage: " << program << " [--address A] [--port 0..65535] [--threads 1..64]";
      for (auto f : flags) std::cerr << " [" << f << ']';
      for (const auto& x : valued) std::cerr << " [" << x.name << ' ' << x.lo << ".." << x.hi << ']';
      std::cerr << "\nbad or incomplete option: " << arg << '\n';
      return std::nullopt;
    }
  }
  return o;
}

// Serves on `o.address:o.port` with `o.threads` threads until SIGINT or
// SIGTERM: prints "listening on A:P" once ready; on a signal stops
// accepting, lets requests in flight finish, closes keep-alive connections
// at their next request (idle ones within 5 s), prints `svc.stopped()` and
// returns 0 (1 after printing an error). `make(io)` builds the service.
template <class Make>
int run(const options& o, std::string_view program, Make make) {
  try {
    asio::io_context io(static_cast<int>(o.threads));
    auto svc = make(io);
    auto accept_strand = asio::make_strand(io);
    tcp::acceptor acceptor(accept_strand, {asio::ip::make_address(o.address), static_cast<unsigned short>(o.port)});
    std::cout << "listening on " << o.address << ':' << acceptor.local_endpoint().port() << std::endl;

    asio::signal_set signals(accept_strand, SIGINT, SIGTERM);
    signals.async_wait([&](beast::error_code ec, int) {
      if (ec) return;
      svc->stopping = true;
      if constexpr (requires { svc->stop(); }) svc->stop();
      acceptor.close();  // in-flight requests finish; connections end at their next request
    });
    asio::co_spawn(accept_strand, listen(*svc, io, acceptor), asio::detached);

    std::vector<std::thread> pool;
    for (i64 t = 1; t < o.threads; ++t) pool.emplace_back([&io] { io.run(); });
    io.run();
    for (auto& t : pool) t.join();
    std::cout << svc->stopped() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
  return 0;
}

}  // namespace sum_server
