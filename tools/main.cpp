// taskgroup: the command-line runner for plan files (docs/plan-format.md).
//
//   taskgroup run PLAN [--threads N] [--policy join|gather] [--timeout S]
//                      [--trace FILE] [--json] [--quiet] [--mpi]
//                      [--poll-max USEC] [--grace S] [--load LIB]...
//                      [--input NODE/BLOB=JSON]... [--inputs FILE.json]
//   mpirun -np N taskgroup run PLAN ...   (nodes spread over the ranks)
//   taskgroup check PLAN [--load LIB]...
//   taskgroup graph PLAN [--load LIB]...
//   taskgroup fmt PLAN [--load LIB]...     (the plan as the writer writes it)
//   taskgroup ops [--json] [--load LIB]... (the registered operators)
//
// --load (repeatable) loads an op library (include/taskgroup/op_library.hpp)
// into the global registry before the plan is read; a library that cannot
// be loaded is a usage error (2).
//
// Under an MPI launcher (detected from the environment, or with --mpi) the
// plan runs on an MPI session: rank 0 prints progress, outputs and errors,
// other ranks print nothing of their own, and every rank exits with the
// run's status.
//
// Exit status: 0 success, 1 the run failed (a task failed, or was
// cancelled from inside), 2 usage or plan error (or an op library that
// cannot be loaded, or inputs that do not match the plan's), 3 the run
// timed out,
// 128 + signal number when cancelled by SIGINT (130) or SIGTERM (143).
// SIGUSR1 prints where each running task waits (run_probe) and the run
// goes on.
//
// stdout carries only results (the outputs table, the --json object, the
// check summary, DOT, the formatted plan); progress, Print lines and
// errors (`taskgroup: <message>`) go to stderr.
#include "check.hpp"
#include "graph.hpp"
#include "ops.hpp"
#include "progress.hpp"
#include "results.hpp"
#include "start_run.hpp"
#include "trace.hpp"

#include <taskgroup/error.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#ifdef TASKGROUP_HAVE_MPI
#include <taskgroup/mpi_session.hpp>
#endif

#include <CLI/CLI.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace tg = taskgroup;

namespace {

enum exit_status : int {
  exit_ok = 0,
  exit_run_failed = 1,
  exit_usage = 2,
  exit_timeout = 3,
};

int print_error(const std::string& message, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "taskgroup: %s\n", message.c_str());
  std::fflush(stderr);
  return code;
}

void print_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Fans the session's events out to several observers.
class observers final : public tg::run_observer {
 public:
  void add(tg::run_observer* o) { list_.push_back(o); }
  void run_begin(const std::vector<std::pair<std::string, std::string>>& tasks) override {
    for (auto* o : list_) o->run_begin(tasks);
  }
  void task_begin(std::string_view task, std::string_view node) override {
    for (auto* o : list_) o->task_begin(task, node);
  }
  void task_end(const tg::task_report& report) override {
    for (auto* o : list_) o->task_end(report);
  }
  void step_begin(std::string_view task, std::string_view node, std::string_view step) override {
    for (auto* o : list_) o->step_begin(task, node, step);
  }
  void step_end(std::string_view task, std::string_view node, std::string_view step, std::uint64_t iterations,
                const tg::status& result) override {
    for (auto* o : list_) o->step_end(task, node, step, iterations, result);
  }
  void net_begin(std::string_view task, std::string_view node, std::string_view net) override {
    for (auto* o : list_) o->net_begin(task, node, net);
  }
  void net_end(std::string_view task, std::string_view node, std::string_view net, const tg::status& result) override {
    for (auto* o : list_) o->net_end(task, node, net, result);
  }
  void report_begin(std::string_view task, std::string_view node, std::string_view step) override {
    for (auto* o : list_) o->report_begin(task, node, step);
  }
  void report_end(std::string_view task, std::string_view node, std::string_view step,
                  const tg::status& result) override {
    for (auto* o : list_) o->report_end(task, node, step, result);
  }

 private:
  std::vector<tg::run_observer*> list_;
};

