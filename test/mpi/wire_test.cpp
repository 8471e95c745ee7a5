// The MPI session's message encodings (lib/mpi/wire.hpp), called directly:
// plain functions over bytes, run without mpirun.
#include "mpi/wire.hpp"

#include <taskgroup/codec.hpp>

#include <boost/system/errc.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::detail::mpi;
using namespace std::chrono_literals;

namespace {

// Plays the transport's part: a detached value arrives as the payload of
// the same index, adopted into a fresh blob as rank 0 would receive it.
class loopback final : public status_receiver {
 public:
  explicit loopback(const status_message& sent) : sent_(sent) {}

  result<std::shared_ptr<const blob>> receive_detached(std::size_t task, const std::string& output,
                                                       const std::string& tag, std::uint64_t size) override {
    asked.push_back(std::to_string(task) + "/" + output);
    auto codec = codec_registry::global().find(tag);
    REQUIRE(codec);
    REQUIRE(next_ < sent_.payloads.size());
    const std::string_view bytes = sent_.payloads[next_++].bytes;
    REQUIRE(bytes.size() == size);
    auto b = std::make_shared<blob>();
    char* where = codec->adopt(*b, static_cast<std::size_t>(size));
    std::memcpy(where, bytes.data(), bytes.size());
    return std::shared_ptr<const blob>(std::move(b));
  }
  void task_decoded(std::size_t task) override { decoded.push_back(task); }

  std::vector<std::string> asked;
  std::vector<std::size_t> decoded;

 private:
  const status_message& sent_;
  std::size_t next_ = 0;
};

run_report two_tasks() {
  run_report r;
  for (const char* name : {"n1/a", "n2/b"}) {
    task_report& t = r.tasks.emplace_back();
    t.name = name;
    t.node = std::string(name).substr(0, 2);
  }
  return r;
}

}  // namespace

TEST_CASE("START round-trips, with or without a failure", "[mpi_wire]") {
  start_message m;
  m.run_id = 7;
  m.fingerprint = "ranks 3\nnode \"n1\" on rank 1\n";
  m.policy = run_policy::gather;
  m.timeout = 250ms;
  m.trace = trace_context::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").value();
  auto back = decode_start(encode_start(m));
  REQUIRE(back);
  CHECK(back.value().run_id == 7);
  CHECK(back.value().trace == m.trace);
  CHECK(back.value().fingerprint == m.fingerprint);
  CHECK(back.value().policy == run_policy::gather);
  REQUIRE(back.value().timeout);
  CHECK(*back.value().timeout == 250ms);
  CHECK_FALSE(back.value().failure);

  m.timeout = 0ms;  // zero is a deadline, not "none"
  m.failure = error(errc::invalid_task, "placement outside the job");
  back = decode_start(encode_start(m));
  REQUIRE(back);
  REQUIRE(back.value().timeout);
  CHECK(back.value().timeout->count() == 0);
  REQUIRE(back.value().failure);
  CHECK(back.value().failure->code == errc::invalid_task);
  CHECK(back.value().failure->message == "placement outside the job");

  const std::string bytes = encode_start(m);
  auto cut = decode_start(std::string_view(bytes).substr(0, bytes.size() - 1));
  REQUIRE_FALSE(cut);
  CHECK(cut.error().code == errc::not_serializable);
}

TEST_CASE("START carries the feeds of a rank's nodes, their values encoded by the codecs", "[mpi_wire]") {
  const codec_registry& codecs = codec_registry::global();
  feeds given;
  given.set("n1", "i", std::int64_t{-42})
      .set("n1", "d", 2.5)
      .set("n2", "s", std::string("hello\0there", 11))
      .set("n2", "v", std::vector<std::int64_t>{1, 2, 3});
  start_message m;
  m.run_id = 3;
  m.fingerprint = "ranks 3\n";
  for (const auto& f : given.entries()) {
    auto w = encode_feed(codecs, f);
    REQUIRE(w);
    m.feeds.push_back(std::move(w).value());
  }
  const std::string bytes = encode_start(m);
  auto back = decode_start(bytes);
  REQUIRE(back);
  REQUIRE(back.value().feeds.size() == 4);
  CHECK(back.value().feeds[2].node == "n2");
  CHECK(back.value().feeds[2].blob == "s");
  auto fed = decode_feeds(codecs, back.value().feeds);
  REQUIRE(fed);
  const auto& e = fed.value().entries();
  REQUIRE(e.size() == 4);
  CHECK(e[0].node == "n1");
  CHECK(e[0].blob == "i");
  CHECK(*e[0].value->get<std::int64_t>().value() == -42);
  CHECK(*e[1].value->get<double>().value() == 2.5);
  CHECK(*e[2].value->get<std::string>().value() == std::string("hello\0there", 11));
  CHECK(e[3].node == "n2");
  CHECK(e[3].blob == "v");
  CHECK(*e[3].value->get<std::vector<std::int64_t>>().value() == std::vector<std::int64_t>{1, 2, 3});

  // Every truncation is refused, and so are stray bytes.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto cut = decode_start(std::string_view(bytes).substr(0, n));
    REQUIRE_FALSE(cut);
    CHECK(cut.error().code == errc::not_serializable);
  }
  auto stray = decode_start(bytes + "x");
  REQUIRE_FALSE(stray);
  CHECK(stray.error().code == errc::group_mismatch);
}

