// taskgroup command: `taskgroup run`. The plan is read and checked with
// its inputs, then run on a session whose completion, signals (SIGINT,
// SIGTERM, SIGUSR1, SIGQUIT) and progress are handled on this thread's
// io_context; the outputs and the exit status follow from how the run
// ended.
#include "run_command.hpp"

#include "command.hpp"
#include "ops.hpp"
#include "progress.hpp"
#include "results.hpp"
#include "start_run.hpp"

#include <taskgroup/error.hpp>
#include <taskgroup/fan_out_observer.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/session_description.hpp>
#include <taskgroup/trace_recorder.hpp>
#ifdef TASKGROUP_HAVE_MPI
#include <taskgroup/mpi_session.hpp>
#endif

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::cli {

namespace asio = boost::asio;

namespace {

// The run's feeds from --inputs FILE and each --input node/blob=JSON.
result<feeds> feeds_of(const run_args& a, const task_group& group) {
  feeds out;
  auto append = [&](const feeds& f) {
    for (const auto& e : f.entries()) out.set_blob(e.node, e.blob, e.value);
  };
  if (!a.inputs_file.empty()) {
    auto f = read_feeds_file(a.inputs_file, group);
    if (!f) return f.error();
    append(f.value());
  }
  for (const std::string_view arg : a.inputs) {
    const std::string what = "--input " + quote(escape_controls(arg)) + ": ";
    const auto eq = arg.find('=');
    if (eq == std::string_view::npos) return fail(errc::invalid_plan, what + "expected node/blob=JSON");
    // Its errors are placed in the value; only those of its JSON get the hint.
    auto value = parse_json(arg.substr(eq + 1));
    if (!value) {
      return fail(errc::invalid_plan,
                  what + value.error().message + " (the value is JSON: quote a string, e.g. '\"text\"')");
    }
    auto e = read_feed(arg.substr(0, eq), value.value(), group);
    if (!e) return fail(errc::invalid_plan, what + e.error().message);
    out.set_blob(std::move(e.value().node), std::move(e.value().blob), std::move(e.value().value));
  }
  return out;
}

// Only the client speaks (rank 0 of an MPI run, or the only process):
// other ranks return the same status silently.
int report_error(bool client, const std::string& message, int code) {
  return client ? print_error(message, code) : code;
}

// What a run needs that can be wrong before it starts; any of it wrong is
// a usage error.
struct run_setup {
  task_group group;
  run_options options;       // the observer and the probe come with the run
  std::string trace_path;    // this process's --trace file (none: empty)
  std::ofstream trace_file;  // open when this process writes the trace
  std::string metrics_path;  // this process's --metrics file (none: empty)
  std::ofstream metrics_file;
};

// Where rank `rank` writes --metrics FILE or --trace FILE: FILE itself on
// rank 0 (and outside MPI), else FILE with ".rank<r>" before its extension.
std::string rank_path_of(const std::string& file, int rank) {
  if (rank == 0) return file;
  const std::size_t slash = file.find_last_of('/');
  const std::size_t dot = file.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string mark = ".rank" + std::to_string(rank);
  return has_ext ? file.substr(0, dot) + mark + file.substr(dot) : file + mark;
}

// Loads the op libraries, reads the plan, opens the trace file and reads
// the inputs, in that order (the first failure is the one reported).
result<run_setup> prepare_run(const run_args& a, int rank) {
  // Every rank loads them: each reads the plan and binds its nets.
  if (auto libs = load_libraries(a.libraries); !libs) return libs.error();

  run_setup s;
  auto group = read_plan_file(a.plan);
  if (!group) return group.error();
  s.group = std::move(group).value();

  if (!a.trace.empty()) {
    s.trace_path = rank_path_of(a.trace, rank);
    s.trace_file.open(s.trace_path, std::ios::binary | std::ios::trunc);
    if (!s.trace_file) {
      return error(boost::system::errc::make_error_code(boost::system::errc::io_error),
                   "cannot write trace file " + quote(s.trace_path));
    }
  }

  if (!a.metrics.empty()) {
    s.metrics_path = rank_path_of(a.metrics, rank);
    s.metrics_file.open(s.metrics_path, std::ios::binary | std::ios::trunc);
    if (!s.metrics_file) {
      return error(boost::system::errc::make_error_code(boost::system::errc::io_error),
                   "cannot write metrics file " + quote(s.metrics_path));
    }
  }

  if (!a.trace_parent.empty()) {
    // A usage error, before anything runs: "--trace-parent <what is wrong>".
    s.options.trace_parent = a.trace_parent;
    if (auto t = s.options.trace_parent.parse(); !t) {
      constexpr std::string_view own = "trace_parent";
      const std::string& m = t.error().message;
      return error(t.error().code, "--trace-parent" + (m.starts_with(own) ? m.substr(own.size()) : ": " + m));
    }
  }
  s.options.policy = a.policy == "gather" ? run_policy::gather : run_policy::join;
  auto fed = feeds_of(a, s.group);
  if (!fed) return fed.error();
  s.options.feeds = std::move(fed).value();
  if (a.timeout_s) {
    // Whole milliseconds, rounded up (a positive timeout never becomes 0),
    // at most 10^9 s so that the deadline stays in the clock's range.
    const double ms = std::ceil(std::min(*a.timeout_s, 1e9) * 1000.0);
    s.options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  }
  return s;
}

#ifdef TASKGROUP_HAVE_MPI
// The MPI session's options: --poll-max and --grace over the defaults.
mpi_options mpi_options_of(const run_args& a) {
  mpi_options mo;
  if (a.poll_max_us) {
    mo.poll_max = std::chrono::microseconds(*a.poll_max_us);
    mo.poll_min = std::min(mo.poll_min, mo.poll_max);
  }
  if (a.grace_s) {
    // Whole milliseconds, rounded up, at most 10^6 s.
    mo.grace = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(std::min(*a.grace_s, 1e6) * 1000.0)));
  }
  return mo;
}
#endif

