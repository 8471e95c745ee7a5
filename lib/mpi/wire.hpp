// Internal: the messages of the MPI session's protocol (docs/mpi-protocol.md)
// and their encodings, as plain functions over bytes: no MPI call, so that
// tests and fuzz targets can call them without mpirun.
//
// Every decoder checks what it reads (byte_reader reports a truncated
// message) and fails with an error naming what is wrong; none trusts a
// count or an index it read before checking it against what it fills.
#pragma once

#include <taskgroup/codec.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail::mpi {

/// The MPI tags of the five kinds of message.
constexpr int tag_start = 7101;
constexpr int tag_status = 7102;
constexpr int tag_ctrl = 7103;
constexpr int tag_payload = 7104;    // a value sent apart from its STATUS
constexpr int tag_heartbeat = 7105;  // "still here", during a run

/// Output values at least this large travel as messages of their own,
/// straight from and into their storage, when their codec allows it.
constexpr std::size_t detach_threshold = 32 * 1024;

/// An error: its category's name, its value and its message.
void write_error(byte_writer& w, const error& e);
/// Reads what write_error wrote into `out`. An error of a category other
/// than taskgroup's, system's or generic's becomes `errc::op_failed`, its
/// message saying the category and value. Errors: those of byte_reader.
status read_error(byte_reader& r, error& out);

/// A feed as it travels in START: its node, its blob, and its value as
/// `codec_registry::encode` writes it (its codec's tag, then its bytes).
struct wire_feed {
  std::string node;
  std::string blob;
  std::string value;
};

/// Feed `f`'s value encoded by `codecs`. Errors: `errc::not_serializable`
/// naming the feed (`feed "<node>/<blob>"`) and its value's type when the
/// type has no codec (or the codec's own error).
result<wire_feed> encode_feed(const codec_registry& codecs, const feeds::entry& f);
/// The values of `wire` decoded by `codecs`, as a run's feeds. Errors:
/// `errc::not_serializable` naming the first feed that does not decode (an
/// unknown codec tag, malformed bytes, bytes left after its value).
result<feeds> decode_feeds(const codec_registry& codecs, const std::vector<wire_feed>& wire);

/// START: rank 0 starts run `run_id` (or tells every rank not to), with the
/// feeds of the receiving rank's nodes.
struct start_message {
  std::uint64_t run_id = 0;
  std::string fingerprint;  // the group's description (group_description::text)
  run_policy policy = run_policy::join;
  std::optional<std::chrono::milliseconds> timeout;
  trace_context trace;           // the run's: every rank's part runs under it
  std::optional<error> failure;  // rank 0 could not start the run
  std::vector<wire_feed> feeds;  // none when `failure` is set
};
std::string encode_start(const start_message& m);
/// Reads a START; feed values stay encoded (decode_feeds). Errors: those
/// of byte_reader (a truncated START); stray bytes (`errc::group_mismatch`).
result<start_message> decode_start(std::string_view bytes);

/// When a rank saw its run's START and sent its STATUS, on its own system
/// clock (nanoseconds since the epoch): with rank 0's times of sending
/// that START and seeing that STATUS, an estimate of the offset between
/// the two clocks (`estimate_offset`).
struct clock_sample {
  std::int64_t start_seen_ns = 0;
  std::int64_t status_sent_ns = 0;
};

/// What a rank said: nothing wrong, or its error.
struct verdict {
  std::optional<error> e;
  // On a DONE: every task's status and failure, in group order.
  std::vector<std::pair<task_status, std::optional<error>>> tasks;
  // On a STATUS: the rank's clock readings.
  clock_sample clock;
};

