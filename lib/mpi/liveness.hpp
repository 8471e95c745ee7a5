// Internal: liveness during a run of the MPI protocol (docs/mpi-protocol.md,
// "Lost ranks"). Rank 0 and each other rank send each other a HEARTBEAT
// every `mpi_options::heartbeat` while the other still waits for a word
// from them; a peer heard from (a heartbeat or any message of the run) no
// longer than `mpi_options::lost_after` ago is alive. Checked by the run's
// polling loop: no thread and no extra wake-up of its own.
#pragma once

#include "state.hpp"

#include <taskgroup/error.hpp>

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
    return on_ && clock_type::now() - heard_[static_cast<std::size_t>(r)] > lost_after_;
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
    auto every = o.heartbeat.count() > 0 ? o.heartbeat : o.lost_after / 4;
    every = std::min(every, o.lost_after / 2);
    return std::max(every, std::chrono::milliseconds(1));
  }

 private:
  bool on_;
  std::chrono::milliseconds lost_after_;
  std::chrono::milliseconds every_;
  std::vector<clock_type::time_point> heard_;
  clock_type::time_point next_beat_;
};

}  // namespace taskgroup::detail::mpi
