// taskgroup: the encodings of the MPI session's protocol messages
// (docs/mpi-protocol.md): START with its feeds, STATUS, CTRL and the errors
// they carry.
#include "mpi/wire.hpp"

#include <taskgroup/retry_policy.hpp>

#include <algorithm>
#include <cstring>

namespace taskgroup::detail::mpi {

namespace {

std::int64_t to_ns(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// How a feed is named in errors, as the local session names it.
std::string feed_name(std::string_view node, std::string_view blob) {
  return "feed " + quote(std::string(node) + "/" + std::string(blob));
}

std::chrono::system_clock::time_point from_ns(std::int64_t ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
}

}  // namespace

void write_error(byte_writer& w, const error& e) {
  w.string(e.code.category().name());
  w.i64(e.code.value());
  w.string(e.message);
}

status read_error(byte_reader& r, error& out) {
  TASKGROUP_TRY(auto category, r.string());
  TASKGROUP_TRY(auto value, r.i64());
  TASKGROUP_TRY(auto message, r.string());
  const int v = static_cast<int>(value);
  if (category == error_category().name()) {
    out = error(boost::system::error_code(v, error_category()), message);
  } else if (category == boost::system::system_category().name()) {
    out = error(boost::system::error_code(v, boost::system::system_category()), message);
  } else if (category == boost::system::generic_category().name()) {
    out = error(boost::system::error_code(v, boost::system::generic_category()), message);
  } else {
    out = error(errc::op_failed, message + " (" + category + " error " + std::to_string(v) + ")");
  }
  return ok();
}

std::string encode_start(const start_message& m) {
  std::string bytes;
  byte_writer w(bytes);
  w.u64(m.run_id);
  w.string(m.fingerprint);
  w.u8(m.policy == run_policy::gather ? 1 : 0);
  w.u64(m.timeout ? static_cast<std::uint64_t>(m.timeout->count()) + 1 : 0);
  for (const std::uint8_t b : m.trace.trace_id) w.u8(b);
  for (const std::uint8_t b : m.trace.parent_id) w.u8(b);
  w.u8(m.trace.flags);
  w.boolean(m.failure.has_value());
  if (m.failure) write_error(w, *m.failure);
  w.u32(static_cast<std::uint32_t>(m.feeds.size()));
  for (const auto& f : m.feeds) {
    w.string(f.node);
    w.string(f.blob);
    w.string(f.value);
  }
  return bytes;
}

result<wire_feed> encode_feed(const codec_registry& codecs, const feeds::entry& f) {
  wire_feed out{f.node, f.blob, {}};
  byte_writer w(out.value);
  if (auto st = codecs.encode(*f.value, w); !st) return st.error().with_context(feed_name(f.node, f.blob));
  return out;
}

result<feeds> decode_feeds(const codec_registry& codecs, const std::vector<wire_feed>& wire) {
  feeds out;
  for (const auto& f : wire) {
    byte_reader r(f.value);
    auto value = codecs.decode(r);
    if (!value) return value.error().with_context(feed_name(f.node, f.blob));
    if (!r.at_end()) {
      return fail(errc::not_serializable,
                  feed_name(f.node, f.blob) + ": " + std::to_string(r.remaining()) + " bytes left after its value");
    }
    out.set_blob(f.node, f.blob, std::make_shared<const blob>(std::move(value).value()));
  }
  return out;
}

std::string encode_heartbeat(std::uint64_t run_id) {
  std::string bytes;
  byte_writer w(bytes);
  w.u64(run_id);
  return bytes;
}

result<std::uint64_t> decode_heartbeat(std::string_view bytes) {
  byte_reader r(bytes);
  TASKGROUP_TRY(auto run_id, r.u64());
  if (!r.at_end()) return fail(errc::group_mismatch, "a heartbeat with stray bytes at its end");
  return run_id;
}

result<start_message> decode_start(std::string_view bytes) {
  byte_reader r(bytes);
  start_message m;
  TASKGROUP_TRY(m.run_id, r.u64());
  TASKGROUP_TRY(m.fingerprint, r.string());
  TASKGROUP_TRY(auto policy, r.u8());
  m.policy = policy == 1 ? run_policy::gather : run_policy::join;
  TASKGROUP_TRY(auto timeout, r.u64());
  if (timeout != 0) m.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout - 1));
  for (std::uint8_t& b : m.trace.trace_id) {
    TASKGROUP_TRY(b, r.u8());
  }
  for (std::uint8_t& b : m.trace.parent_id) {
    TASKGROUP_TRY(b, r.u8());
  }
  TASKGROUP_TRY(m.trace.flags, r.u8());
  TASKGROUP_TRY(auto has_failure, r.boolean());
  if (has_failure) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    m.failure = e;
  }
  // Read one by one: a count is not trusted before what it counts.
  TASKGROUP_TRY(auto count, r.u32());
  for (std::uint32_t i = 0; i < count; ++i) {
    wire_feed& f = m.feeds.emplace_back();
    TASKGROUP_TRY(f.node, r.string());
    TASKGROUP_TRY(f.blob, r.string());
    TASKGROUP_TRY(f.value, r.string());
  }
  if (!r.at_end()) return fail(errc::group_mismatch, "a START with stray bytes at its end");
  return m;
}

