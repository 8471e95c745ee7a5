// taskgroup command: progress of a run on stderr.
//
// Three modes:
// - live (stderr is a terminal): a status block, one line per node (tasks
//   running and done, failures, retries, elapsed time), redrawn with ANSI escapes
//   at most 10 times a second from a timer on the caller's io_context;
//   lines written by Print ops and notes scroll above the block. The block
//   fits the terminal's height: the nodes that do not fit are counted on
//   a last line ("... and N more nodes").
// - plain (anything else): one line per event, `task <name> started`,
//   `task <name> attempt <n> of <max> failed: <error>; retrying in <t> ms`
//   (a task with a retry policy) and `task <name> finished (<status>, <ms>
//   ms[, <k> attempts])`, plus the Print lines.
// - quiet: nothing at all (Print lines are dropped too), and no state is
//   kept per task or node.
//
// Print output goes to stderr in every mode, so that stdout holds only
// the results (a table, or the `--json` object).
//
// Threading: the observer callbacks come from the session's node strands
// (several threads at once) and the print sink from any thread; every
// entry point takes one mutex. `start`/`finish` and the timer run on the
// io_context's thread.
#pragma once

#include <taskgroup/run_observer.hpp>
#include <taskgroup/run_report.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace taskgroup::cli {

enum class progress_mode { quiet, plain, live };

/// Live when stderr is a terminal (and TERM is not "dumb"), else plain.
progress_mode default_progress_mode();

class progress final : public run_observer {
 public:
  explicit progress(progress_mode mode, std::FILE* out = stderr);
  ~progress() override;
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  /// Installs the print sink and, in live mode, starts the redraw timer on
  /// `io` (stopped by `finish`).
  void start(boost::asio::io_context& io);
  /// Stops the timer, draws the final block (live mode), restores the
  /// previous print sink. Idempotent.
  void finish();
  /// A line above the block (plain and live modes).
  void note(std::string_view line);

  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) override;
  /// Task events only: a run shown by its progress keeps every fast path.
  [[nodiscard]] observe interests() const noexcept override { return observe::tasks; }
  void task_begin(const event_source& at) override;
  void task_end(const event_source& at, const task_report& report) override;
  /// A task's failed attempt, retried after `wait` (a step's retries are
  /// step events, not asked for).
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds wait, const error& after) override;

 private:
  using clock = std::chrono::steady_clock;
  struct node_state {
    std::string name;
    std::size_t tasks = 0;
    std::size_t running = 0;
    std::size_t done = 0;
    std::size_t failed = 0;
    std::size_t retries = 0;  // failed attempts retried, over the node's tasks
    std::optional<clock::time_point> first_start;
    std::optional<clock::time_point> last_end;
  };

  node_state& node_locked(std::string_view name);
  void line_locked(std::string_view line);
  void erase_block_locked();
  void draw_block_locked();
  void schedule_redraw();

  progress_mode mode_;
  std::FILE* out_;
  std::mutex mutex_;                                    // guards what follows
  std::vector<node_state> nodes_;                       // in order of first use
  std::unordered_map<std::string, std::size_t> index_;  // node name -> position in nodes_
  struct {
    std::size_t tasks = 0, running = 0, done = 0, failed = 0, retries = 0;
  } totals_;  // sums over nodes_
  clock::time_point started_ = clock::now();
  std::size_t drawn_lines_ = 0;
  bool sink_installed_ = false;
  bool finished_ = false;
  std::optional<boost::asio::steady_timer> timer_;
};

}  // namespace taskgroup::cli
