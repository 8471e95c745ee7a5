// Test harness: one `async_run` of a session through each kind of
// completion token, and what the caller saw.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

#include <optional>
#include <string>
#include <utility>

namespace taskgroup::test {

/// `default_token`: no token given, the operation co_awaited.
enum class token_kind { callback, future, awaitable, as_tuple, redirect_error, deferred, default_token };

/// Whether `kind` reports a failure by throwing (`taskgroup::system_error`,
/// a `boost::system::system_error`: only that type is caught here).
inline bool throws(token_kind kind) {
  return kind == token_kind::future || kind == token_kind::awaitable || kind == token_kind::default_token;
}

/// What the caller of `async_run` saw: the code, the report when the token
/// delivers one, and whether an exception came.
struct seen {
  boost::system::error_code code;
  std::optional<run_report> report;
  bool threw = false;
  std::string what;  // the exception's what(), when one came
};

namespace token_detail {

template <class Session>
boost::asio::awaitable<void> await_forms(Session& session, task_group g, token_kind kind, seen& out) {
  namespace asio = boost::asio;
  switch (kind) {
    case token_kind::awaitable: try { out.report = co_await session.async_run(g, {}, asio::use_awaitable);
      } catch (const taskgroup::system_error& e) {
        out.threw = true;
        out.code = e.code();
        out.what = e.what();
      }
      break;
    case token_kind::default_token: try { out.report = co_await session.async_run(g);
      } catch (const taskgroup::system_error& e) {
        out.threw = true;
        out.code = e.code();
        out.what = e.what();
      }
      break;
    case token_kind::as_tuple: {
      auto [ec, r] = co_await session.async_run(g, {}, asio::as_tuple(asio::use_awaitable));
      out.code = ec;
      out.report = std::move(r);
      break;
    }
    case token_kind::redirect_error: {
      boost::system::error_code ec;
      out.report = co_await session.async_run(g, {}, asio::redirect_error(asio::use_awaitable, ec));
      out.code = ec;
      break;
    }
    default: break;
  }
}

}  // namespace token_detail

/// Runs `g` once on `session` through `kind`, running `io` (the session's
/// executor's context) until it has no more work.
template <class Session>
seen run_with(boost::asio::io_context& io, Session& session, const task_group& g, token_kind kind) {
  namespace asio = boost::asio;
  seen out;
  auto keep = [&out](boost::system::error_code ec, run_report r) {
    out.code = ec;
    out.report = std::move(r);
  };
  switch (kind) {
    case token_kind::callback:
      session.async_run(g, {}, keep);
      io.run();
      break;
    case token_kind::future: {
      auto f = session.async_run(g, {}, asio::use_future);
      io.run();
      try {
        out.report = f.get();
      } catch (const taskgroup::system_error& e) {
        out.threw = true;
        out.code = e.code();
        out.what = e.what();
      }
      break;
    }
    case token_kind::deferred: {
      auto op = session.async_run(g, {}, asio::deferred);
      std::move(op)(keep);
      io.run();
      break;
    }
    default:
      asio::co_spawn(io, token_detail::await_forms(session, g, kind, out), asio::detached);
      io.run();
      break;
  }
  return out;
}

}  // namespace taskgroup::test
