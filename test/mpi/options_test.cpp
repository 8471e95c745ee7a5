// The MPI session's options within their documented limits
// (lib/mpi/state.hpp options_fault) and liveness with the longest
// lost_after (lib/mpi/liveness.hpp), called directly: no mpirun.
#include "mpi/liveness.hpp"
#include "mpi/state.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::detail::mpi;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t max_ms = max_duration.count();  // 2^40
constexpr std::int64_t max_us = max_duration.count() * 1000;

// One duration of mpi_options, its unit's limit and whether 0 is allowed.
struct duration_option {
  const char* name;
  void (*set)(mpi_options&, std::int64_t);
  std::int64_t most;
  bool zero_ok;
  const char* unit;
};

const duration_option duration_options[] = {
    {"poll_spin", [](mpi_options& o, std::int64_t v) { o.poll_spin = std::chrono::microseconds(v); }, max_us, true,
     "us"},
    {"poll_min",
     [](mpi_options& o, std::int64_t v) {
       o.poll_min = std::chrono::microseconds(v);
       o.poll_max = std::chrono::microseconds(max_us);  // poll_max >= poll_min holds for every valid poll_min
     },
     max_us, false, "us"},
    {"poll_max",
     [](mpi_options& o, std::int64_t v) {
       o.poll_max = std::chrono::microseconds(v);
       o.poll_min = std::chrono::microseconds(1);
     },
     max_us, false, "us"},
    {"grace", [](mpi_options& o, std::int64_t v) { o.grace = std::chrono::milliseconds(v); }, max_ms, false, "ms"},
    {"lost_after", [](mpi_options& o, std::int64_t v) { o.lost_after = std::chrono::milliseconds(v); }, max_ms, true,
     "ms"},
    {"heartbeat", [](mpi_options& o, std::int64_t v) { o.heartbeat = std::chrono::milliseconds(v); }, max_ms, false,
     "ms"},
};

// The values around each edge, and the extremes of int64.
std::vector<std::int64_t> probes(std::int64_t most) {
  return {std::numeric_limits<std::int64_t>::min(), -1, 0, 1, 2, most / 2, most - 1, most, most + 1, most * 2,
          std::numeric_limits<std::int64_t>::max()};
}

}  // namespace

TEST_CASE("the default mpi_options are within their limits", "[mpi_wire][mpi_options]") {
  CHECK_FALSE(options_fault(mpi_options{}));
}

TEST_CASE("each mpi_options duration is refused outside its range, naming the option and the limit",
          "[mpi_wire][mpi_options]") {
  for (const duration_option& d : duration_options) {
    for (std::int64_t v : probes(d.most)) {
      INFO("mpi_options::" << d.name << " = " << v << " " << d.unit);
      mpi_options o;
      d.set(o, v);
      const auto fault = options_fault(o);
      const std::string prefix = std::string("mpi_options::") + d.name + " must be ";
      const std::string got = ", got " + std::to_string(v);
      if (v < 0 || (v == 0 && !d.zero_ok)) {
        REQUIRE(fault);
        CHECK(fault->code == errc::invalid_task);
        CHECK(fault->message == prefix + (d.zero_ok ? ">= 0 " : "> 0 ") + d.unit + got);
      } else if (v > d.most) {
        REQUIRE(fault);
        CHECK(fault->code == errc::invalid_task);
        CHECK(fault->message == prefix + "at most " + std::to_string(d.most) + " " + d.unit +
                                    " (taskgroup::max_duration, about 34.8 years)" + got);
      } else {
        CHECK_FALSE(fault);
      }
    }
  }
}

TEST_CASE("poll_max below poll_min is refused, naming both", "[mpi_wire][mpi_options]") {
  mpi_options o;
  o.poll_min = 500us;
  o.poll_max = 499us;
  const auto fault = options_fault(o);
  REQUIRE(fault);
  CHECK(fault->code == errc::invalid_task);
  CHECK(fault->message == "mpi_options::poll_max must be at least poll_min (500 us), got 499 us");
  o.poll_max = 500us;
  CHECK_FALSE(options_fault(o));
}

TEST_CASE("the longest lost_after never finds a rank silent (no overflow in the clock's unit)",
          "[mpi_wire][mpi_options]") {
  // In nanoseconds, 2^63 - 1 ms wraps to -1 ms: every rank was "silent" at
  // once. The session refuses such a value (above); the watch itself
  // saturates it.
  for (auto lost_after : {max_duration, std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max()),
                          std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max() / 1000 + 7)}) {
    INFO("lost_after " << lost_after.count() << " ms");
    mpi_options o;
    o.lost_after = lost_after;
    liveness watch(o, 3);
    for (int r = 0; r < 3; ++r) CHECK_FALSE(watch.silent(r));
    CHECK(watch.beat_due());  // the first beat is due at once
    CHECK_THAT(watch.lost(1).message, Catch::Contains("for " + std::to_string(lost_after.count()) + " ms"));
  }
}

TEST_CASE("the heartbeat interval is heartbeat, at most half of lost_after, at least 1 ms", "[mpi_wire][mpi_options]") {
  struct expect {
    std::chrono::milliseconds heartbeat, lost_after, every;
  };
  for (const expect& e : {expect{1000ms, 8000ms, 1000ms}, expect{5000ms, 8000ms, 4000ms}, expect{1ms, 8000ms, 1ms},
                          expect{1000ms, 1ms, 1ms}, expect{max_duration, max_duration, max_duration / 2}}) {
    INFO("heartbeat " << e.heartbeat.count() << " ms, lost_after " << e.lost_after.count() << " ms");
    mpi_options o;
    o.heartbeat = e.heartbeat;
    o.lost_after = e.lost_after;
    CHECK(liveness::beat_interval(o) == e.every);
  }
}
