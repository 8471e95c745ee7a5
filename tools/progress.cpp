#include "progress.hpp"

#include <taskgroup/builtin_ops.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace taskgroup::cli {

namespace {

constexpr auto redraw_every = std::chrono::milliseconds(100);

// Columns and rows of the terminal on `f` (80 x 24 when unknown).
std::pair<std::size_t, std::size_t> terminal_size(std::FILE* f) {
  winsize ws{};
  if (::ioctl(::fileno(f), TIOCGWINSZ, &ws) != 0) return {80, 24};
  return {ws.ws_col > 0 ? ws.ws_col : 80, ws.ws_row > 0 ? ws.ws_row : 24};
}

std::string seconds_text(std::chrono::steady_clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

void write_all(std::FILE* f, const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

}  // namespace

progress_mode default_progress_mode() {
  const char* term = std::getenv("TERM");
  if (::isatty(STDERR_FILENO) == 1 && (term == nullptr || std::strcmp(term, "dumb") != 0)) return progress_mode::live;
  return progress_mode::plain;
}

progress::progress(progress_mode mode, std::FILE* out) : mode_(mode), out_(out) {}

progress::~progress() { finish(); }

void progress::start(boost::asio::io_context& io) {
  {
    std::lock_guard lock(mutex_);
    started_ = clock::now();
  }
  // The sink is called under the print lock; it takes ours (never the other
  // way round: no observer callback prints).
  (void)set_print_sink([this](std::string_view line) {
    if (mode_ == progress_mode::quiet) return;
    std::lock_guard lock(mutex_);
    line_locked(line);
  });
  sink_installed_ = true;
  if (mode_ == progress_mode::live) {
    timer_.emplace(io);
    schedule_redraw();
  }
}

void progress::schedule_redraw() {
  timer_->expires_after(redraw_every);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      erase_block_locked();
      draw_block_locked();
    }
    schedule_redraw();
  });
}

void progress::finish() {
  if (sink_installed_) {
    (void)set_print_sink({});
    sink_installed_ = false;
  }
  // Dropped here, while the io_context is still alive (a pending wait
  // completes with operation_aborted).
  timer_.reset();
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (mode_ == progress_mode::live) {
    erase_block_locked();
    draw_block_locked();
  }
}

void progress::note(std::string_view line) {
  if (mode_ == progress_mode::quiet) return;
  std::lock_guard lock(mutex_);
  line_locked(line);
}

progress::node_state& progress::node_locked(std::string_view name) {
  const auto [it, inserted] = index_.try_emplace(std::string(name), nodes_.size());
  if (inserted) {
    nodes_.emplace_back();
    nodes_.back().name = name;
  }
  return nodes_[it->second];
}

// Quiet mode keeps no state: the callbacks return at once (a run of 10^5
// nodes pays nothing for the progress it does not show).
void progress::run_begin(const event_source& /*at*/, const std::vector<std::pair<std::string, std::string>>& tasks) {
  if (mode_ == progress_mode::quiet) return;
  std::lock_guard lock(mutex_);
  for (const auto& [task, node] : tasks) ++node_locked(node).tasks;
  totals_.tasks += tasks.size();
  if (mode_ == progress_mode::live) {
    erase_block_locked();
    draw_block_locked();
  }
}

void progress::task_begin(const event_source& at) {
  if (mode_ == progress_mode::quiet) return;
  std::lock_guard lock(mutex_);
  node_state& n = node_locked(at.node);
  ++n.running;
  ++totals_.running;
  if (!n.first_start) n.first_start = clock::now();
  if (mode_ == progress_mode::plain) line_locked("task " + std::string(at.task) + " started");
}

