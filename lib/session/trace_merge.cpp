// merge_traces: the trace files of an MPI run's ranks as one, on rank 0's
// clock (include/taskgroup/trace_recorder.hpp says the rules).
#include <taskgroup/trace_recorder.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

namespace json = boost::json;

namespace {

// One file, read and checked.
struct tm_file {
  const trace_file* from = nullptr;
  int rank = 0;
  json::array events;
  json::object other;
  std::int64_t origin_ns = 0;
};

// A rank's clock against rank 0's, as rank 0's file gives it.
struct tm_clock {
  std::int64_t offset_ns = 0;
  std::int64_t round_trip_ns = 0;
  bool estimated = false;
};

error tm_bad(const trace_file& f, const std::string& what) {
  return error(errc::bad_argument, "trace file " + quote(f.name) + ": " + what);
}

const json::value* tm_int(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && (v->is_int64() || (v->is_uint64() && v->as_uint64() <= INT64_MAX)) ? v : nullptr;
}

std::int64_t tm_as_int(const json::value& v) {
  return v.is_int64() ? v.as_int64() : static_cast<std::int64_t>(v.as_uint64());
}

result<tm_file> tm_read(const trace_file& f) {
  boost::system::error_code ec;
  json::value v = json::parse(f.json, ec);
  if (ec) return tm_bad(f, "not JSON: " + ec.message());
  if (!v.is_object()) return tm_bad(f, "not a JSON object");
  json::object& o = v.as_object();
  tm_file out;
  out.from = &f;
  json::value* events = o.if_contains("traceEvents");
  if (events == nullptr || !events->is_array()) return tm_bad(f, "no \"traceEvents\" array");
  out.events = std::move(events->as_array());
  for (std::size_t i = 0; i < out.events.size(); ++i) {
    if (!out.events[i].is_object() || tm_int(out.events[i].as_object(), "pid") == nullptr) {
      return tm_bad(f, "event #" + std::to_string(i) + " has no integer \"pid\"");
    }
  }
  json::value* other = o.if_contains("otherData");
  if (other == nullptr || !other->is_object()) return tm_bad(f, "no \"otherData\" object");
  out.other = std::move(other->as_object());
  const json::value* id = out.other.if_contains("trace_id");
  if (id == nullptr || !id->is_string()) return tm_bad(f, "no \"otherData\".\"trace_id\"");
  const json::value* origin = tm_int(out.other, "origin_unix_ns");
  if (origin == nullptr) return tm_bad(f, "no integer \"otherData\".\"origin_unix_ns\"");
  out.origin_ns = tm_as_int(*origin);
  if (out.other.contains("rank")) {
    const json::value* rank = tm_int(out.other, "rank");
    if (rank == nullptr || tm_as_int(*rank) < 0 || tm_as_int(*rank) > (1 << 30)) {
      return tm_bad(f, "\"otherData\".\"rank\" is not a rank (an integer in [0, 2^30])");
    }
    out.rank = static_cast<int>(tm_as_int(*rank));
  }
  return out;
}

// Every file read; one trace, one file per rank, rank 0's among them; by
// rank.
result<std::vector<tm_file>> tm_read_all(const std::vector<trace_file>& files) {
  if (files.empty()) return error(errc::bad_argument, "merge_traces: no trace file to merge");
  std::vector<tm_file> out;
  for (const trace_file& f : files) {
    TASKGROUP_TRY(tm_file t, tm_read(f));
    out.push_back(std::move(t));
  }
  const json::value& trace = out.front().other.at("trace_id");
  std::map<int, const trace_file*> seen;
  for (const tm_file& t : out) {
    if (t.other.at("trace_id") != trace) {
      return tm_bad(*t.from, "of trace " + json::serialize(t.other.at("trace_id")) + ", not of " +
                                 json::serialize(trace) + " as " + quote(out.front().from->name));
    }
    if (auto [at, fresh] = seen.emplace(t.rank, t.from); !fresh) {
      return tm_bad(*t.from, "rank " + std::to_string(t.rank) + " again (" + quote(at->second->name) + ")");
    }
  }
  if (seen.count(0) == 0) return error(errc::bad_argument, "merge_traces: no trace file of rank 0");
  std::sort(out.begin(), out.end(), [](const tm_file& a, const tm_file& b) { return a.rank < b.rank; });
  return out;
}

// Rank 0's estimates of the other ranks' clocks.
result<std::map<int, tm_clock>> tm_clocks(const tm_file& zero) {
  std::map<int, tm_clock> out;
  const json::value* clocks = zero.other.if_contains("rank_clocks");
  if (clocks == nullptr) return out;
  const auto malformed = [&] {
    return tm_bad(*zero.from, "\"rank_clocks\" is not a list of {rank, offset_ns, round_trip_ns}");
  };
  if (!clocks->is_array()) return malformed();
  for (const json::value& c : clocks->as_array()) {
    if (!c.is_object()) return malformed();
    const json::value* rank = tm_int(c.as_object(), "rank");
    const json::value* offset = tm_int(c.as_object(), "offset_ns");
    const json::value* round_trip = tm_int(c.as_object(), "round_trip_ns");
    if (rank == nullptr || offset == nullptr || round_trip == nullptr) return malformed();
    out[static_cast<int>(tm_as_int(*rank))] = tm_clock{tm_as_int(*offset), tm_as_int(*round_trip), true};
  }
  return out;
}

// The nodes the other ranks ran: what their spans name, but offloaded
// ops' (on "compute").
std::set<std::string> tm_remote_nodes(const std::vector<tm_file>& files) {
  std::set<std::string> out;
  for (const tm_file& t : files) {
    if (t.rank == 0) continue;
    for (const json::value& v : t.events) {
      const json::object& e = v.as_object();
      const json::value* args = e.if_contains("args");
      const json::value* cat = e.if_contains("cat");
      if (args == nullptr || !args->is_object() || (cat != nullptr && *cat == "offload")) continue;
      if (const json::value* node = args->as_object().if_contains("node"); node != nullptr && node->is_string()) {
        out.emplace(node->as_string());
      }
    }
  }
  return out;
}

// Appends `t`'s events, moved by `shift_us`, its processes numbered from
// `next_pid` and renamed after its rank; on rank 0 without the processes
// of `remote` nodes. The process of rank 0's offloaded ops is told apart
// by what it holds, not by its name ("compute"), which a node of another
// rank may have.
void tm_append(tm_file& t, double shift_us, const std::set<std::string>& remote, std::int64_t& next_pid,
               json::array& out) {
  std::map<std::int64_t, std::int64_t> pid_of;
  std::set<std::int64_t> dropped, offloads;
  for (const json::value& v : t.events) {
    const json::object& e = v.as_object();
    if (const json::value* cat = e.if_contains("cat"); cat != nullptr && *cat == "offload") {
      offloads.insert(tm_as_int(e.at("pid")));
    }
  }
  for (const json::value& v : t.events) {
    const json::object& e = v.as_object();
    const json::value* args = e.if_contains("args");
    if (t.rank != 0 || e.if_contains("name") == nullptr || e.at("name") != "process_name" || args == nullptr ||
        !args->is_object()) {
      continue;
    }
    const json::value* name = args->as_object().if_contains("name");
    const std::int64_t pid = tm_as_int(e.at("pid"));
    if (name != nullptr && name->is_string() && remote.count(std::string(name->as_string())) != 0 &&
        offloads.count(pid) == 0) {
      dropped.insert(pid);
    }
  }
  const std::string mark = " (rank " + std::to_string(t.rank) + ")";
  for (json::value& v : t.events) {
    json::object& e = v.as_object();
    const std::int64_t pid = tm_as_int(e.at("pid"));
    if (dropped.count(pid) != 0) continue;
    auto [at, fresh] = pid_of.emplace(pid, next_pid);
    if (fresh) ++next_pid;
    e["pid"] = at->second;
    if (json::value* ts = e.if_contains("ts"); ts != nullptr && ts->is_number())
      *ts = ts->to_number<double>() + shift_us;
    json::value* args = e.if_contains("args");
    if (e.if_contains("name") != nullptr && e.at("name") == "process_name" && args != nullptr && args->is_object()) {
      if (json::value* name = args->as_object().if_contains("name"); name != nullptr && name->is_string()) {
        name->as_string().append(mark);
      }
    }
    out.push_back(std::move(v));
  }
}

}  // namespace

