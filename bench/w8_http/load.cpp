// w8_http load driver: a bounded HTTP load on a /sum server (the HTTP
// example or bench/w8_http/asio_server.cpp) on one address and port.
//
// Opens --connections keep-alive connections (default 32), sends --warmup
// requests over them untimed (default 2,000), then --requests timed ones
// (default 20,000), each connection sending its next request once the
// previous one is answered. Request i asks /sum?n=N with N = 32 + i % 64
// (the n of bench/w8_serve); every answer must be 200, keep-alive, and its
// body the closed-form sums: {"n":N,"total":T,"values":[v0..v15]} with
// v_k = (k + 1) N (N + 1) / 2 (compared as text, and on a mismatch as JSON,
// so key order or spacing alone is not an error). One thread, one
// io_context, so that the client takes as little of the machine as it can.
//
// With --hold, it prints `warmed up` after the warm-up and waits for a line
// on its standard input before the timed phase (so that a caller can read
// the server's CPU clock in between). Then it prints one line:
// `requests R connections C seconds S rps X client_cpu_s U` (U: this
// process's CPU time during the timed phase). Exit status 0 when
// every answer was right, 1 on the first wrong answer or I/O error (named
// on stderr), or when the whole run exceeds --timeout seconds (default 120),
// 2 on bad options.
#include <time.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using i64 = std::int64_t;

namespace {

constexpr int tasks = 16;
constexpr std::size_t distinct_n = 64;

i64 n_of(std::uint64_t i) { return 32 + static_cast<i64>(i % distinct_n); }

json::value expected_body(i64 n) {
  json::array values;
  i64 total = 0;
  for (int k = 0; k < tasks; ++k) {
    const i64 v = (k + 1) * n * (n + 1) / 2;
    values.push_back(v);
    total += v;
  }
  return json::object{{"n", n}, {"total", total}, {"values", std::move(values)}};
}

struct load {
  std::string host;
  std::vector<std::string> requests;  // the request text per distinct n
  std::vector<json::value> want;      // the expected body per distinct n
  std::vector<std::string> want_text;
  std::vector<std::unique_ptr<beast::tcp_stream>> streams;
  std::uint64_t next = 0;  // the next request number to send
  std::uint64_t end = 0;   // one past the last request number of this phase
  std::optional<std::string> error;

  void fail(std::string what) {
    if (!error) error = std::move(what);
    for (auto& s : streams) s->socket().close();
  }
};

// The check of one answer; empty when right.
std::optional<std::string> wrong(const load& l, std::uint64_t i, const http::response<http::string_body>& res) {
  const std::size_t slot = i % distinct_n;
  const std::string where = "request " + std::to_string(i) + " (/sum?n=" + std::to_string(n_of(i)) + "): ";
  if (res.result() != http::status::ok) return where + "status " + std::to_string(res.result_int()) + ": " + res.body();
  if (!res.keep_alive()) return where + "the server closed the keep-alive connection";
  if (res.body() == l.want_text[slot]) return std::nullopt;
  boost::system::error_code ec;
  const json::value got = json::parse(res.body(), ec);
  if (ec || got != l.want[slot]) return where + "expected " + l.want_text[slot] + ", got " + res.body();
  return std::nullopt;
}

asio::awaitable<void> drive(load& l, beast::tcp_stream& stream) {
  beast::flat_buffer buffer;
  while (!l.error && l.next < l.end) {
    const std::uint64_t i = l.next++;
    auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(l.requests[i % distinct_n]),
                                                asio::as_tuple(asio::use_awaitable));
    (void)wn;
    if (wec) co_return l.fail("request " + std::to_string(i) + ": write: " + wec.message());
    http::response<http::string_body> res;
    auto [rec, rn] = co_await http::async_read(stream, buffer, res, asio::as_tuple(asio::use_awaitable));
    (void)rn;
    if (rec) co_return l.fail("request " + std::to_string(i) + ": read: " + rec.message());
    if (auto why = wrong(l, i, res)) co_return l.fail(*why);
  }
}

