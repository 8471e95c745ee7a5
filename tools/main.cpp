// taskgroup: the command-line runner for plan files (docs/plan-format.md).
//
//   taskgroup run PLAN [--threads N] [--policy join|gather] [--timeout S]
//                      [--trace FILE] [--trace-parent TRACEPARENT] [--metrics FILE]
//                      [--json] [--quiet] [--mpi]
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
// SIGUSR1 or SIGQUIT prints where each running task waits (run_probe) and
// the run goes on; neither ends any subcommand (ignored until the run
// starts, and by the other subcommands).
//
// stdout carries only results (the outputs table, the --json object, the
// check summary, DOT, the formatted plan); progress, Print lines and
// errors (`taskgroup: <message>`) go to stderr. A run that ends in an
// error (a join failure, a timeout, a signal) prints only that error, but
// with --json the object comes for every run that started (exit status 1,
// 3, 130 or 143 too).
#include "check.hpp"
#include "command.hpp"
#include "graph.hpp"
#include "number_option.hpp"
#include "ops.hpp"
#include "results.hpp"
#include "run_command.hpp"

#include <taskgroup/error.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/trace_recorder.hpp>

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace tg = taskgroup;
using enum tg::cli::exit_status;
using tg::cli::print_error;
using tg::cli::print_out;

namespace {

// What check, graph, fmt and ops take: a plan (not ops) and --load.
struct plan_args {
  std::string plan;
  std::vector<std::string> libraries;
};

// A subcommand of those: its plan argument and --load.
CLI::App* add_plan_command(CLI::App& app, const std::string& name, const std::string& description, plan_args& args,
                           const std::string& load_help) {
  auto* command = app.add_subcommand(name, description);
  command->add_option("plan", args.plan, "The plan file")->required()->type_name("FILE");
  command->add_option("--load", args.libraries, load_help)->type_name("LIB")->allow_extra_args(false);
  return command;
}

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

// The trace files of an MPI run's ranks as one, on stdout.
int merge_traces_command(const std::vector<std::string>& paths) {
  std::vector<tg::trace_file> files;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return print_error("cannot read trace file " + tg::quote(path), exit_usage);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return print_error("cannot read trace file " + tg::quote(path), exit_usage);
    files.push_back(tg::trace_file{path, std::move(text)});
  }
  auto merged = tg::merge_traces(files);
  if (!merged) return print_error(merged.error().message, exit_usage);
  print_out(merged.value());
  return exit_ok;
}

// When the command line names no subcommand: the message saying so, with
// the subcommands (CLI11 would only say that one is required).
std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
  if (!app.get_subcommands().empty()) return std::nullopt;  // one was found: CLI11's own message
  const std::function<bool(const CLI::App*)> every = [](const CLI::App*) { return true; };
  const auto commands = app.get_subcommands(every);
  std::string names;
  for (const auto* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-")) continue;  // --help is the only option before the command
    for (const auto* c : commands) {
      if (c->get_name() == word) return std::nullopt;
    }
    return "unknown command " + tg::quote(word) + "; expected one of: " + names;
  }
  return "no command given; expected one of: " + names + " (taskgroup --help describes them)";
}

}  // namespace