std::string encode_ctrl(std::uint64_t run_id, const std::optional<error>& cancel, const run_report* done) {
  std::string bytes;
  byte_writer w(bytes);
  w.u64(run_id);
  w.boolean(cancel.has_value());
  if (cancel) {
    write_error(w, *cancel);
    return bytes;
  }
  w.u32(done != nullptr ? static_cast<std::uint32_t>(done->tasks.size()) : 0);
  if (done != nullptr) {
    for (const auto& t : done->tasks) {
      w.u8(static_cast<std::uint8_t>(t.status));
      w.boolean(t.failure.has_value());
      if (t.failure) write_error(w, *t.failure);
    }
  }
  return bytes;
}

result<verdict> decode_ctrl(std::string_view bytes, std::uint64_t run_id) {
  byte_reader r(bytes);
  TASKGROUP_TRY(auto id, r.u64());
  if (id != run_id) {
    return fail(errc::group_mismatch,
                "rank 0 ended run " + std::to_string(id) + " during run " + std::to_string(run_id));
  }
  TASKGROUP_TRY(auto cancel, r.boolean());
  verdict v;
  if (cancel) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    v.e = e;
    return v;
  }
  TASKGROUP_TRY(auto n, r.u32());
  for (std::uint32_t i = 0; i < n; ++i) {
    TASKGROUP_TRY(auto st, r.u8());
    if (st > static_cast<std::uint8_t>(task_status::not_run)) {
      return fail(errc::group_mismatch, "rank 0 sent task status " + std::to_string(st));
    }
    TASKGROUP_TRY(auto has_failure, r.boolean());
    std::optional<error> failure;
    if (has_failure) {
      error e;
      TASKGROUP_TRY(read_error(r, e));
      failure = e;
    }
    v.tasks.emplace_back(static_cast<task_status>(st), std::move(failure));
  }
  return v;
}

std::int64_t wall_now_ns() noexcept { return to_ns(std::chrono::system_clock::now()); }

clock_estimate estimate_offset(std::int64_t start_sent_ns, std::int64_t status_seen_ns, clock_sample rank) noexcept {
  // In long double: the differences of two readings since the epoch fit an
  // int64, their sums may not (a rank with a clock set wildly wrong).
  const long double there = static_cast<long double>(rank.start_seen_ns) - static_cast<long double>(start_sent_ns);
  const long double back = static_cast<long double>(rank.status_sent_ns) - static_cast<long double>(status_seen_ns);
  const long double away = static_cast<long double>(status_seen_ns) - static_cast<long double>(start_sent_ns);
  const long double busy = static_cast<long double>(rank.status_sent_ns) - static_cast<long double>(rank.start_seen_ns);
  auto ns = [](long double v) {
    constexpr long double bound = 9.2e18L;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::clamp(v, -bound, bound)));
  };
  return clock_estimate{ns((there + back) / 2), ns(std::max(away - busy, 0.0L))};
}