// The exit status of a run that failed (`report.failure`), its error
// printed: a usage error's (feeds), a signal's, the timeout's, or a failed
// run's. With --json the client prints the run's object first, as after a
// success, whenever the run started (each task that did not succeed
// without outputs): a program reading stdout gets one object either way.
int failed_run_status(const run_report& report, int signal_number, bool json, bool client) {
  const error& e = *report.failure;
  // Feeds that do not match the plan's inputs: nothing ran, a usage error.
  if (e.code == errc::invalid_feed) return report_error(client, e.message, exit_usage);
  if (json && client) print_out(json_text(outputs_json(report)));
  if (signal_number != 0 && e.is_cancelled()) {
    // The run's own words, the signal named: "run cancelled by SIGINT;
    // still running then: <where each task waited>".
    const std::string by = std::string("run cancelled by ") + (signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    constexpr std::string_view own = "run cancelled";
    const std::string message = e.message.starts_with(own) ? by + e.message.substr(own.size()) : by + ": " + e.message;
    return report_error(client, message, 128 + signal_number);
  }
  // Status 3 is the run's own deadline; a task that failed on its step's
  // deadline is a failed task (its error is then the run's).
  const bool task_timed_out = std::any_of(report.tasks.begin(), report.tasks.end(), [&](const task_report& t) {
    return t.status == task_status::failed && t.failure && t.failure->message == e.message;
  });
  if (e.code == errc::timeout && !task_timed_out) return report_error(client, e.message, exit_timeout);
  return report_error(client, e.message, exit_run_failed);
}

// The exit status of a run that completed; the client prints its outputs
// and, when tasks failed, their failures.
int completed_run_status(const run_report& report, bool json, bool client) {
  if (!client)
    return report.tasks.empty() || std::all_of(report.tasks.begin(), report.tasks.end(),
                                               [](const auto& t) {
                                                 return t.status == task_status::succeeded ||
                                                        t.status == task_status::not_run;
                                               })
               ? exit_ok
               : exit_run_failed;
  if (json) {
    print_out(json_text(outputs_json(report)));
  } else {
    print_out(outputs_table(report));
  }
  if (report.ok()) return exit_ok;
  // Gather: every failure, in task order.
  for (const auto& t : report.tasks) {
    if (t.failure) print_error(t.failure->message, exit_run_failed);
  }
  return exit_run_failed;
}

// One run of the plan on this process: the io_context its completion
// comes back to, its observers (progress, trace), the live view of its
// session and the signals it catches. Kept until the command returns, so that SIGINT and
// SIGTERM stay caught while the outputs print.
class plan_run {
 public:
  // `trace_rank`: when tracing under MPI, this process's rank (the trace
  // file says it), else -1.
  plan_run(const run_args& a, bool client, bool tracing, int trace_rank);

  // Runs `group` on an MPI session when `on_mpi`, else on a local one, and
  // returns once the run ended and the session's pools are joined.
  void run(const task_group& group, run_options options, bool on_mpi);
  // The trace into `file`, when tracing; false when it cannot be written.
  bool write_trace(std::ofstream& file);
  // The session's metrics at the run's end into `file` (JSON when `path`
  // ends in .json, else Prometheus text); false when it cannot be written.
  bool write_metrics(std::ofstream& file, const std::string& path);
  // The command's exit status; the client prints the outputs or the error.
  int exit_code() const;

 private:
  void wait_for_signal();
  void on_signal(const boost::system::error_code& ec, int sig);
  void wait_for_where();
  void on_where(const boost::system::error_code& ec, int sig);
  void print_where(int sig, const session_description& d);
  void on_done(run_report r);

  const run_args& a_;
  bool client_;
  asio::io_context io_;  // before the observers: they may hold its timers
  progress progress_;
  std::optional<trace_recorder> trace_;
  fan_out_observer fan_out_;
  // The session's async_describe while the run is in flight.
  std::function<void(std::function<void(session_description)>)> describe_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::signal_set signals_;
  asio::cancellation_signal cancel_;
  int signal_number_ = 0;
  std::optional<run_report> outcome_;
  std::optional<session_metrics> metrics_;  // the session's, as the run ended
  asio::signal_set where_signals_;
};

plan_run::plan_run(const run_args& a, bool client, bool tracing, int trace_rank)
    : a_(a),
      client_(client),
      progress_(a.quiet || !client ? progress_mode::quiet : default_progress_mode()),
      work_(asio::make_work_guard(io_)),
      signals_(io_, SIGINT, SIGTERM),
      where_signals_(io_, SIGUSR1, SIGQUIT) {
  fan_out_.add(&progress_);
  if (tracing) {
    trace_.emplace();
    if (trace_rank >= 0) trace_->set_rank(trace_rank);
    fan_out_.add(&*trace_);
  }
  wait_for_signal();
  wait_for_where();
}

void plan_run::run(const task_group& group, run_options options, [[maybe_unused]] bool on_mpi) {
  options.observer = &fan_out_;
  auto done = [this](run_report r) { on_done(std::move(r)); };
  {
#ifdef TASKGROUP_HAVE_MPI
    std::optional<mpi_session> mpi;
    if (on_mpi) mpi.emplace(a_.threads, mpi_options_of(a_));
#endif
    std::optional<local_session> local;
    progress_.start(io_);
#ifdef TASKGROUP_HAVE_MPI
    if (mpi) {
      describe_ = [this, &mpi](auto print) {
        mpi->async_describe(asio::bind_executor(io_, [print](auto, session_description d) { print(std::move(d)); }));
      };
      start_run(*mpi, group, std::move(options), io_, cancel_.slot(), done);
    } else
#endif
    {
      local.emplace(a_.threads);
      describe_ = [this, &local](auto print) {
        local->async_describe(asio::bind_executor(io_, [print](auto, session_description d) { print(std::move(d)); }));
      };
      start_run(*local, group, std::move(options), io_, cancel_.slot(), done);
    }
    io_.run();
    describe_ = nullptr;
#ifdef TASKGROUP_HAVE_MPI
    if (mpi) metrics_ = mpi->metrics();
#endif
    if (local) metrics_ = local->metrics();
  }  // the sessions' pools are joined here
  progress_.finish();
}

bool plan_run::write_metrics(std::ofstream& file, const std::string& path) {
  if (!file.is_open() || !metrics_) return true;
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  file << (json ? to_json(*metrics_) + '\n' : to_prometheus(*metrics_));
  file.close();
  return static_cast<bool>(file);
}

bool plan_run::write_trace(std::ofstream& file) {
  if (!trace_) return true;
  // The run's trace context names the trace and parents its spans (a run
  // that did not complete has none: fresh ids then).
  const trace_context run = outcome_ && outcome_->trace.valid() ? outcome_->trace : trace_context::fresh();
  file << trace_->to_json(run) << '\n';
  file.close();
  return static_cast<bool>(file);
}

int plan_run::exit_code() const {
  if (!outcome_) return report_error(client_, "the run did not complete", exit_run_failed);
  if (outcome_->failure) return failed_run_status(*outcome_, signal_number_, a_.json, client_);
  return completed_run_status(*outcome_, a_.json, client_);
}

void plan_run::wait_for_signal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) { on_signal(ec, sig); });
}