int main(int argc, char** argv) {
  tg::cli::drop_where_signals();  // before anything is read (a plan may take long)
  CLI::App app{"Runs, checks and draws taskgroup plan files (JSON; see docs/plan-format.md).", "taskgroup"};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "taskgroup: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });

  tg::cli::run_args ra;
  auto* run = app.add_subcommand("run", "Run a plan and print every task's outputs");
  run->add_option("plan", ra.plan, "The plan file")->required()->type_name("FILE");
  run->add_option("--threads", ra.threads, "Threads of the session's pool (default 1)")
      ->transform(tg::cli::whole_number_in(1, 1024));
  run->add_option("--policy", ra.policy, "join: the first failure cancels the run (default); gather: every task runs")
      ->check(CLI::IsMember({"join", "gather"}));
  // --timeout and --grace: any finite number of seconds above 0 (a long
  // one is cut to its option's most, run_command.cpp).
  const auto seconds = tg::cli::positive_number("seconds");
  double timeout_s = 0;
  auto* timeout = run->add_option("--timeout", timeout_s,
                                  "Cancel the run after SECONDS (exit status 3; fractions allowed, at most 10^9 "
                                  "s: a longer one waits that long)")
                      ->type_name("SECONDS")
                      ->transform(seconds);
  run->add_option("--trace", ra.trace, "Write a Chrome trace-event JSON file (opens in Perfetto)")->type_name("FILE");
  run->add_option("--trace-parent", ra.trace_parent,
                  "Run under this W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>): the run's trace id is its "
                  "trace id, and its span a child of the span it names")
      ->type_name("TRACEPARENT");
  run->add_option("--metrics", ra.metrics,
                  "Write the session's metrics at the end of the run: Prometheus text, or JSON when FILE ends in "
                  ".json (under MPI rank r > 0 writes FILE with .rank<r> before its extension)")
      ->type_name("FILE");
  run->add_flag("--json", ra.json,
                "Print the outputs as one JSON object {task: {blob: value}}, also when the run fails or times out");
  run->add_flag("--quiet,-q", ra.quiet, "Print nothing but the result or the error");
  run->add_flag("--mpi", ra.mpi,
                "Run on an MPI session (implied under mpirun); nodes spread over the ranks, rank 0 prints");
  std::int64_t poll_max_us = 0;
  auto* poll_max = run->add_option("--poll-max", poll_max_us,
                                   "MPI runs: the longest wait between two polls of pending messages while a rank "
                                   "is idle, in microseconds (default 2000; lower answers sooner, higher wakes less)")
                       ->type_name("USEC")
                       ->transform(tg::cli::whole_number_in(1, 1e7, "microseconds"));
  double grace_s = 0;
  auto* grace = run->add_option("--grace", grace_s,
                                "MPI runs: how long a cancelled or failed run waits for every rank to answer "
                                "before ending the job with MPI_Abort, in seconds (default 5, at most 10^6)")
                    ->type_name("SECONDS")
                    ->transform(seconds);

  const std::string load_help = "Load an op library (a shared object; repeatable) before reading the plan";
  run->add_option("--load", ra.libraries, load_help)->type_name("LIB")->allow_extra_args(false);
  run->add_option("--input", ra.inputs,
                  "Feed an input of the plan: NODE/BLOB=JSON (repeatable; a value as op arguments are written)")
      ->type_name("NODE/BLOB=JSON")
      ->allow_extra_args(false);
  run->add_option("--inputs", ra.inputs_file, "Feed inputs from a JSON object {\"node/blob\": value, ...}")
      ->type_name("FILE");

  plan_args check_args;
  auto* check =
      add_plan_command(app, "check", "Validate a plan and summarise its nodes, tasks and steps", check_args, load_help);
  plan_args graph_args;
  auto* graph = add_plan_command(app, "graph", "Print the plan as a Graphviz DOT graph", graph_args, load_help);
  plan_args fmt_args;
  auto* fmt =
      add_plan_command(app, "fmt", "Print the plan as the plan writer writes it (canonical form)", fmt_args, load_help);

  plan_args ops_args;
  bool ops_json = false;
  auto* ops = app.add_subcommand("ops", "List the registered operators: arity, arguments, defaults, async");
  ops->add_option("--load", ops_args.libraries, "Load an op library (a shared object; repeatable) first")
      ->type_name("LIB")
      ->allow_extra_args(false);
  ops->add_flag("--json", ops_json, "Print the listing as JSON (shape in docs/command.md, \"Listing the operators\")");

  std::vector<std::string> trace_paths;
  auto* merge = app.add_subcommand(
      "merge-traces", "Merge the trace files of an MPI run's ranks (run --trace under mpirun) into one, on stdout");
  merge->add_option("files", trace_paths, "The ranks' trace files (FILE, FILE.rank1, ...)")
      ->required()
      ->type_name("FILE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // (--help is a ParseError that succeeds.)
    if (e.get_exit_code() != 0) {
      if (auto unknown = unknown_command(app, argc, argv)) return print_error(*unknown, exit_usage);
    }
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_usage;
  }

  int code = exit_usage;
  try {
    if (run->parsed()) {
      if (timeout->count() > 0) ra.timeout_s = timeout_s;
      if (poll_max->count() > 0) ra.poll_max_us = poll_max_us;
      if (grace->count() > 0) ra.grace_s = grace_s;
      code = tg::cli::run_command(ra);
    } else if (check->parsed()) {
      code = check_command(check_args);
    } else if (graph->parsed()) {
      code = graph_command(graph_args);
    } else if (fmt->parsed()) {
      code = fmt_command(fmt_args);
    } else if (ops->parsed()) {
      code = ops_command(ops_args, ops_json);
    } else if (merge->parsed()) {
      code = merge_traces_command(trace_paths);
    }
  } catch (const std::exception& e) {
    code = print_error(e.what(), exit_run_failed);
  }
  return tg::cli::checked_output(code);
}