struct run_args {
  std::string plan;
  std::size_t threads = 1;
  std::string policy = "join";
  std::optional<double> timeout_s;  // set when --timeout was given
  std::string trace;
  bool json = false;
  bool quiet = false;
  bool mpi = false;
  std::optional<std::int64_t> poll_max_us;  // MPI only: mpi_options::poll_max
  std::optional<double> grace_s;            // MPI only: mpi_options::grace
  std::vector<std::string> libraries;       // --load
  std::vector<std::string> inputs;          // --input node/blob=JSON
  std::string inputs_file;                  // --inputs FILE.json
};

// The run's feeds from --inputs FILE and each --input node/blob=JSON.
tg::result<tg::feeds> feeds_of(const run_args& a, const tg::task_group& group) {
  tg::feeds out;
  auto append = [&](const tg::feeds& f) {
    for (const auto& e : f.entries()) out.set_blob(e.node, e.blob, e.value);
  };
  if (!a.inputs_file.empty()) {
    std::ifstream in(a.inputs_file, std::ios::binary);
    if (!in) return tg::fail(tg::errc::invalid_plan, "cannot read inputs file " + tg::quote(a.inputs_file));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto f = tg::read_feeds(text, group);
    if (!f) return f.error().with_context("inputs file " + tg::quote(a.inputs_file));
    append(f.value());
  }
  for (const auto& arg : a.inputs) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos) {
      return tg::fail(tg::errc::invalid_plan, "--input " + tg::quote(arg) + ": expected node/blob=JSON");
    }
    const std::string text =
        "{" + boost::json::serialize(boost::json::string(arg.substr(0, eq))) + ": " + arg.substr(eq + 1) + "}";
    auto f = tg::read_feeds(text, group);
    if (!f) {
      return tg::fail(tg::errc::invalid_plan, "--input " + tg::quote(arg) + ": " + f.error().message +
                                                  " (the value is JSON: quote a string, e.g. '\"text\"')");
    }
    append(f.value());
  }
  return out;
}