TEST_CASE("a feed without a codec, or whose value does not decode, is refused naming it", "[mpi_wire]") {
  codec_registry bare;  // the built-in codecs only
  struct unknown {
    int v = 0;
  };
  auto no_codec = encode_feed(bare, feeds::entry{"n1", "u", std::make_shared<const blob>(blob(unknown{}))});
  REQUIRE_FALSE(no_codec);
  CHECK(no_codec.error().code == errc::not_serializable);
  CHECK_THAT(no_codec.error().message,
             Catch::StartsWith("feed \"n1/u\": no codec for type ") && Catch::Contains("unknown"));

  auto good = encode_feed(bare, feeds::entry{"n2", "x", std::make_shared<const blob>(blob(std::int64_t{7}))});
  REQUIRE(good);
  // The value cut short, its codec unknown here, bytes after it.
  wire_feed cut = good.value();
  cut.value.pop_back();
  wire_feed foreign = good.value();
  foreign.value = std::string();
  byte_writer w(foreign.value);
  w.string("nobody");
  wire_feed longer = good.value();
  longer.value += "zz";
  const std::vector<std::pair<wire_feed, std::string>> cases = {
      {cut, "feed \"n2/x\": "},
      {foreign, "feed \"n2/x\": no codec tagged \"nobody\" in this process"},
      {longer, "feed \"n2/x\": 2 bytes left after its value"},
  };
  for (const auto& [feed, message] : cases) {
    auto fed = decode_feeds(bare, {good.value(), feed});
    REQUIRE_FALSE(fed);
    CHECK(fed.error().code == errc::not_serializable);
    CHECK_THAT(fed.error().message, Catch::StartsWith(message));
  }
}

TEST_CASE("HEARTBEAT carries its run id and nothing else", "[mpi_wire]") {
  const std::string beat = encode_heartbeat(0x0102030405060708ULL);
  CHECK(beat.size() == 8);
  auto id = decode_heartbeat(beat);
  REQUIRE(id);
  CHECK(id.value() == 0x0102030405060708ULL);
  CHECK_FALSE(decode_heartbeat(beat.substr(0, 7)));
  auto stray = decode_heartbeat(beat + "x");
  REQUIRE_FALSE(stray);
  CHECK(stray.error().code == errc::group_mismatch);
}

TEST_CASE("CTRL carries CANCEL's error or DONE's statuses, for its own run only", "[mpi_wire]") {
  auto cancel = decode_ctrl(encode_ctrl(3, error(errc::timeout, "run timed out")), 3);
  REQUIRE(cancel);
  REQUIRE(cancel.value().e);
  CHECK(cancel.value().e->code == errc::timeout);

  run_report done = two_tasks();
  done.tasks[0].status = task_status::succeeded;
  done.tasks[1].status = task_status::failed;
  done.tasks[1].failure = error(errc::op_failed, "disk on fire");
  auto v = decode_ctrl(encode_ctrl(3, std::nullopt, &done), 3);
  REQUIRE(v);
  CHECK_FALSE(v.value().e);
  REQUIRE(v.value().tasks.size() == 2);
  CHECK(v.value().tasks[0].first == task_status::succeeded);
  CHECK_FALSE(v.value().tasks[0].second);
  CHECK(v.value().tasks[1].first == task_status::failed);
  REQUIRE(v.value().tasks[1].second);
  CHECK(v.value().tasks[1].second->message == "disk on fire");

  auto other = decode_ctrl(encode_ctrl(2, std::nullopt, &done), 3);
  REQUIRE_FALSE(other);
  CHECK(other.error().code == errc::group_mismatch);
  CHECK(other.error().message == "rank 0 ended run 2 during run 3");
}

TEST_CASE("an error of a foreign category reads back as op_failed naming it", "[mpi_wire]") {
  std::string bytes;
  byte_writer w(bytes);
  error e(boost::system::errc::make_error_code(boost::system::errc::io_error), "read failed");
  write_error(w, e);
  byte_reader r(bytes);
  error back;
  REQUIRE(read_error(r, back));
  CHECK(back.code == e.code);  // generic: known on every rank

  bytes.clear();
  w.string("no-such-category");
  w.i64(5);
  w.string("odd");
  byte_reader r2(bytes);
  REQUIRE(read_error(r2, back));
  CHECK(back.code == errc::op_failed);
  CHECK(back.message == "odd (no-such-category error 5)");
}

