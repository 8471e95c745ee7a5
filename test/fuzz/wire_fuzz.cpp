// libFuzzer target: the MPI session's message decoders (lib/mpi/wire.*,
// plain functions over bytes, compiled in here without MPI) must never
// crash, over-allocate or invoke undefined behaviour on any bytes, and a
// message that decodes must encode to bytes that decode to the same
// message and encode to the same bytes again.
//
// Input: the first byte picks the message (START with its feeds' values,
// CTRL, STATUS, HEARTBEAT or an error, modulo 5); the rest is the message.
// For CTRL and STATUS the expected run id is the message's own first 8
// bytes (so that the rest is reached), and STATUS decodes into a report of
// 4 tasks.
#include "mpi/wire.hpp"

#include <taskgroup/codec.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

using namespace taskgroup;
using namespace taskgroup::detail::mpi;

[[noreturn]] void broken(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "wire round trip: %s %s\n", what, detail.c_str());
  std::abort();
}

std::uint64_t leading_id(std::string_view bytes) {
  std::uint64_t id = 0;
  if (bytes.size() >= 8) std::memcpy(&id, bytes.data(), 8);  // little-endian hosts, as the wire
  return id;
}

bool same(const std::optional<error>& a, const std::optional<error>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->code == b->code && a->message == b->message);
}

void start_bytes(std::string_view bytes) {
  auto m = decode_start(bytes);
  if (!m) return;
  const std::string once = encode_start(m.value());
  auto back = decode_start(once);
  if (!back) broken("an encoded START does not decode:", back.error().message);
  const start_message& a = m.value();
  const start_message& b = back.value();
  if (a.run_id != b.run_id || a.fingerprint != b.fingerprint || a.policy != b.policy || a.timeout != b.timeout ||
      a.trace != b.trace || !same(a.failure, b.failure) || a.feeds.size() != b.feeds.size()) {
    broken("START changes through a round trip");
  }
  for (std::size_t k = 0; k < a.feeds.size(); ++k) {
    if (a.feeds[k].node != b.feeds[k].node || a.feeds[k].blob != b.feeds[k].blob ||
        a.feeds[k].value != b.feeds[k].value) {
      broken("START's feeds change through a round trip");
    }
  }
  if (encode_start(b) != once) broken("START's encoding is not stable");
  // The feeds' values, as a worker decodes them: any bytes, no crash; a
  // value that decodes encodes again to a value that decodes.
  auto fed = decode_feeds(codec_registry::global(), a.feeds);
  if (!fed) return;
  for (const auto& f : fed.value().entries()) {
    auto again = encode_feed(codec_registry::global(), f);
    if (!again) broken("a decoded feed does not encode:", again.error().message);
    if (!decode_feeds(codec_registry::global(), {again.value()})) broken("a re-encoded feed does not decode");
  }
}

// A report whose tasks carry what a DONE said about them.
run_report report_of(const verdict& v) {
  run_report r;
  for (const auto& [status, failure] : v.tasks) {
    task_report& t = r.tasks.emplace_back();
    t.status = status;
    t.failure = failure;
  }
  return r;
}

void ctrl_bytes(std::string_view bytes) {
  const std::uint64_t id = leading_id(bytes);
  auto v = decode_ctrl(bytes, id);
  if (!v) return;
  const run_report done = report_of(v.value());
  const std::string once = encode_ctrl(id, v.value().e, v.value().e ? nullptr : &done);
  auto back = decode_ctrl(once, id);
  if (!back) broken("an encoded CTRL does not decode:", back.error().message);
  if (!same(v.value().e, back.value().e)) broken("CTRL's error changes through a round trip");
  if (!v.value().e) {
    if (back.value().tasks.size() != v.value().tasks.size()) broken("DONE's task count changes");
    for (std::size_t k = 0; k < v.value().tasks.size(); ++k) {
      if (back.value().tasks[k].first != v.value().tasks[k].first ||
          !same(back.value().tasks[k].second, v.value().tasks[k].second)) {
        broken("DONE's tasks change through a round trip");
      }
    }
  }
}

// Detached values arrive as zero bytes, at most 1 MiB of them (the real
// transport receives what MPI delivers, bounded by INT_MAX).
class zeros final : public status_receiver {
 public:
  result<std::shared_ptr<const blob>> receive_detached(std::size_t, const std::string&, const std::string& tag,
                                                       std::uint64_t size) override {
    auto codec = codec_registry::global().find(tag);
    if (!codec || !codec->adopt) return fail(errc::not_serializable, "no contiguous codec");
    if (size > (1u << 20)) return fail(errc::mpi_failed, "too large");
    auto b = std::make_shared<blob>();
    char* where = codec->adopt(*b, static_cast<std::size_t>(size));
    if (where == nullptr && size != 0) return fail(errc::not_serializable, "cannot hold");
    if (size != 0) std::memset(where, 0, static_cast<std::size_t>(size));
    return std::shared_ptr<const blob>(std::move(b));
  }
  void task_decoded(std::size_t) override {}
};

void status_bytes(std::string_view bytes) {
  run_report report;
  for (int k = 0; k < 4; ++k) {
    task_report& t = report.tasks.emplace_back();
    t.name = "n/t" + std::to_string(k);
    t.node = "n";
  }
  zeros rx;
  detached_counts counts;
  auto v = decode_status(1, leading_id(bytes), bytes, codec_registry::global(), report, rx, counts);
  if (counts.received > counts.announced) broken("more detached values received than announced");
  (void)v;
}

void heartbeat_bytes(std::string_view bytes) {
  auto id = decode_heartbeat(bytes);
  if (id && encode_heartbeat(id.value()) != bytes) broken("HEARTBEAT's encoding is not its bytes");
}

void error_bytes(std::string_view bytes) {
  byte_reader r(bytes);
  error e;
  if (!read_error(r, e)) return;
  std::string once;
  byte_writer w(once);
  write_error(w, e);
  byte_reader back(once);
  error again;
  if (!read_error(back, again) || !back.at_end()) broken("a written error does not read back");
  if (again.code != e.code || again.message != e.message) broken("an error changes through a round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: start_bytes(bytes); break;
    case 1: ctrl_bytes(bytes); break;
    case 2: status_bytes(bytes); break;
    case 3: heartbeat_bytes(bytes); break;
    default: error_bytes(bytes); break;
  }
  return 0;
}