result<std::string> merge_traces(const std::vector<trace_file>& files) {
  TASKGROUP_TRY(std::vector<tm_file> all, tm_read_all(files));
  tm_file& zero = all.front();
  TASKGROUP_TRY(auto clocks, tm_clocks(zero));
  const std::set<std::string> remote = tm_remote_nodes(all);
  json::array events;
  json::array ranks;
  std::int64_t next_pid = 1;
  std::int64_t dropped = 0;
  for (tm_file& t : all) {
    const tm_clock c = t.rank == 0 ? tm_clock{0, 0, true} : clocks[t.rank];
    // A span at ts on rank r happened at origin_r + ts on r's clock, that
    // is origin_r + ts - offset_r on rank 0's, where rank 0's ts is that
    // less origin_0.
    const double shift_us = static_cast<double>(t.origin_ns - c.offset_ns - zero.origin_ns) / 1000.0;
    tm_append(t, shift_us, remote, next_pid, events);
    ranks.emplace_back(json::object{
        {"rank", t.rank}, {"offset_ns", c.offset_ns}, {"round_trip_ns", c.round_trip_ns}, {"estimated", c.estimated}});
    if (const json::value* d = tm_int(t.other, "dropped_spans")) dropped += tm_as_int(*d);
  }
  // Times from 0: a rank may have begun recording before rank 0.
  double first = 0;
  for (const json::value& v : events) {
    if (const json::value* ts = v.as_object().if_contains("ts"); ts != nullptr && ts->is_number()) {
      first = std::min(first, ts->to_number<double>());
    }
  }
  for (json::value& v : events) {
    if (json::value* ts = v.as_object().if_contains("ts"); ts != nullptr && ts->is_number()) {
      *ts = ts->to_number<double>() - first;
    }
  }
  json::object other{{"trace_id", zero.other.at("trace_id")},
                     {"origin_unix_ns", zero.origin_ns + static_cast<std::int64_t>(first * 1000.0)},
                     {"ranks", std::move(ranks)}};
  if (const json::value* span = zero.other.if_contains("run_span_id")) other["run_span_id"] = *span;
  if (dropped > 0) other["dropped_spans"] = dropped;
  json::object out{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
  return json::serialize(out);
}

}  // namespace taskgroup
