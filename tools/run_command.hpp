// taskgroup command: `taskgroup run`, a plan run on a local session or,
// under an MPI launcher or with --mpi, on an MPI session (see main.cpp for
// the options, the exit statuses and what is printed where).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::cli {

struct run_args {
  std::string plan;
  std::size_t threads = 1;
  std::string policy = "join";
  std::optional<double> timeout_s;  // set when --timeout was given
  std::string trace;
  std::string trace_parent;  // --trace-parent: a W3C traceparent the run joins
  std::string metrics;       // --metrics FILE: the session's metrics at the end
  bool json = false;
  bool quiet = false;
  bool mpi = false;
  std::optional<std::int64_t> poll_max_us;  // MPI only: mpi_options::poll_max
  std::optional<double> grace_s;            // MPI only: mpi_options::grace
  std::vector<std::string> libraries;       // --load
  std::vector<std::string> inputs;          // --input node/blob=JSON
  std::string inputs_file;                  // --inputs FILE.json
};

/// Runs the plan of `a` and prints its outputs; returns the exit status.
int run_command(const run_args& a);

}  // namespace taskgroup::cli