int run_command(const run_args& a) {
#ifdef TASKGROUP_HAVE_MPI
  // MPI before anything else, and finalized after everything (last
  // destroyed): every rank reads the plan and exits with the run's status.
  std::optional<tg::mpi_environment> mpi_env;
  if (a.mpi || tg::mpi_environment::launched_by_mpi()) mpi_env.emplace();
  const bool client = !mpi_env || mpi_env->rank() == 0;
#else
  if (a.mpi) return print_error("--mpi: this taskgroup was built without MPI", exit_usage);
  const bool client = true;
#endif
  // Only the client speaks: other ranks return the same status silently.
  auto report_error = [client](const std::string& message, int code) {
    return client ? print_error(message, code) : code;
  };

#ifdef TASKGROUP_HAVE_MPI
  const bool on_mpi = mpi_env.has_value();
#else
  const bool on_mpi = false;
#endif
  if (!on_mpi && (a.poll_max_us || a.grace_s)) {
    return report_error("--poll-max and --grace apply to MPI runs only (under mpirun, or with --mpi)", exit_usage);
  }
  // Every rank loads them: each reads the plan and binds its nets.
  if (auto libs = tg::cli::load_libraries(a.libraries); !libs) return report_error(libs.error().message, exit_usage);

  auto group = tg::read_plan_file(a.plan);
  if (!group) return report_error(group.error().message, exit_usage);

  std::ofstream trace_file;
  const bool tracing = !a.trace.empty() && client;
  if (tracing) {
    trace_file.open(a.trace, std::ios::binary | std::ios::trunc);
    if (!trace_file) return report_error("cannot write trace file " + tg::quote(a.trace), exit_usage);
  }

  tg::run_options options;
  options.policy = a.policy == "gather" ? tg::run_policy::gather : tg::run_policy::join;
  auto fed = feeds_of(a, group.value());
  if (!fed) return report_error(fed.error().message, exit_usage);
  options.feeds = std::move(fed).value();
  if (a.timeout_s) {
    // Whole milliseconds, rounded up (a positive timeout never becomes 0),
    // at most 10^9 s so that the deadline stays in the clock's range.
    const double ms = std::ceil(std::min(*a.timeout_s, 1e9) * 1000.0);
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  }

  asio::io_context io;  // before the observers: they may hold its timers
  tg::cli::progress progress(a.quiet || !client ? tg::cli::progress_mode::quiet : tg::cli::default_progress_mode());
  std::optional<tg::cli::trace_recorder> trace;
  observers fan_out;
  fan_out.add(&progress);
  if (tracing) fan_out.add(&trace.emplace());
  options.observer = &fan_out;
  tg::run_probe probe;
  options.probe = &probe;

  auto work = asio::make_work_guard(io);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::cancellation_signal cancel;
  int signal_number = 0;
  std::optional<tg::result<tg::run_report>> outcome;

  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                             int sig) {
    if (ec) return;  // the run ended: waiting was cancelled
    if (signal_number != 0) {
      // A second signal: the run did not unwind (an op blocking its thread).
      std::fprintf(stderr, "taskgroup: interrupted again; exiting without waiting for the run\n");
      std::fflush(stderr);
      std::_Exit(128 + sig);
    }
    signal_number = sig;
    progress.note(std::string("taskgroup: ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                  ": cancelling the run (again to exit at once)");
    cancel.emit(asio::cancellation_type::terminal);
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  // SIGUSR1: where each running task waits (this rank's, printed by rank
  // 0), on stderr even with --quiet; the run goes on.
  asio::signal_set where_signals(io, SIGUSR1);
  std::function<void(const boost::system::error_code&, int)> on_where = [&](const boost::system::error_code& ec, int) {
    if (ec) return;  // the run ended
    probe.async_where(asio::bind_executor(io, [&](std::vector<std::string> lines) {
      if (!client) return;
      auto print = [&](const std::string& line) {
        if (a.quiet) {
          std::fprintf(stderr, "%s\n", line.c_str());
          std::fflush(stderr);
        } else {
          progress.note(line);
        }
      };
      print(lines.empty() ? std::string("taskgroup: SIGUSR1: no task is running")
                          : "taskgroup: SIGUSR1: where the running tasks stand:");
      for (const auto& line : lines) print("  " + line);
    }));
    where_signals.async_wait(on_where);
  };
  where_signals.async_wait(on_where);

  auto on_done = [&](tg::result<tg::run_report> r) {
    outcome = std::move(r);
    cancel.slot().clear();
    boost::system::error_code ignored;
    signals.cancel(ignored);
    where_signals.cancel(ignored);
    progress.finish();
    work.reset();
  };
  {
#ifdef TASKGROUP_HAVE_MPI
    std::optional<tg::mpi_session> mpi;
    if (mpi_env) {
      tg::mpi_options mo;
      if (a.poll_max_us) {
        mo.poll_max = std::chrono::microseconds(*a.poll_max_us);
        mo.poll_min = std::min(mo.poll_min, mo.poll_max);
      }
      if (a.grace_s) {
        // Whole milliseconds, rounded up, at most 10^6 s.
        mo.grace = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(std::min(*a.grace_s, 1e6) * 1000.0)));
      }
      mpi.emplace(a.threads, std::move(mo));
    }
#endif
    std::optional<tg::local_session> local;
    progress.start(io);
#ifdef TASKGROUP_HAVE_MPI
    if (mpi) {
      tg::cli::start_run(*mpi, group.value(), options, io, cancel.slot(), on_done);
    } else
#endif
    {
      local.emplace(a.threads);
      tg::cli::start_run(*local, group.value(), options, io, cancel.slot(), on_done);
    }
    io.run();
  }  // the sessions' pools are joined here
  progress.finish();

  if (trace) {
    const std::string text = boost::json::serialize(trace->to_json());
    trace_file << text << '\n';
    trace_file.close();
    if (!trace_file) return report_error("cannot write trace file " + tg::quote(a.trace), exit_run_failed);
  }

  if (!outcome) return report_error("the run did not complete", exit_run_failed);
  auto& r = *outcome;
  if (!r) {
    const tg::error& e = r.error();
    if (signal_number != 0 && e.is_cancelled()) {
      return report_error(std::string("run cancelled by ") + (signal_number == SIGINT ? "SIGINT" : "SIGTERM"),
                          128 + signal_number);
    }
    if (e.code == tg::errc::timeout) return report_error(e.message, exit_timeout);
    // Feeds that do not match the plan's inputs: nothing ran, a usage error.
    if (e.code == tg::errc::invalid_feed) return report_error(e.message, exit_usage);
    return report_error(e.message, exit_run_failed);
  }
  const tg::run_report& report = r.value();
  if (!client)
    return report.tasks.empty() || std::all_of(report.tasks.begin(), report.tasks.end(),
                                               [](const auto& t) {
                                                 return t.status == tg::task_status::succeeded ||
                                                        t.status == tg::task_status::not_run;
                                               })
               ? exit_ok
               : exit_run_failed;
  if (a.json) {
    print_out(tg::cli::json_text(tg::cli::outputs_json(report)));
  } else {
    print_out(tg::cli::outputs_table(report));
  }
  if (report.ok()) return exit_ok;
  // Gather: every failure, in task order.
  for (const auto& t : report.tasks) {
    if (t.failure) print_error(t.failure->message, exit_run_failed);
  }
  return exit_run_failed;
}