TEST_CASE("STATUS round-trips reports and outputs, large values detached", "[mpi_wire]") {
  const codec_registry& codecs = codec_registry::global();
  run_report mine = two_tasks();
  task_report& a = mine.tasks[0];
  a.status = task_status::succeeded;
  a.began = true;
  a.iterations = 12;
  a.attempts = 3;
  mine.retries.push_back(task_retries{0, {error(errc::op_failed, "first"), error(errc::timeout, "second")}});
  a.started = std::chrono::system_clock::time_point(std::chrono::seconds(1000));
  a.finished = a.started + 5ms;
  a.outputs.emplace_back("small", std::make_shared<const blob>(std::int64_t{42}));
  const std::string big(detach_threshold, 'x');
  a.outputs.emplace_back("big", std::make_shared<const blob>(big));
  // Task 1 did not run here: it is not in the STATUS.

  const clock_sample clock{1'796'623'231'019'259'742, 1'796'623'231'119'259'743};
  status_message m = encode_status(codecs, 9, mine, nullptr, clock);
  REQUIRE(m.payloads.size() == 1);
  CHECK(m.payloads[0].bytes.size() == big.size());

  run_report got = two_tasks();
  loopback rx(m);
  detached_counts counts;
  auto v = decode_status(2, 9, m.bytes, codecs, got, rx, counts);
  REQUIRE(v);
  CHECK_FALSE(v.value().e);
  CHECK(v.value().clock.start_seen_ns == clock.start_seen_ns);
  CHECK(v.value().clock.status_sent_ns == clock.status_sent_ns);
  CHECK(counts.announced == 1);
  CHECK(counts.received == 1);
  CHECK(rx.asked == std::vector<std::string>{"0/big"});
  CHECK(rx.decoded == std::vector<std::size_t>{0});
  const task_report& t = got.tasks[0];
  CHECK(t.status == task_status::succeeded);
  CHECK(t.began);
  CHECK(t.iterations == 12);
  CHECK(t.attempts == 3);
  REQUIRE(got.attempt_failures(0).size() == 2);
  CHECK(got.attempt_failures(0)[0].code == errc::op_failed);
  CHECK(got.attempt_failures(0)[0].message == "rank 2: first");
  CHECK(got.attempt_failures(0)[1].code == errc::timeout);
  CHECK(got.attempt_failures(1).empty());
  CHECK(t.started == a.started);
  CHECK(t.finished == a.finished);
  REQUIRE(t.outputs.size() == 2);
  CHECK(*t.outputs[0].second->try_get<std::int64_t>() == 42);
  CHECK(*t.outputs[1].second->try_get<std::string>() == big);
  CHECK(got.tasks[1].status == task_status::not_run);
}

TEST_CASE("STATUS: a rank's error carries what its tasks did; an unknown kind is refused", "[mpi_wire]") {
  const codec_registry& codecs = codec_registry::global();
  run_report mine = two_tasks();
  mine.tasks[1].status = task_status::failed;
  mine.tasks[1].failure = error(errc::op_failed, "task \"n2/b\": boom");
  mine.tasks[1].iterations = 3;
  const result<run_report> failure = error(errc::op_failed, "boom");
  status_message m = encode_status(codecs, 4, failure, &mine);
  run_report got = two_tasks();
  status_message none;
  loopback rx(none);
  detached_counts counts;
  auto v = decode_status(1, 4, m.bytes, codecs, got, rx, counts);
  REQUIRE(v);
  REQUIRE(v.value().e);
  CHECK(v.value().e->message == "rank 1: boom");
  CHECK(got.tasks[0].status == task_status::not_run);
  CHECK(got.tasks[1].status == task_status::failed);
  REQUIRE(got.tasks[1].failure);
  CHECK(got.tasks[1].failure->message == "rank 1: task \"n2/b\": boom");
  CHECK(got.tasks[1].iterations == 3);

  std::string odd = m.bytes;
  odd[24] = 2;  // the kind, after the run id and the clock readings
  auto bad = decode_status(1, 4, odd, codecs, got, rx, counts);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "rank 1 sent STATUS kind 2");
}