// SIGINT or SIGTERM: the first cancels the run, a second exits at once.
void plan_run::on_signal(const boost::system::error_code& ec, int sig) {
  if (ec) return;  // the run ended: waiting was cancelled
  if (signal_number_ != 0) {
    // A second signal: the run did not unwind (an op blocking its thread).
    std::fprintf(stderr, "taskgroup: interrupted again; exiting without waiting for the run\n");
    std::fflush(stderr);
    std::_Exit(128 + sig);
  }
  signal_number_ = sig;
  progress_.note(std::string("taskgroup: ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                 ": cancelling the run (again to exit at once)");
  cancel_.emit(asio::cancellation_type::terminal);
  wait_for_signal();
}

void plan_run::wait_for_where() {
  where_signals_.async_wait([this](const boost::system::error_code& ec, int sig) { on_where(ec, sig); });
}

// SIGUSR1 or SIGQUIT: where each running task waits (this rank's, printed
// by rank 0), on stderr even with --quiet; the run goes on.
void plan_run::on_where(const boost::system::error_code& ec, int sig) {
  if (ec) return;  // the run ended
  if (describe_) describe_([this, sig](session_description d) { print_where(sig, d); });
  wait_for_where();
}

void plan_run::print_where(int sig, const session_description& d) {
  if (!client_) return;
  auto print = [&](const std::string& line) {
    if (a_.quiet) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    } else {
      progress_.note(line);
    }
  };
  const std::string head = std::string("taskgroup: ") + (sig == SIGQUIT ? "SIGQUIT" : "SIGUSR1") + ": ";
  // The command's one run, when in flight (the session holds no other).
  const run_description* run = d.runs.empty() ? nullptr : &d.runs.front();
  if (run == nullptr || run->waiting.empty()) {
    print(head + "no task is running");
    return;
  }
  print(head + "where the running tasks stand (trace " + run->trace_id + "):");
  for (const auto& line : run->waiting) print("  " + line);
}

void plan_run::on_done(run_report r) {
  outcome_ = std::move(r);
  cancel_.slot().clear();
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  where_signals_.cancel(ignored);
  progress_.finish();
  work_.reset();
}

}  // namespace

