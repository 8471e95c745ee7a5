// merge_traces: the per-rank trace files of an MPI run as one, on rank 0's
// clock. Generated runs: ranks with clocks set apart (offsets up to 1000 s
// either way), files started at different times, rank 0's estimates of the
// clocks (one rank's left out at times), rank 0's record of the other
// ranks' tasks, rank 0's offloaded ops (a node of another rank named as
// their process at times); the merged spans must land where the model
// puts them.
#include <taskgroup/trace_recorder.hpp>

#include "support/checks.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace taskgroup;
namespace json = boost::json;

namespace {

const std::string tm_trace = std::string(32, 'a');

// A task span of the generated run, in true time (ns); or an offloaded
// op's span, on rank 0's "compute" process (its task on `node`).
struct tmt_span {
  int rank;
  std::string node, task;
  std::int64_t at_ns, dur_ns;
  bool offload = false;
};

struct tmt_run {
  std::vector<trace_file> files;
  std::vector<tmt_span> spans;
  // Where each rank's span goes on the merged clock before times start
  // at 0: true time + shift_ns[rank].
  std::map<int, std::int64_t> shift_ns;
  std::map<int, bool> estimated;
};

json::object tmt_meta(const char* name, std::int64_t pid, std::int64_t tid, const std::string& value) {
  return json::object{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}};
}

json::object tmt_event(const tmt_span& s, std::int64_t pid, double ts_us) {
  return json::object{{"name", s.task}, {"cat", s.offload ? "offload" : "task"},         {"ph", "X"},
                      {"ts", ts_us},    {"dur", static_cast<double>(s.dur_ns) / 1000.0}, {"pid", pid},
                      {"tid", 2},       {"args", {{"task", s.task}, {"node", s.node}}}};
}