status_message encode_status(const codec_registry& codecs, std::uint64_t run_id, const result<run_report>& local,
                             const run_report* failed, clock_sample clock) {
  status_message m;
  std::string& bytes = m.bytes;
  byte_writer w(bytes);
  w.u64(run_id);
  w.i64(clock.start_seen_ns);
  w.i64(clock.status_sent_ns);
  const std::size_t header = bytes.size();
  // An output that cannot be encoded: the STATUS is that error alone.
  auto write_failure = [&](const error& e) {
    bytes.resize(header);  // keep the run id and the clock readings only
    m.payloads.clear();
    w.u8(1);
    write_error(w, e);
    w.u32(0);
    w.u32(0);
  };
  if (local) {
    w.u8(0);
  } else {
    w.u8(1);
    write_error(w, local.error());
  }
  const std::size_t count_at = bytes.size();
  w.u32(0);  // the number of detached values, known at the end
  static const run_report none;
  const run_report& from = local ? local.value() : failed != nullptr ? *failed : none;
  const auto& tasks = from.tasks;
  std::uint32_t count = 0;
  for (const auto& t : tasks) count += t.status != task_status::not_run ? 1 : 0;
  w.u32(count);
  for (std::size_t k = 0; k < tasks.size(); ++k) {
    const task_report& t = tasks[k];
    if (t.status == task_status::not_run) continue;
    w.u32(static_cast<std::uint32_t>(k));
    w.u8(static_cast<std::uint8_t>(t.status));
    w.boolean(t.began);
    w.boolean(t.failure.has_value());
    if (t.failure) write_error(w, *t.failure);
    w.i64(to_ns(t.started));
    w.i64(to_ns(t.finished));
    w.u64(t.iterations);
    w.u32(static_cast<std::uint32_t>(t.attempts));
    const std::vector<error>& failures = from.attempt_failures(k);
    w.u32(static_cast<std::uint32_t>(failures.size()));
    for (const error& e : failures) write_error(w, e);
    w.u32(static_cast<std::uint32_t>(t.outputs.size()));
    for (const auto& [name, value] : t.outputs) {
      w.string(name);
      auto codec = codecs.find(value->type());
      if (codec && codec->contiguous && codec->adopt) {
        const std::string_view view = codec->contiguous(*value);
        if (view.size() >= detach_threshold) {
          w.u8(1);
          w.string(codec->tag);
          w.u64(view.size());
          m.payloads.push_back({value, view});
          continue;
        }
      }
      w.u8(0);
      if (auto st = codecs.encode(*value, w); !st) {
        write_failure(st.error().with_context("task " + quote(t.name) + " output " + quote(name)));
        return m;
      }
    }
  }
  const auto detached_count = static_cast<std::uint32_t>(m.payloads.size());
  std::memcpy(bytes.data() + count_at, &detached_count, sizeof detached_count);
  return m;
}

void keep_retries(run_report& report, task_retries r) {
  const std::size_t k = r.task;
  auto at =
      std::find_if(report.retries.begin(), report.retries.end(), [k](const task_retries& x) { return x.task >= k; });
  if (at != report.retries.end() && at->task == k) {
    at->failures = std::move(r.failures);
  } else {
    report.retries.insert(at, std::move(r));
  }
}

namespace {

// Task k's attempts and its failed attempts' errors kept (at most
// max_attempts_limit attempts, the first and the latest 4 failures), into
// its report and the run's retries (kept in task order).
status read_attempts(byte_reader& r, const std::string& who, run_report& report, std::size_t k) {
  task_report& t = report.tasks[k];
  TASKGROUP_TRY(auto attempts, r.u32());
  TASKGROUP_TRY(auto failures, r.u32());
  if (attempts > static_cast<std::uint32_t>(retry_policy::max_attempts_limit) || failures > 5 ||
      failures >= std::max<std::uint32_t>(attempts, 1)) {
    return fail(errc::group_mismatch, who + " sent " + std::to_string(attempts) + " attempts with " +
                                          std::to_string(failures) + " failed ones kept");
  }
  t.attempts = static_cast<int>(attempts);
  if (failures == 0) return ok();
  task_retries kept{k, std::vector<error>(failures)};
  for (error& e : kept.failures) {
    TASKGROUP_TRY(read_error(r, e));
    e = e.with_context(who);
  }
  keep_retries(report, std::move(kept));
  return ok();
}

}  // namespace

