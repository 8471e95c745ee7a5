// taskgroup: the local part of a run of the MPI protocol.
#include "mpi/run.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>

#include <utility>

namespace taskgroup::detail::mpi {

namespace asio = boost::asio;

void start_local(const state_ptr& s, const std::shared_ptr<run_ctx>& ctx, const task_group& group,
                 const std::map<std::string, int>& where, run_options options) {
  std::vector<std::string> mine;
  for (const auto& [node, r] : where) {
    if (r == s->rank) mine.push_back(node);
  }
  options.only_nodes = std::move(mine);
  // Rank 0's own outputs go through the codecs as if they travelled, so a
  // group fails the same way wherever its nodes are placed; the others'
  // are encoded for real when sent.
  options.strict_codecs = s->rank == 0 ? s->options.codecs : nullptr;
  options.timeout.reset();  // the deadline is rank 0's
  auto done = [ctx](boost::system::error_code, run_report r) {
    if (r.failure) {
      ctx->local = *r.failure;
      ctx->failed_local = std::move(r);
    } else {
      ctx->local = std::move(r);
    }
    ctx->local_done = true;
    ctx->wake.cancel();
  };
  s->local->async_run(
      group, std::move(options),
      asio::bind_cancellation_slot(ctx->local_cancel.slot(), asio::bind_executor(ctx->wake.get_executor(), done)));
}

void cancel_local(run_ctx& ctx) {
  if (!ctx.local_done) ctx.local_cancel.emit(asio::cancellation_type::terminal);
}

}  // namespace taskgroup::detail::mpi