tmt_run tmt_generate(std::mt19937_64& rng) {
  auto draw = [&](std::int64_t below) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(below)); };
  tmt_run run;
  const int ranks = 1 + static_cast<int>(draw(4));
  const std::int64_t base = 1'796'000'000'000'000'000;
  std::map<int, std::int64_t> offset, true_origin;
  // At times a node of rank 1 is named "compute", as rank 0's process of
  // offloaded ops is.
  const bool compute_node = ranks > 1 && draw(2) == 0;
  for (int r = 0; r < ranks; ++r) {
    offset[r] = r == 0 ? 0 : draw(2'000'000'000'000) - 1'000'000'000'000;
    true_origin[r] = base + draw(50'000'000);
    for (int n = 0, nodes = 1 + static_cast<int>(draw(2)); n < nodes; ++n) {
      const std::string node =
          compute_node && r == 1 && n == 0 ? "compute" : "r" + std::to_string(r) + "n" + std::to_string(n);
      for (int t = 0, tasks = 1 + static_cast<int>(draw(3)); t < tasks; ++t) {
        run.spans.push_back(tmt_span{r, node, node + "/t" + std::to_string(t), base + 50'000'000 + draw(1'000'000'000),
                                     draw(100'000'000)});
      }
    }
  }
  // Offloaded ops of rank 0's tasks, at times.
  for (int k = 0, ops = static_cast<int>(draw(3)); k < ops; ++k) {
    run.spans.push_back(tmt_span{0, "compute", "op" + std::to_string(k), base + 50'000'000 + draw(1'000'000'000),
                                 draw(1'000'000), true});
  }
  const int unestimated = ranks > 1 && draw(3) == 0 ? 1 + static_cast<int>(draw(ranks - 1)) : -1;
  json::array clocks;
  for (int r = 1; r < ranks; ++r) {
    if (r == unestimated) continue;
    clocks.emplace_back(json::object{{"rank", r}, {"offset_ns", offset[r]}, {"round_trip_ns", draw(1'000'000)}});
  }
  for (int r = 0; r < ranks; ++r) {
    // The file's origin on its own clock; a span's ts is its time on that
    // clock less the origin.
    const std::int64_t origin = true_origin[r] + offset[r];
    json::array events;
    std::map<std::string, std::int64_t> pid_of;
    for (const tmt_span& s : run.spans) {
      // Rank 0 records every task, the others' where they end.
      if (s.rank != r && r != 0) continue;
      // The offloads' process is apart from a node's of the same name.
      const std::string key = s.offload ? "offloads" : "node " + s.node;
      auto [at, fresh] = pid_of.emplace(key, static_cast<std::int64_t>(pid_of.size() + 1));
      if (fresh) events.emplace_back(tmt_meta("process_name", at->second, 0, s.node));
      const std::int64_t when = s.rank == r ? s.at_ns : s.at_ns + s.dur_ns;
      tmt_span recorded = s;
      if (s.rank != r) recorded.dur_ns = 0;
      events.emplace_back(tmt_event(recorded, at->second, static_cast<double>(when + offset[r] - origin) / 1000.0));
    }
    json::object other{{"trace_id", tm_trace}, {"run_span_id", std::string(16, 'b')}, {"origin_unix_ns", origin}};
    if (r != 0 || draw(2) == 0) other["rank"] = r;  // rank 0's file may leave its rank out
    if (r == 0 && !clocks.empty()) other["rank_clocks"] = clocks;
    const json::object file{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
    run.files.push_back(trace_file{"t" + std::to_string(r) + ".json", json::serialize(file)});
    // On the merged clock: rank 0's time less its origin; an unestimated
    // rank's clock is taken as rank 0's.
    const std::int64_t applied = r == unestimated ? 0 : offset[r];
    run.shift_ns[r] = offset[r] - applied - (true_origin[0] + offset[0]);
    run.estimated[r] = r != unestimated;
  }
  std::shuffle(run.files.begin(), run.files.end(), rng);
  return run;
}

}  // namespace

TEST_CASE("merge_traces puts every rank's spans on rank 0's clock", "[trace]") {
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{101}));
  INFO("seed " << seed << " (trace_merge_test)");
  std::mt19937_64 rng(seed);
  const tmt_run run = tmt_generate(rng);
  auto merged = merge_traces(run.files);
  INFO((merged ? std::string() : merged.error().message));
  REQUIRE_OK(merged);
  const json::object out = json::parse(merged.value()).as_object();
  CHECK(out.at("otherData").at("trace_id") == tm_trace.c_str());
  std::map<std::int64_t, std::string> process;
  for (const json::value& v : out.at("traceEvents").as_array()) {
    const json::object& e = v.as_object();
    if (e.at("ph") == "M") process[e.at("pid").as_int64()] = json::value_to<std::string>(e.at("args").at("name"));
  }
  // Every rank's own spans, each once, on its node's process; none of
  // rank 0's records of the others.
  std::map<std::string, std::tuple<std::string, double, double>> got;
  double first = 1e300;
  for (const json::value& v : out.at("traceEvents").as_array()) {
    const json::object& e = v.as_object();
    if (e.at("ph") != "X") continue;
    const std::string task = json::value_to<std::string>(e.at("name"));
    CHECK(got.count(task) == 0);
    got[task] = {process.at(e.at("pid").as_int64()), e.at("ts").to_number<double>(), e.at("dur").to_number<double>()};
    first = std::min(first, e.at("ts").to_number<double>());
  }
  REQUIRE(got.size() == run.spans.size());
  // Moved so that no time is below 0.
  double model_first = 0;
  for (const tmt_span& s : run.spans) {
    model_first = std::min(model_first, static_cast<double>(s.at_ns + run.shift_ns.at(s.rank)) / 1000.0);
  }
  CHECK(first >= -1e-6);
  if (model_first < 0) CHECK(first == Approx(0.0).margin(1e-6));
  for (const tmt_span& s : run.spans) {
    INFO(s.task);
    const auto& [where, ts, dur] = got.at(s.task);
    CHECK(where == s.node + " (rank " + std::to_string(s.rank) + ")");
    CHECK(ts == Approx(static_cast<double>(s.at_ns + run.shift_ns.at(s.rank)) / 1000.0 - model_first).margin(1e-3));
    CHECK(dur == Approx(static_cast<double>(s.dur_ns) / 1000.0).margin(1e-6));
  }
  const json::array& ranks = out.at("otherData").at("ranks").as_array();
  REQUIRE(ranks.size() == run.files.size());
  for (const json::value& r : ranks) {
    CHECK(r.at("estimated").as_bool() == run.estimated.at(static_cast<int>(r.at("rank").as_int64())));
  }
}