// Runs requests [l.next, l.next + count) over every connection, closing
// them all if `deadline` passes first.
void phase(asio::io_context& io, load& l, std::uint64_t count, std::chrono::steady_clock::time_point deadline,
           const std::string& too_long) {
  l.end = l.next + count;
  asio::steady_timer guard(io, deadline);
  guard.async_wait([&](boost::system::error_code ec) {
    if (!ec) l.fail(too_long);
  });
  std::size_t running = l.streams.size();
  for (auto& s : l.streams) {
    asio::co_spawn(io, drive(l, *s), [&](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          l.fail(std::string("client: ") + ex.what());
        }
      }
      if (--running == 0) guard.cancel();
    });
  }
  io.run();
  io.restart();
}

double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

std::optional<i64> number(std::string_view text, i64 lo, i64 hi) {
  i64 v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

struct options {
  std::string address = "127.0.0.1";
  i64 port = -1;
  i64 connections = 32;
  i64 warmup = 2'000;
  i64 requests = 20'000;
  i64 timeout_s = 120;
  bool hold = false;
};

std::optional<options> parse_options(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--hold") {
      o.hold = true;
      continue;
    }
    if (i + 1 >= argc) return std::nullopt;
    const std::string_view val = argv[++i];
    std::optional<i64> v;
    if (arg == "--address") {
      o.address = std::string(val);
      continue;
    }
    if (arg == "--port" && (v = number(val, 1, 65535))) {
      o.port = *v;
    } else if (arg == "--connections" && (v = number(val, 1, 1024))) {
      o.connections = *v;
    } else if (arg == "--warmup" && (v = number(val, 0, 100'000'000))) {
      o.warmup = *v;
    } else if (arg == "--requests" && (v = number(val, 1, 100'000'000))) {
      o.requests = *v;
    } else if (arg == "--timeout" && (v = number(val, 1, 3600))) {
      o.timeout_s = *v;
    } else {
      return std::nullopt;
    }
  }
  if (o.port == -1) return std::nullopt;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opts = parse_options(argc, argv);
  if (!opts) {
    std::cerr << "usage: w8_http_load --port 1..65535 [--address A] [--connections 1..1024] [--warmup R]\n"
                 "                    [--requests R] [--timeout 1..3600 s] [--hold]\n";
    return 2;
  }
  try {
    asio::io_context io(1);
    load l;
    for (std::size_t s = 0; s < distinct_n; ++s) {
      l.requests.push_back("GET /sum?n=" + std::to_string(n_of(s)) + " HTTP/1.1\r\nHost: " + opts->address +
                           "\r\n\r\n");
      l.want.push_back(expected_body(n_of(s)));
      l.want_text.push_back(json::serialize(l.want.back()));
    }
    const tcp::endpoint target(asio::ip::make_address(opts->address), static_cast<unsigned short>(opts->port));
    for (i64 c = 0; c < opts->connections; ++c) {
      auto s = std::make_unique<beast::tcp_stream>(io);
      boost::system::error_code ec;
      s->socket().connect(target, ec);
      if (ec) {
        std::cerr << "w8_http_load: connect to " << target << ": " << ec.message() << '\n';
        return 1;
      }
      s->socket().set_option(tcp::no_delay(true));
      l.streams.push_back(std::move(s));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts->timeout_s);
    const std::string too_long = "the load took over " + std::to_string(opts->timeout_s) + " s";
    phase(io, l, static_cast<std::uint64_t>(opts->warmup), deadline, too_long);
    if (opts->hold && !l.error) {
      std::cout << "warmed up" << std::endl;
      std::string line;
      if (!std::getline(std::cin, line)) l.fail("--hold: standard input closed before the timed phase");
    }
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_s();
    if (!l.error) phase(io, l, static_cast<std::uint64_t>(opts->requests), deadline, too_long);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_s() - c0;
    if (l.error) {
      std::cerr << "w8_http_load: " << *l.error << '\n';
      return 1;
    }
    for (auto& s : l.streams) {
      boost::system::error_code ignored;
      s->socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
    std::printf("requests %lld connections %lld seconds %.3f rps %.1f client_cpu_s %.3f\n",
                static_cast<long long>(opts->requests), static_cast<long long>(opts->connections), secs,
                static_cast<double>(opts->requests) / secs, cpu);
  } catch (const std::exception& e) {
    std::cerr << "w8_http_load: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
