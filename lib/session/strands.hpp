// Internal: the strands of a session (its nodes', its coordinator) over
// the executor it was given.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

namespace taskgroup::detail {

/// One strand in two forms that share it: the public type, and an
/// any_io_executor for the library's own hops. A strand over an erased
/// executor does not fit an any_io_executor's inline storage, so each
/// copy of it with other properties (every post, dispatch and co_spawn
/// asks for a few) allocates; a strand over an io_context's or a
/// thread_pool's own executor type fits, so the erased form is built
/// from that when `ex` holds one.
struct erased_strand {
  boost::asio::strand<boost::asio::any_io_executor> strand;
  boost::asio::any_io_executor executor;
};

inline erased_strand make_erased_strand(const boost::asio::any_io_executor& ex) {
  namespace asio = boost::asio;
  auto from = [](const auto& inner) {
    auto s = asio::make_strand(inner);
    return erased_strand{asio::strand<asio::any_io_executor>(s), asio::any_io_executor(s)};
  };
  if (const auto* io = ex.target<asio::io_context::executor_type>()) return from(*io);
  if (const auto* pool = ex.target<asio::thread_pool::executor_type>()) return from(*pool);
  asio::strand<asio::any_io_executor> s = asio::make_strand(ex);
  return erased_strand{s, asio::any_io_executor(s)};
}

}  // namespace taskgroup::detail