TEST_CASE("STATUS: a rank's error, another run, stray bytes, a bad index", "[mpi_wire]") {
  const codec_registry& codecs = codec_registry::global();
  const result<run_report> failure = error(errc::op_failed, "boom");
  status_message failed = encode_status(codecs, 4, failure);
  run_report got = two_tasks();
  status_message none;
  loopback rx(none);
  detached_counts counts;
  auto v = decode_status(1, 4, failed.bytes, codecs, got, rx, counts);
  REQUIRE(v);
  REQUIRE(v.value().e);
  CHECK(v.value().e->message == "rank 1: boom");

  v = decode_status(1, 5, failed.bytes, codecs, got, rx, counts);
  REQUIRE(v);
  REQUIRE(v.value().e);
  CHECK(v.value().e->code == errc::group_mismatch);
  CHECK(v.value().e->message == "rank 1 answered for run 4, rank 0 is at run 5");

  run_report mine = two_tasks();
  mine.tasks[1].status = task_status::cancelled;
  status_message ok_msg = encode_status(codecs, 4, mine);
  std::string stray = ok_msg.bytes + "zz";
  auto s = decode_status(1, 4, stray, codecs, got, rx, counts);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == errc::group_mismatch);
  CHECK(s.error().message == "rank 1 sent 2 stray bytes");

  run_report one;  // rank 0 knows one task; the STATUS names task #1
  one.tasks.emplace_back();
  auto bad = decode_status(1, 4, ok_msg.bytes, codecs, one, rx, counts);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "rank 1 reported task #1");
}

TEST_CASE("STATUS: a detached value beyond the announced count is refused, not awaited", "[mpi_wire]") {
  const codec_registry& codecs = codec_registry::global();
  run_report mine = two_tasks();
  mine.tasks[0].status = task_status::succeeded;
  mine.tasks[0].outputs.emplace_back("big", std::make_shared<const blob>(std::string(detach_threshold, 'x')));
  status_message m = encode_status(codecs, 9, mine);
  REQUIRE(m.payloads.size() == 1);
  // The announced count (after the run id, the clock readings and the
  // kind byte) says 0.
  std::string lying = m.bytes;
  const std::uint32_t zero = 0;
  std::memcpy(lying.data() + 25, &zero, sizeof zero);
  run_report got = two_tasks();
  loopback rx(m);
  detached_counts counts;
  auto v = decode_status(2, 9, lying, codecs, got, rx, counts);
  REQUIRE_FALSE(v);
  CHECK(v.error().code == errc::group_mismatch);
  CHECK(v.error().message == "rank 2 sent more detached values than the 0 it announced");
  CHECK(rx.asked.empty());  // nothing was received

  // An output mode other than 0 (inline) and 1 (detached).
  run_report one_out = two_tasks();
  one_out.tasks[0].status = task_status::succeeded;
  one_out.tasks[0].outputs.emplace_back("x", std::make_shared<const blob>(std::int64_t{1}));
  std::string odd = encode_status(codecs, 9, one_out).bytes;
  // The mode byte follows the output's name ("x", a u64 length and 1 byte).
  const auto at = odd.find(std::string("\x01\0\0\0\0\0\0\0x", 9));
  REQUIRE(at != std::string::npos);
  odd[at + 9] = 2;
  auto w = decode_status(2, 9, odd, codecs, got, rx, counts);
  REQUIRE_FALSE(w);
  CHECK(w.error().message == "rank 2 sent output mode 2");
}

TEST_CASE("a rank's clock offset, estimated from START and STATUS, is within half the round trip", "[mpi_wire]") {
  // Generated exchanges: a true offset (up to a day either way), one-way
  // delays and the rank's time between its readings; the estimate must
  // be within half the round trip it reports, which must be the sum of
  // the delays.
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{201}));
  INFO("seed " << seed << " (wire_test clock estimate)");
  std::mt19937_64 rng(seed);
  auto draw = [&](std::int64_t below) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(below)); };
  const std::int64_t day = 86'400'000'000'000;
  const std::int64_t offset = draw(2 * day) - day;
  const std::int64_t there = draw(5'000'000);  // up to 5 ms on the wire each way
  const std::int64_t back = draw(5'000'000);
  const std::int64_t busy = draw(60'000'000'000);  // the rank's part: up to a minute
  const std::int64_t t0 = 1'796'000'000'000'000'000 + draw(1'000'000'000'000);
  const clock_sample rank{t0 + there + offset, t0 + there + offset + busy};
  const std::int64_t t3 = t0 + there + busy + back;
  const clock_estimate e = estimate_offset(t0, t3, rank);
  CHECK(e.round_trip.count() == there + back);
  CHECK(std::abs(e.offset.count() - offset) <= (there + back) / 2 + 1);
  // A rank whose clock reads earlier than rank 0 sent START is no special
  // case; a round trip is never negative.
  CHECK(estimate_offset(t3, t0, rank).round_trip.count() >= 0);
}
