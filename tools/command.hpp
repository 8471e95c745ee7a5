// taskgroup command: what every subcommand shares, its exit statuses and
// where its results and errors go (stdout for results only, stderr for
// `taskgroup: <message>`).
#pragma once

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace taskgroup::cli {

enum exit_status : int {
  exit_ok = 0,
  exit_run_failed = 1,
  exit_usage = 2,
  exit_timeout = 3,
  exit_unwritten = 4,  // the results could not be written (stdout, the --trace file)
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

/// The errno of the first write to stdout that failed (0: none).
inline int& stdout_failure() {
  static int first = 0;
  return first;
}

/// Writes `text` to stdout as is; a failure is kept for `checked_output`.
inline void print_out(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    if (stdout_failure() == 0) stdout_failure() = errno != 0 ? errno : EIO;
  }
}

/// `code`, once stdout has been flushed; when something written to it was
/// lost (a full disk, a closed pipe with SIGPIPE ignored), says so and
/// turns a success into `exit_unwritten` (a failure keeps its own status).
inline int checked_output(int code) {
  if (std::fflush(stdout) != 0 && stdout_failure() == 0) stdout_failure() = errno != 0 ? errno : EIO;
  if (stdout_failure() == 0) return code;
  print_error(std::string("cannot write the results to standard output: ") + std::strerror(stdout_failure()), code);
  return code == exit_ok ? exit_unwritten : code;
}

}  // namespace taskgroup::cli
