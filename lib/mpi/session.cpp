// taskgroup: the MPI session: its state from run to run, and the public
// API, which runs one run of the protocol at a time (rank 0's part in
// client.cpp, the others' in worker.cpp; docs/mpi-protocol.md).
#include <taskgroup/mpi_session.hpp>

#include "detail/errors.hpp"
#include "model/limits.hpp"
#include "model/task_access.hpp"
#include "mpi/cancellation.hpp"
#include "mpi/recycling.hpp"
#include "mpi/run.hpp"
#include "mpi/state.hpp"
#include "mpi/transport.hpp"
#include "session/report.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <utility>

namespace taskgroup {

namespace asio = boost::asio;

// ---- the session's state ------------------------------------------------------

namespace detail::mpi {

std::optional<error> options_fault(const mpi_options& o) {
  auto bad = [](const char* name, const std::string& fault) {
    return error(errc::invalid_task, std::string("mpi_options::") + name + " " + fault);
  };
  struct check {
    const char* name;
    std::string fault;
  };
  const check checks[] = {
      {"poll_spin", duration_fault(o.poll_spin, /*zero_ok=*/true)},
      {"poll_min", duration_fault(o.poll_min)},
      {"poll_max", duration_fault(o.poll_max)},
      {"grace", duration_fault(o.grace)},
      {"lost_after", duration_fault(o.lost_after, /*zero_ok=*/true)},
      {"heartbeat", duration_fault(o.heartbeat)},
  };
  for (const check& c : checks) {
    if (!c.fault.empty()) return bad(c.name, c.fault);
  }
  if (o.poll_max < o.poll_min) {
    return bad("poll_max", "must be at least poll_min (" + std::to_string(o.poll_min.count()) + " us), got " +
                               std::to_string(o.poll_max.count()) + " us");
  }
  return std::nullopt;
}

session_state::session_state(local_session& l, mpi_options o, bool threaded)
    : local(&l), options(std::move(o)), recycler(std::make_shared<value_recycler>()) {
  setup(threaded);
}

void session_state::setup(bool threaded) {
  if (options.codecs == nullptr) options.codecs = &codec_registry::global();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    init_error = error(errc::mpi_failed, "MPI is not initialized (construct a taskgroup::mpi_environment first)");
    return;
  }
  MPI_Query_thread(&thread_level);
  if (threaded && thread_level < MPI_THREAD_SERIALIZED) {
    init_error = error(errc::mpi_failed, "MPI provides too low a thread level for a session with several threads");
    return;
  }
  if (auto e = wrong_thread("the session is constructed")) {
    init_error = std::move(e);
    return;
  }
  if (auto st = check_mpi(MPI_Comm_dup(options.comm, &comm), "MPI_Comm_dup"); !st) {
    init_error = st.error();
    return;
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // After the collective MPI_Comm_dup, which every rank makes whatever its
  // options: a rank that refuses its options never leaves the others
  // waiting in it.
  init_error = options_fault(options);
}

std::optional<error> session_state::wrong_thread(const char* what) const {
  if (thread_level >= MPI_THREAD_SERIALIZED) return std::nullopt;
  int is_main = 0;
  MPI_Is_thread_main(&is_main);
  if (is_main != 0) return std::nullopt;
  return error(errc::mpi_failed,
               std::string(what) + " on a thread other than the one that initialized MPI, and MPI provides only " +
                   (thread_level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_SINGLE") +
                   ": initialize MPI with MPI_THREAD_SERIALIZED (taskgroup::mpi_environment does), or make the "
                   "session's MPI calls on that thread");
}

void session_state::free_comm() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm != MPI_COMM_NULL && finalized == 0) MPI_Comm_free(&comm);
  comm = MPI_COMM_NULL;
}

session_state::~session_state() { free_comm(); }

result<std::map<std::string, int>> session_state::place(const task_group& g) const {
  for (const auto& [node, r] : options.placement) {
    if (r < 0 || r >= size) {
      return fail(errc::invalid_task, "mpi_options::placement puts node " + quote(node) + " on rank " +
                                          std::to_string(r) + ", outside a job of " + std::to_string(size) + " ranks");
    }
  }
  std::map<std::string, int> out;
  int i = 0;
  for (const auto& n : g.used_nodes()) {
    auto it = options.placement.find(n);
    out[n] = it != options.placement.end() ? it->second : i % size;
    ++i;
  }
  return out;
}

}  // namespace detail::mpi