void progress::task_end(const event_source& /*at*/, const task_report& report) {
  if (mode_ == progress_mode::quiet) return;
  std::lock_guard lock(mutex_);
  node_state& n = node_locked(report.node);
  if (n.running > 0) {
    --n.running;
    --totals_.running;
  }
  ++n.done;
  ++totals_.done;
  if (report.status != task_status::succeeded) {
    ++n.failed;
    ++totals_.failed;
  }
  if (n.done >= n.tasks) n.last_end = clock::now();
  if (mode_ == progress_mode::plain) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(report.duration()).count();
    std::string l = "task " + report.name + " finished (" + std::string(to_string(report.status)) + ", " +
                    std::to_string(ms) + " ms";
    if (report.attempts > 1) l += ", " + std::to_string(report.attempts) + " attempts";
    line_locked(l + ")");
  }
}

void progress::retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                          std::chrono::microseconds wait, const error& after) {
  if (mode_ == progress_mode::quiet || !step.empty()) return;
  std::lock_guard lock(mutex_);
  ++node_locked(at.node).retries;
  ++totals_.retries;
  if (mode_ == progress_mode::plain) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", std::chrono::duration<double, std::milli>(wait).count());
    line_locked("task " + std::string(at.task) + " attempt " + std::to_string(next_attempt - 1) + " of " +
                std::to_string(max_attempts) + " failed: " + after.message + "; retrying in " + ms + " ms");
  }
}

// A line of output: above the block in live mode.
void progress::line_locked(std::string_view line) {
  if (mode_ == progress_mode::quiet) return;
  if (mode_ == progress_mode::live && !finished_) {
    erase_block_locked();
    std::string s(line);
    s += "\x1b[K\n";
    std::fwrite(s.data(), 1, s.size(), out_);
    draw_block_locked();
    std::fflush(out_);
    return;
  }
  std::string s(line);
  s += '\n';
  write_all(out_, s);
}

void progress::erase_block_locked() {
  if (drawn_lines_ == 0) return;
  // Up to the block's first line, column 0, then clear to the end of screen.
  write_all(out_, "\r\x1b[" + std::to_string(drawn_lines_) + "A\x1b[J");
  drawn_lines_ = 0;
}

void progress::draw_block_locked() {
  const auto now = clock::now();
  const auto [width, rows] = terminal_size(out_);
  // The block must fit the screen (the cursor cannot move above its top to
  // erase it): the header, as many node lines as fit, then a count of the rest.
  const std::size_t shown = std::min(nodes_.size(), rows > 3 ? rows - 3 : std::size_t{1});
  std::size_t name_width = 4;
  for (std::size_t i = 0; i < shown; ++i) name_width = std::max(name_width, nodes_[i].name.size());
  std::vector<std::string> lines;
  std::string head = "taskgroup: " + std::to_string(totals_.done) + "/" + std::to_string(totals_.tasks) +
                     " tasks done, " + std::to_string(totals_.running) + " running";
  if (totals_.failed > 0) head += ", " + std::to_string(totals_.failed) + " failed";
  if (totals_.retries > 0) head += ", " + std::to_string(totals_.retries) + " retried";
  head += "  " + seconds_text(now - started_);
  lines.push_back(std::move(head));
  for (std::size_t i = 0; i < shown; ++i) {
    const node_state& n = nodes_[i];
    std::string l = "  " + n.name + std::string(name_width - n.name.size(), ' ');
    l += "  running " + std::to_string(n.running);
    l += "  done " + std::to_string(n.done) + "/" + std::to_string(n.tasks);
    if (n.failed > 0) l += "  failed " + std::to_string(n.failed);
    if (n.retries > 0) l += "  retried " + std::to_string(n.retries);
    if (n.first_start) l += "  " + seconds_text(n.last_end.value_or(now) - *n.first_start);
    lines.push_back(std::move(l));
  }
  if (shown < nodes_.size()) lines.push_back("  ... and " + std::to_string(nodes_.size() - shown) + " more nodes");
  std::string s;
  for (auto& l : lines) {
    // A wrapped line would break the line count used to erase the block.
    if (width > 1 && l.size() >= width) l.resize(width - 1);
    s += l;
    s += "\x1b[K\n";
  }
  write_all(out_, s);
  drawn_lines_ = lines.size();
}

}  // namespace taskgroup::cli
