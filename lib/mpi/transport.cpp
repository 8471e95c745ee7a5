// taskgroup: the MPI session's transport: nonblocking sends and receives,
// detached values, the pace of polling, and the end of a job that lost a rank.
#include "mpi/transport.hpp"

#include "mpi/recycling.hpp"
#include "mpi/wire.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace taskgroup::detail::mpi {

namespace asio = boost::asio;

namespace {

std::string mpi_text(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return std::string(buf, static_cast<std::size_t>(len));
}

}  // namespace

status check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return ok();
  return fail(errc::mpi_failed, std::string(what) + ": " + mpi_text(rc));
}

void send_bytes(const state_ptr& s, run_ctx& ctx, int dest, int tag, std::string_view bytes,
                std::shared_ptr<const void> keep) {
  if (ctx.mpi_error) return;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    ctx.mpi_error = error(errc::mpi_failed, "a message of " + std::to_string(bytes.size()) + " bytes to rank " +
                                                std::to_string(dest) + " exceeds what one MPI message can carry");
    return;
  }
  pending_send p;
  p.keep = std::move(keep);
  p.dest = dest;
  const int rc = MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, s->comm, &p.request);
  if (auto st = check_mpi(rc, "MPI_Isend"); !st) {
    ctx.mpi_error = st.error();
    return;
  }
  ctx.sends.push_back(std::move(p));
}

void send(const state_ptr& s, run_ctx& ctx, int dest, int tag, std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  const std::string_view view(*owned);
  send_bytes(s, ctx, dest, tag, view, std::move(owned));
}

bool progress_sends(run_ctx& ctx) {
  bool progressed = false;
  for (auto it = ctx.sends.begin(); it != ctx.sends.end();) {
    int flag = 0;
    if (auto st = check_mpi(MPI_Test(&it->request, &flag, MPI_STATUS_IGNORE), "MPI_Test"); !st) {
      ctx.mpi_error = st.error();
      return progressed;
    }
    if (flag != 0) {
      it = ctx.sends.erase(it);
      progressed = true;
    } else {
      ++it;
    }
  }
  return progressed;
}

void abandon_sends(const state_ptr& s, run_ctx& ctx, int dest) {
  for (auto it = ctx.sends.begin(); it != ctx.sends.end();) {
    if (it->dest != dest) {
      ++it;
      continue;
    }
    MPI_Request_free(&it->request);
    s->abandoned.push_back(std::move(it->keep));
    it = ctx.sends.erase(it);
  }
}

bool try_receive(const state_ptr& s, run_ctx& ctx, int source, int tag, std::string& out, int& from) {
  if (ctx.mpi_error) return false;
  int flag = 0;
  MPI_Message msg = MPI_MESSAGE_NULL;
  MPI_Status probe;
  if (auto st = check_mpi(MPI_Improbe(source, tag, s->comm, &flag, &msg, &probe), "MPI_Improbe"); !st) {
    ctx.mpi_error = st.error();
    return false;
  }
  if (flag == 0) return false;
  int count = 0;
  MPI_Get_count(&probe, MPI_BYTE, &count);
  out.assign(static_cast<std::size_t>(count), '\0');
  // The message is matched and under way: receiving it only waits for
  // the bytes themselves.
  if (auto st = check_mpi(MPI_Mrecv(out.data(), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv"); !st) {
    ctx.mpi_error = st.error();
    return false;
  }
  from = probe.MPI_SOURCE;
  return true;
}

result<std::shared_ptr<const blob>> receive_detached(const state_ptr& s, int from, const std::string& tag,
                                                     std::uint64_t size, std::shared_ptr<const blob> reuse) {
  auto codec = s->options.codecs->find(tag);
  if (!codec || !codec->adopt) return fail(errc::not_serializable, "no contiguous codec tagged " + quote(tag));
  if (size > static_cast<std::uint64_t>(INT_MAX)) return fail(errc::mpi_failed, "a value too large for one message");
  std::shared_ptr<const blob> value = reception_blob(s->recycler, tag, std::move(reuse));
  // Made as a mutable blob (received_value) and held by no one else.
  char* where = codec->adopt(const_cast<blob&>(*value), static_cast<std::size_t>(size));  // NOLINT
  if (where == nullptr && size != 0) {
    return fail(errc::not_serializable, std::to_string(size) + " bytes cannot hold a " + tag);
  }
  TASKGROUP_TRY(check_mpi(
      MPI_Recv(where, static_cast<int>(size), MPI_BYTE, from, tag_payload, s->comm, MPI_STATUS_IGNORE), "MPI_Recv"));
  return value;
}

void drain_detached(const state_ptr& s, int from, std::uint32_t count) {
  for (std::uint32_t i = 0; i < count; ++i) {
    MPI_Message msg = MPI_MESSAGE_NULL;
    MPI_Status probe;
    if (MPI_Mprobe(from, tag_payload, s->comm, &msg, &probe) != MPI_SUCCESS) return;
    int n = 0;
    MPI_Get_count(&probe, MPI_BYTE, &n);
    std::string scratch(static_cast<std::size_t>(n), '\0');
    MPI_Mrecv(scratch.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  }
}

namespace {

// Sleeps until the next poll (or until woken by the local run ending).
asio::awaitable<void> nap(run_ctx& ctx, std::chrono::microseconds interval,
                          std::optional<clock_type::time_point> until) {
  auto wait = std::chrono::duration_cast<clock_type::duration>(interval);
  if (until) wait = std::min(wait, std::max(clock_type::duration::zero(), *until - clock_type::now()));
  ctx.wake.expires_after(wait);
  (void)co_await ctx.wake.async_wait(asio::as_tuple(asio::use_awaitable));
}

}  // namespace

asio::awaitable<void> pacer::wait(run_ctx& ctx, bool progressed, std::optional<clock_type::time_point> until) {
  const auto now = clock_type::now();
  if (progressed) {
    last_ = now;
    interval_ = o_.poll_min;
  }
  if (now - last_ < o_.poll_spin) {
    co_await asio::defer(ctx.wake.get_executor(), asio::use_awaitable);
    co_return;
  }
  co_await nap(ctx, interval_, until);
  interval_ = std::min(interval_ * 2, o_.poll_max);
}

[[noreturn, gnu::noinline, gnu::cold]] void abort_job(const state_ptr& s, const std::string& why) {
  std::fprintf(stderr, "taskgroup: rank %d: %s; aborting the MPI job\n", s->rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(s->comm, 1);
  std::abort();  // MPI_Abort does not return; this is for the compiler
}

}  // namespace taskgroup::detail::mpi