struct mpi_session::impl : detail::mpi::session_state {
  using session_state::session_state;
};

// ---- the session --------------------------------------------------------------

namespace {

// Every rank's run, always with a report: on failure the client's holds
// what each task did; another rank's holds its local report when it has
// one, or every task not run.
// Rank 0 counts each run it coordinated (`admitted`: it ran, not refused
// at its start); every rank's local session counts its own tasks.
void count_run(detail::mpi::session_state& s, const task_group& group, const run_report& r, bool admitted) noexcept {
  if (s.rank != 0 || !s.runs_book.enabled.load(std::memory_order_relaxed)) return;
  detail::run_tally t;
  t.outcome = outcome_of(r);
  t.admitted = admitted;
  t.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(r.finished - r.started);
  try {
    s.runs_book.series_for(group.name()).add(t, nullptr);
  } catch (...) {
    // Out of memory: the run goes uncounted.
  }
}

asio::awaitable<run_report> run_protocol(detail::mpi::state_ptr s, task_group group, run_options options) {
  // Terminal and partial cancellation stop a run (co_spawn lets only
  // terminal through by default); total cannot be honoured, as on the
  // local session, and is filtered out here.
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  const auto refused = [&](error e) {
    run_report r = detail::refused_report(group, std::move(e), std::chrono::system_clock::now());
    count_run(*s, group, r, false);
    return r;
  };
  if (s->closed.load()) co_return refused(error(errc::session_closed, "MPI session is closed."));
  if (s->init_error) co_return refused(*s->init_error);
  // Every rank makes the same check before any message: all fail alike.
  if (auto e = s->wrong_thread("the run's MPI protocol runs")) co_return refused(std::move(*e));
  if (s->running.exchange(true))
    co_return refused(error(errc::session_busy, "a run is already in flight on this MPI session"));
  const std::uint64_t run_id = ++s->runs;
  co_await asio::this_coro::throw_if_cancelled(false);
  run_report r;
  try {
    if (s->rank == 0) {
      r = co_await detail::mpi::run_client(s, group, options, run_id);
    } else {
      r = co_await detail::mpi::run_worker(s, group, options, run_id);
    }
  } catch (...) {
    r = refused(detail::error_from_exception(std::current_exception()));
  }
  s->running.store(false);
  r.group = detail::group_access::identity(group);
  count_run(*s, group, r, true);
  co_return r;
}

}  // namespace

mpi_session::mpi_session(asio::any_io_executor ex, mpi_options options)
    : local_(std::make_unique<local_session>(std::move(ex))),
      impl_(std::make_shared<impl>(*local_, std::move(options), false)) {}
mpi_session::mpi_session(std::size_t threads, mpi_options options)
    : pool_(std::make_unique<asio::thread_pool>(std::max<std::size_t>(threads, 1))),
      local_(std::make_unique<local_session>(pool_->get_executor())),
      impl_(std::make_shared<impl>(*local_, std::move(options), threads > 1)) {}

// Runs not started yet fail with session_closed. With an owned pool: wait
// for the work in flight, then drop the strand and the local session while
// the pool (their execution context) still exists. The communicator is
// freed here, not when the last holder of the state lets it go, so that
// every rank frees it at the same point of its program.
mpi_session::~mpi_session() {
  impl_->closed.store(true);
  local_->close();
  if (pool_) pool_->join();
  impl_->free_comm();
  impl_.reset();
  local_.reset();
}