result<verdict> decode_status(int from, std::uint64_t run_id, std::string_view bytes, const codec_registry& codecs,
                              run_report& report, status_receiver& receiver, detached_counts& counts) {
  const std::string who = "rank " + std::to_string(from);
  byte_reader r(bytes);
  TASKGROUP_TRY(auto id, r.u64());
  if (id != run_id) {
    return verdict{error(errc::group_mismatch, who + " answered for run " + std::to_string(id) + ", rank 0 is at run " +
                                                   std::to_string(run_id)),
                   {},
                   {}};
  }
  clock_sample clock;
  TASKGROUP_TRY(clock.start_seen_ns, r.i64());
  TASKGROUP_TRY(clock.status_sent_ns, r.i64());
  TASKGROUP_TRY(auto kind, r.u8());
  if (kind > 1) return fail(errc::group_mismatch, who + " sent STATUS kind " + std::to_string(kind));
  std::optional<error> rank_error;  // the reports of its tasks follow it
  if (kind == 1) {
    error e;
    TASKGROUP_TRY(read_error(r, e));
    rank_error = e.with_context(who);
  }
  TASKGROUP_TRY(counts.announced, r.u32());
  TASKGROUP_TRY(auto count, r.u32());
  for (std::uint32_t i = 0; i < count; ++i) {
    TASKGROUP_TRY(auto k, r.u32());
    if (k >= report.tasks.size()) return fail(errc::group_mismatch, who + " reported task #" + std::to_string(k));
    task_report& t = report.tasks[k];
    TASKGROUP_TRY(auto st, r.u8());
    if (st > static_cast<std::uint8_t>(task_status::not_run)) {
      return fail(errc::group_mismatch, who + " sent task status " + std::to_string(st));
    }
    t.status = static_cast<task_status>(st);
    TASKGROUP_TRY(t.began, r.boolean());
    TASKGROUP_TRY(auto has_failure, r.boolean());
    if (has_failure) {
      error e;
      TASKGROUP_TRY(read_error(r, e));
      t.failure = e.with_context(who);
    }
    TASKGROUP_TRY(auto started, r.i64());
    TASKGROUP_TRY(auto finished, r.i64());
    TASKGROUP_TRY(auto iterations, r.u64());
    t.started = from_ns(started);
    t.finished = from_ns(finished);
    t.iterations = iterations;
    TASKGROUP_TRY(read_attempts(r, who, report, k));
    TASKGROUP_TRY(auto outputs, r.u32());
    for (std::uint32_t j = 0; j < outputs; ++j) {
      TASKGROUP_TRY(auto name, r.string());
      TASKGROUP_TRY(auto mode, r.u8());
      result<std::shared_ptr<const blob>> value = error(errc::no_result, "no value");
      if (mode > 1) return fail(errc::group_mismatch, who + " sent output mode " + std::to_string(mode));
      if (mode == 1) {
        TASKGROUP_TRY(auto tag, r.string());
        TASKGROUP_TRY(auto size, r.u64());
        // Past the announced count no payload follows: receiving one
        // would wait for ever.
        if (counts.received >= counts.announced) {
          return fail(errc::group_mismatch, who + " sent more detached values than the " +
                                                std::to_string(counts.announced) + " it announced");
        }
        value = receiver.receive_detached(k, name, tag, size);
        if (value) ++counts.received;  // otherwise drained by the caller
      } else if (auto decoded = codecs.decode(r)) {
        value = std::make_shared<const blob>(std::move(decoded).value());
      } else {
        value = decoded.error();
      }
      if (!value) {
        return verdict{
            value.error().with_context(who + ": task " + quote(t.name) + " output " + quote(name)), {}, clock};
      }
      t.outputs.emplace_back(name, std::move(value).value());
    }
    receiver.task_decoded(k);
  }
  if (!r.at_end()) return fail(errc::group_mismatch, who + " sent " + std::to_string(r.remaining()) + " stray bytes");
  return verdict{std::move(rank_error), {}, clock};
}

}  // namespace taskgroup::detail::mpi
