// Internal: liveness during a run of the MPI protocol (docs/mpi-protocol.md,
// "Lost ranks"). Rank 0 and each other rank send each other a HEARTBEAT
// every `mpi_options::heartbeat` while the other still waits for a word
// from them; a peer heard from (a heartbeat or any message of the run) no
// longer than `mpi_options::lost_after` ago is alive. Checked by the run's
// polling loop: no thread and no extra wake-up of its own.
#pragma once

#include "mpi/state.hpp"

#include <taskgroup/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::detail::mpi {

class liveness {
 public:
  /// Watches `ranks` ranks from now on.
  liveness(const mpi_options& o, int ranks)
      : on_(o.lost_after.count() > 0),
        lost_after_(o.lost_after),
        silence_(as_clock_duration(o.lost_after)),
        every_(beat_interval(o)),
        heard_(static_cast<std::size_t>(ranks), clock_type::now()),
        next_beat_(clock_type::now()) {}

  /// Rank `r` was heard from.
  void heard(int r) { heard_[static_cast<std::size_t>(r)] = clock_type::now(); }

  /// True when a heartbeat is due now (then the next one is due an
  /// interval later).
  bool beat_due() {
    if (!on_) return false;
    const auto now = clock_type::now();
    if (now < next_beat_) return false;
    next_beat_ = deadline_after(now, every_);
    return true;
  }

  /// True when rank `r` has not been heard from for longer than `lost_after`.
  [[nodiscard]] bool silent(int r) const {
    return on_ && clock_type::now() - heard_[static_cast<std::size_t>(r)] > silence_;
  }

  /// The run's error for rank `r` lost, as every live rank reports it.
  [[nodiscard]] error lost(int r) const {
    return error(errc::mpi_failed, "rank " + std::to_string(r) + ": lost: no heartbeat or message from it for " +
                                       std::to_string(lost_after_.count()) +
                                       " ms (mpi_options::lost_after); it is stopped, hung, dead or unreachable");
  }

  /// The heartbeat interval: `heartbeat`, at most half of `lost_after`
  /// (a peer must get two chances), at least 1 ms.
  static std::chrono::milliseconds beat_interval(const mpi_options& o) {
    const auto every = std::min(o.heartbeat, o.lost_after / 2);
    return std::max(every, std::chrono::milliseconds(1));
  }

  /// `d` in the clock's unit, saturated: the session refuses a
  /// `lost_after` above `taskgroup::max_duration` (options_fault), and
  /// any longer one still compares as "never", not as a wrapped value.
  static clock_type::duration as_clock_duration(std::chrono::milliseconds d) noexcept {
    const auto most = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::duration::max());
    return d >= most ? clock_type::duration::max() : std::chrono::duration_cast<clock_type::duration>(d);
  }

 private:
  bool on_;
  std::chrono::milliseconds lost_after_;  // as given, for the message
  clock_type::duration silence_;          // lost_after_ in the clock's unit
  std::chrono::milliseconds every_;
  std::vector<clock_type::time_point> heard_;
  clock_type::time_point next_beat_;
};

}  // namespace taskgroup::detail::mpi