void mpi_session::start_describe(describe_handler handler) {
  const auto ex = asio::get_associated_executor(handler, get_executor());
  local_->async_describe(asio::bind_executor(
      ex, [h = std::move(handler), rank = rank()](boost::system::error_code ec, session_description d) mutable {
        d.rank = rank;
        std::move(h)(ec, std::move(d));
      }));
}

session_metrics mpi_session::metrics() const {
  session_metrics m = local_->metrics();
  // The local session's runs are this rank's parts of runs: its tasks
  // count, its runs do not; the runs are rank 0's.
  for (group_metrics& g : m.groups) {
    g.runs = {};
    g.run_latency = {};
    g.queue_wait = {};
  }
  for (group_metrics& ran : impl_->runs_book.read()) {
    auto it =
        std::find_if(m.groups.begin(), m.groups.end(), [&](const group_metrics& g) { return g.group == ran.group; });
    if (it == m.groups.end()) {
      it = m.groups.insert(m.groups.end(), group_metrics{});
      it->group = ran.group;
    }
    group_metrics& into = *it;
    into.runs = ran.runs;
    into.run_latency = ran.run_latency;
    into.queue_wait = ran.queue_wait;
  }
  m.enabled = impl_->runs_book.enabled.load(std::memory_order_relaxed);
  m.rank = impl_->rank;
  return m;
}

void mpi_session::enable_metrics(bool on) noexcept {
  impl_->runs_book.enabled.store(on, std::memory_order_relaxed);
  local_->enable_metrics(on);
}

int mpi_session::rank() const noexcept { return impl_->rank; }
int mpi_session::size() const noexcept { return impl_->size; }
local_session& mpi_session::local() noexcept { return *local_; }
asio::any_io_executor mpi_session::get_executor() const { return local_->get_executor(); }
asio::any_io_executor mpi_session::strand_of(const impl& state) { return state.strand_ex; }

result<std::map<std::string, int>> mpi_session::placement(const task_group& group) const { return impl_->place(group); }

std::shared_ptr<asio::cancellation_signal> mpi_session::relay_cancellation(asio::cancellation_slot from,
                                                                           const impl& state) {
  return detail::forward_cancellation(from, state.strand_ex);
}

asio::awaitable<run_report> mpi_session::run_on_strand(std::shared_ptr<impl> state, task_group group,
                                                       run_options options) {
  return run_protocol(std::move(state), std::move(group), options);
}

run_report mpi_session::run(task_group group, run_options options, boost::system::error_code& ec) {
  run_report report = [&] {
    const auto now = std::chrono::system_clock::now();
    if (impl_->strand.running_in_this_thread()) {
      return detail::refused_report(
          group, error(errc::invalid_task, "mpi_session::run called from the MPI session's own strand would deadlock"),
          now);
    }
    // The protocol runs on this thread, which would otherwise only wait: no
    // hand-off to a pool thread at the start of the run nor back at its end.
    // The tasks run on the session's executor as with `async_run`.
    std::unique_lock lock(impl_->blocking_mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
      return detail::refused_report(group, error(errc::session_busy, "a run is already in flight on this MPI session"),
                                    now);
    }
    auto& here = impl_->blocking_loop ? *impl_->blocking_loop : impl_->blocking_loop.emplace(1);
    here.restart();
    std::optional<run_report> out;
    std::optional<error> failed;
    asio::co_spawn(here, run_protocol(impl_, group, std::move(options)),
                   [&](const std::exception_ptr& ep, run_report r) {
                     if (ep) {
                       failed = detail::error_from_exception(ep);
                     } else {
                       out = std::move(r);
                     }
                   });
    try {
      here.run();
    } catch (...) {
      failed = detail::error_from_exception(std::current_exception());
    }
    if (out) return std::move(*out);
    return detail::refused_report(group, failed ? *failed : error(errc::no_result, "the run did not complete"), now);
  }();
  ec = detail::report_code(report);
  return report;
}

run_report mpi_session::run(task_group group, run_options options) {
  boost::system::error_code ec;
  return detail::report_or_throw(run(std::move(group), std::move(options), ec));
}

}  // namespace taskgroup