int run_command(const run_args& a) {
#ifdef TASKGROUP_HAVE_MPI
  // MPI before anything else, and finalized after everything (last
  // destroyed): every rank reads the plan and exits with the run's status.
  std::optional<mpi_environment> mpi_env;
  if (a.mpi || mpi_environment::launched_by_mpi()) mpi_env.emplace();
  const bool on_mpi = mpi_env.has_value();
  const int rank = mpi_env ? mpi_env->rank() : 0;
  const bool client = rank == 0;
#else
  if (a.mpi) return print_error("--mpi: this taskgroup was built without MPI", exit_usage);
  const bool on_mpi = false;
  const int rank = 0;
  const bool client = true;
#endif
  if (!on_mpi && (a.poll_max_us || a.grace_s)) {
    return report_error(client, "--poll-max and --grace apply to MPI runs only (under mpirun, or with --mpi)",
                        exit_usage);
  }
  auto setup = prepare_run(a, rank);
  if (!setup) return report_error(client, setup.error().message, exit_usage);
  run_setup& s = setup.value();

  int code = exit_ok;
  {
    plan_run this_run(a, client, s.trace_file.is_open(), on_mpi ? rank : -1);
    this_run.run(s.group, std::move(s.options), on_mpi);
    code = this_run.exit_code();
    if (!this_run.write_trace(s.trace_file)) {
      // A failed run keeps its own status.
      const int unwritten = report_error(client, "cannot write trace file " + quote(s.trace_path), exit_unwritten);
      if (code == exit_ok) code = unwritten;
    }
    if (!this_run.write_metrics(s.metrics_file, s.metrics_path)) {
      const int unwritten = report_error(client, "cannot write metrics file " + quote(s.metrics_path), exit_unwritten);
      if (code == exit_ok) code = unwritten;
    }
  }
  drop_where_signals();  // the run's handler is gone
  return code;
}

}  // namespace taskgroup::cli