// What check, graph, fmt and ops take: a plan (not ops) and --load.
struct plan_args {
  std::string plan;
  std::vector<std::string> libraries;
};

int check_command(const plan_args& a) {
  const std::string& path = a.plan;
  if (auto libs = tg::cli::load_libraries(a.libraries); !libs) return print_error(libs.error().message, exit_usage);
  auto group = tg::read_plan_file(path);
  if (!group) return print_error(group.error().message, exit_usage);
  if (auto st = tg::cli::validate_group(group.value()); !st) {
    return print_error(st.error().with_context(path).message, exit_usage);
  }
  print_out(tg::cli::summarize_group(group.value(), path));
  return exit_ok;
}

int graph_command(const plan_args& a) {
  const std::string& path = a.plan;
  if (auto libs = tg::cli::load_libraries(a.libraries); !libs) return print_error(libs.error().message, exit_usage);
  auto group = tg::read_plan_file(path);
  if (!group) return print_error(group.error().message, exit_usage);
  print_out(tg::cli::group_to_dot(group.value(), path));
  return exit_ok;
}

int fmt_command(const plan_args& a) {
  const std::string& path = a.plan;
  if (auto libs = tg::cli::load_libraries(a.libraries); !libs) return print_error(libs.error().message, exit_usage);
  auto group = tg::read_plan_file(path);
  if (!group) return print_error(group.error().message, exit_usage);
  auto text = tg::write_plan(group.value());
  if (!text) return print_error(text.error().with_context(path).message, exit_usage);
  print_out(text.value());
  return exit_ok;
}

