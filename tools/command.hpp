// taskgroup command: what every subcommand shares, its exit statuses and
// where its results and errors go (stdout for results only, stderr for
// `taskgroup: <message>`).
#pragma once

#include <cstdio>
#include <string>

namespace taskgroup::cli {

enum exit_status : int {
  exit_ok = 0,
  exit_run_failed = 1,
  exit_usage = 2,
  exit_timeout = 3,
};

/// Prints `taskgroup: <message>` on stderr (after what stdout holds) and
/// returns `code`.
inline int print_error(const std::string& message, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "taskgroup: %s\n", message.c_str());
  std::fflush(stderr);
  return code;
}

/// Writes `text` to stdout as is.
inline void print_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace taskgroup::cli