TEST_CASE("merge_traces refuses what is not one run's files, naming the file", "[trace]") {
  std::mt19937_64 rng(3);
  tmt_run run = tmt_generate(rng);
  while (run.files.size() < 2) run = tmt_generate(rng);
  auto refused = [](const std::vector<trace_file>& files, const std::string& says) {
    auto m = merge_traces(files);
    REQUIRE_FALSE(m);
    CHECK(m.error().code == errc::bad_argument);
    CHECK_THAT(m.error().message, Catch::Contains(says));
  };
  refused({}, "no trace file to merge");
  auto with = [&](std::size_t k, const std::string& json) {
    std::vector<trace_file> files = run.files;
    files[k].json = json;
    return files;
  };
  refused(with(1, "{"), "trace file \"" + run.files[1].name + "\": not JSON");
  refused(with(1, "[]"), "not a JSON object");
  refused(with(1, R"({"otherData": {}})"), "no \"traceEvents\" array");
  refused(with(1, R"({"traceEvents": [{"ph": "M"}], "otherData": {}})"), "event #0 has no integer \"pid\"");
  refused(with(1, R"({"traceEvents": [], "otherData": {"origin_unix_ns": 1}})"), "no \"otherData\".\"trace_id\"");
  refused(with(1, R"({"traceEvents": [], "otherData": {"trace_id": "x"}})"),
          "no integer \"otherData\".\"origin_unix_ns\"");
  refused(with(1, R"({"traceEvents": [], "otherData": {"trace_id": "x", "origin_unix_ns": 1, "rank": -1}})"),
          "is not a rank");
  refused(with(1, R"({"traceEvents": [], "otherData": {"trace_id": "other", "origin_unix_ns": 1, "rank": 9}})"),
          "of trace \"other\"");
  std::vector<trace_file> twice = run.files;
  twice.push_back(run.files[0]);
  twice.back().name = "again.json";
  refused(twice, "trace file \"again.json\": rank ");
  std::vector<trace_file> no_zero;
  for (const trace_file& f : run.files) {
    if (f.name != "t0.json") no_zero.push_back(f);
  }
  refused(no_zero, "no trace file of rank 0");
}

TEST_CASE("a recorder's file names its rank, its origin and rank 0's clock estimates", "[trace]") {
  trace_recorder r;
  r.set_rank(2);
  r.rank_clock(event_source{}, 1, std::chrono::nanoseconds(-1500), std::chrono::nanoseconds(4000));
  const json::object other = json::parse(r.to_json(trace_context::fresh())).at("otherData").as_object();
  CHECK(other.at("rank").as_int64() == 2);
  const auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(other.at("origin_unix_ns").as_int64() <= now);
  CHECK(other.at("origin_unix_ns").as_int64() > now - std::int64_t{3'600'000'000'000});
  const json::array& clocks = other.at("rank_clocks").as_array();
  REQUIRE(clocks.size() == 1);
  CHECK(clocks[0].at("rank").as_int64() == 1);
  CHECK(clocks[0].at("offset_ns").as_int64() == -1500);
  CHECK(clocks[0].at("round_trip_ns").as_int64() == 4000);
}
