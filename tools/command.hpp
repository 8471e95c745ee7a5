// taskgroup command: what every subcommand shares, its exit statuses and
// where its results and errors go (stdout for results only, stderr for
// `taskgroup: <message>`).
#pragma once

#include <signal.h>

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

/// SIGUSR1 and SIGQUIT never end the command: `run` answers them with
/// where its tasks wait (its own handler, while the run goes on), and
/// outside of that they are caught and dropped. Called first in main,
/// before anything is read, and again once `run`'s handler is gone (Asio
/// then puts back the default action, which ends the process). A handler
/// that does nothing, not SIG_IGN: a program the command starts gets the
/// default action back.
inline void drop_where_signals() {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGQUIT, &sa, nullptr);
}

/// Writes `text` to stdout as is.
inline void print_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace taskgroup::cli