/// A rank's clock against rank 0's, from one exchange (as NTP estimates
/// it): rank 0 sent START at `start_sent` and saw the STATUS at
/// `status_seen` (its clock); the rank's readings are `rank`. The rank's
/// clock is `offset` ahead of rank 0's, give or take half of
/// `round_trip`: the exchange's time on the wire both ways (the time
/// between the rank's two readings taken out).
struct clock_estimate {
  std::chrono::nanoseconds offset{0};
  std::chrono::nanoseconds round_trip{0};
};
/// This process's system clock now, in nanoseconds since the epoch.
std::int64_t wall_now_ns() noexcept;
clock_estimate estimate_offset(std::int64_t start_sent_ns, std::int64_t status_seen_ns, clock_sample rank) noexcept;

/// CTRL: CANCEL carries the run's error (`cancel`); DONE every task's
/// status and failure (`done`'s tasks; none when `done` is null), so that
/// each rank knows how the whole run went.
std::string encode_ctrl(std::uint64_t run_id, const std::optional<error>& cancel, const run_report* done = nullptr);
/// The CTRL of run `run_id` as a verdict. Errors: `errc::group_mismatch`
/// for another run's CTRL or a task status out of range; those of
/// byte_reader.
result<verdict> decode_ctrl(std::string_view bytes, std::uint64_t run_id);

/// HEARTBEAT of run `run_id`: the run id alone.
std::string encode_heartbeat(std::uint64_t run_id);
/// The run id of a HEARTBEAT. Errors: those of byte_reader; stray bytes
/// (`errc::group_mismatch`).
result<std::uint64_t> decode_heartbeat(std::string_view bytes);

/// A value sent apart from its STATUS message: the bytes of its storage,
/// kept alive by `keep`.
struct detached {
  std::shared_ptr<const blob> keep;
  std::string_view bytes;
};

/// A STATUS message and the values that follow it as messages of their own.
struct status_message {
  std::string bytes;
  std::vector<detached> payloads;
};

/// Files `r` in `report.retries`, in task order (replacing the task's
/// entry if it has one): the retries of each rank's tasks come in as its
/// STATUS does.
void keep_retries(run_report& report, task_retries r);

/// The STATUS of a rank's part of run `run_id`: the rank's clock readings
/// (`clock`), then the reports of its tasks that ran, with their outputs
/// encoded by `codecs` (large contiguous ones detached); or its error
/// followed by the reports of `failed` (what its tasks did in the failed
/// run), if given. An output that cannot be encoded makes the STATUS that
/// error alone, naming the task and output.
status_message encode_status(const codec_registry& codecs, std::uint64_t run_id, const result<run_report>& local,
                             const run_report* failed = nullptr, clock_sample clock = {});

/// What decoding a STATUS needs besides its bytes: the receipt of each
/// detached value (which follows the STATUS on the wire, in order), and a
/// call once a task's report is complete.
class status_receiver {
 public:
  /// The value of output `output` of task #`task`, sent apart: `size`
  /// bytes of the contiguous codec `tag`.
  virtual result<std::shared_ptr<const blob>> receive_detached(std::size_t task, const std::string& output,
                                                               const std::string& tag, std::uint64_t size) = 0;
  /// `report.tasks[task]` has been filled from the STATUS.
  virtual void task_decoded(std::size_t task) = 0;

 protected:
  ~status_receiver() = default;
};

/// Counts of a STATUS's detached values: announced, and received so far
/// (those left to drain from the wire when decoding stopped early).
struct detached_counts {
  std::uint32_t announced = 0;
  std::uint32_t received = 0;
};

/// Decodes a STATUS from rank `from` into `report` (group order; `report`
/// holds one entry per task of the group) with `codecs`. Returns the
/// rank's error if it sent one, prefixed with `rank <from>`. Errors:
/// `errc::group_mismatch` for another run's STATUS, a task index or status
/// out of range, stray bytes; an output that cannot be decoded or received
/// is the verdict's error; those of byte_reader.
result<verdict> decode_status(int from, std::uint64_t run_id, std::string_view bytes, const codec_registry& codecs,
                              run_report& report, status_receiver& receiver, detached_counts& counts);

}  // namespace taskgroup::detail::mpi