int ops_command(const plan_args& a, bool json) {
  auto libs = tg::cli::load_libraries(a.libraries);
  if (!libs) return print_error(libs.error().message, exit_usage);
  const auto& registry = tg::operator_registry::global();
  print_out(json ? tg::cli::json_text(tg::cli::operators_json(registry, libs.value()))
                 : tg::cli::operators_text(registry, libs.value()));
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs, checks and draws taskgroup plan files (JSON; see docs/plan-format.md).", "taskgroup"};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "taskgroup: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });

  run_args ra;
  auto* run = app.add_subcommand("run", "Run a plan and print every task's outputs");
  run->add_option("plan", ra.plan, "The plan file")->required()->type_name("FILE");
  run->add_option("--threads", ra.threads, "Threads of the session's pool (default 1)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  run->add_option("--policy", ra.policy, "join: the first failure cancels the run (default); gather: every task runs")
      ->check(CLI::IsMember({"join", "gather"}));
  double timeout_s = 0;
  auto* timeout = run->add_option("--timeout", timeout_s, "Cancel the run after SECONDS (exit status 3)")
                      ->type_name("SECONDS")
                      ->check(CLI::PositiveNumber);
  run->add_option("--trace", ra.trace, "Write a Chrome trace-event JSON file (opens in Perfetto)")->type_name("FILE");
  run->add_flag("--json", ra.json, "Print the outputs as one JSON object {task: {blob: value}}");
  run->add_flag("--quiet,-q", ra.quiet, "Print nothing but the result or the error");
  run->add_flag("--mpi", ra.mpi,
                "Run on an MPI session (implied under mpirun); nodes spread over the ranks, rank 0 prints");
  std::int64_t poll_max_us = 0;
  auto* poll_max = run->add_option("--poll-max", poll_max_us,
                                   "MPI runs: the longest wait between two polls of pending messages while a rank "
                                   "is idle, in microseconds (default 2000; lower answers sooner, higher wakes less)")
                       ->type_name("USEC")
                       ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000'000}));
  double grace_s = 0;
  auto* grace = run->add_option("--grace", grace_s,
                                "MPI runs: how long a cancelled or failed run waits for every rank to answer "
                                "before ending the job with MPI_Abort, in seconds (default 5)")
                    ->type_name("SECONDS")
                    ->check(CLI::PositiveNumber);

  const std::string load_help = "Load an op library (a shared object; repeatable) before reading the plan";
  run->add_option("--load", ra.libraries, load_help)->type_name("LIB")->allow_extra_args(false);
  run->add_option("--input", ra.inputs,
                  "Feed an input of the plan: NODE/BLOB=JSON (repeatable; a value as op arguments are written)")
      ->type_name("NODE/BLOB=JSON")
      ->allow_extra_args(false);
  run->add_option("--inputs", ra.inputs_file, "Feed inputs from a JSON object {\"node/blob\": value, ...}")
      ->type_name("FILE");

  plan_args check_args;
  auto* check = app.add_subcommand("check", "Validate a plan and summarise its nodes, tasks and steps");
  check->add_option("plan", check_args.plan, "The plan file")->required()->type_name("FILE");
  check->add_option("--load", check_args.libraries, load_help)->type_name("LIB")->allow_extra_args(false);

  plan_args graph_args;
  auto* graph = app.add_subcommand("graph", "Print the plan as a Graphviz DOT graph");
  graph->add_option("plan", graph_args.plan, "The plan file")->required()->type_name("FILE");
  graph->add_option("--load", graph_args.libraries, load_help)->type_name("LIB")->allow_extra_args(false);

  plan_args fmt_args;
  auto* fmt = app.add_subcommand("fmt", "Print the plan as the plan writer writes it (canonical form)");
  fmt->add_option("plan", fmt_args.plan, "The plan file")->required()->type_name("FILE");
  fmt->add_option("--load", fmt_args.libraries, load_help)->type_name("LIB")->allow_extra_args(false);

  plan_args ops_args;
  bool ops_json = false;
  auto* ops = app.add_subcommand("ops", "List the registered operators: arity, arguments, defaults, async");
  ops->add_option("--load", ops_args.libraries, "Load an op library (a shared object; repeatable) first")
      ->type_name("LIB")
      ->allow_extra_args(false);
  ops->add_flag("--json", ops_json, "Print the listing as JSON (shape in the README, \"Listing the operators\")");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }

  try {
    if (run->parsed()) {
      if (timeout->count() > 0) ra.timeout_s = timeout_s;
      if (poll_max->count() > 0) ra.poll_max_us = poll_max_us;
      if (grace->count() > 0) ra.grace_s = grace_s;
      return run_command(ra);
    }
    if (check->parsed()) return check_command(check_args);
    if (graph->parsed()) return graph_command(graph_args);
    if (fmt->parsed()) return fmt_command(fmt_args);
    if (ops->parsed()) return ops_command(ops_args, ops_json);
  } catch (const std::exception& e) {
    return print_error(e.what(), exit_run_failed);
  }
  return exit_usage;
}
