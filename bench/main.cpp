// taskgroup_bench: runs every registered workload (one folder per workload
// under bench/), each contender as a Google Benchmark with repetitions,
// collects the medians with a custom reporter, and prints per workload our
// figure, each baseline's figure, the ratio ours/baseline and the targets.
//
//   taskgroup_bench [--quick] [--filter REGEX] [--json FILE] [--check]
//                   [--repetitions N] [--min-time S] [--list] [--verbose]
//                   [--benchmark_... (passed to Google Benchmark)]
//
// Workloads whose figure is not a time (memory per task) name a Google
// Benchmark user counter instead (`workload::counter`); their contenders
// usually measure in a fresh process, `taskgroup_bench --probe NAME`.
#include "common/registry.hpp"

#include <benchmark/benchmark.h>
#include <oneapi/tbb/version.h>
#include <boost/json.hpp>
#include <boost/version.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace json = boost::json;
using tgbench::contender;
using tgbench::target;
using tgbench::target_kind;
using tgbench::workload;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// --- options -----------------------------------------------------------------

struct options {
  bool quick = false;
  bool check = false;
  bool list = false;
  bool verbose = false;
  std::optional<std::string> json_file;
  std::optional<std::string> filter;
  std::optional<int> repetitions;
  std::optional<double> min_time;
};

void usage(std::ostream& out) {
  out << "usage: taskgroup_bench [options] [--benchmark_... flags]\n"
         "  --quick            fewer repetitions and a short minimum time (smoke test)\n"
         "  --filter REGEX     run only the workloads whose id matches (ECMAScript, search)\n"
         "  --json FILE        also write the results as JSON to FILE\n"
         "  --check            exit with status 1 when a target does not hold\n"
         "  --repetitions N    repetitions per contender (default 7, quick 3)\n"
         "  --min-time S       minimum seconds per repetition (default 0.5, quick 0.02)\n"
         "  --list             list workloads and contenders, run nothing\n"
         "  --verbose          also print Google Benchmark's own report to stderr\n";
}

std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&](std::string_view flag) -> std::optional<std::string> {
      if (i + 1 >= argc) {
        std::cerr << "taskgroup_bench: " << flag << " needs a value\n";
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--json") {
      if (!(o.json_file = value(a))) return std::nullopt;
    } else if (a == "--filter") {
      if (!(o.filter = value(a))) return std::nullopt;
    } else if (a == "--repetitions" || a == "--min-time") {
      auto v = value(a);
      if (!v) return std::nullopt;
      char* end = nullptr;
      const double d = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || !(d > 0)) {
        std::cerr << "taskgroup_bench: bad value for " << a << ": " << *v << "\n";
        return std::nullopt;
      }
      if (a == "--repetitions") {
        o.repetitions = static_cast<int>(d);
      } else {
        o.min_time = d;
      }
    } else {
      std::cerr << "taskgroup_bench: unknown argument " << a << "\n";
      usage(std::cerr);
      return std::nullopt;
    }
  }
  return o;
}

// --- collecting the medians --------------------------------------------------

struct sample {
  std::vector<double> reps_ns;  // per benchmark iteration, one per repetition
  double median_ns = nan;       // Google Benchmark's median aggregate
  double cpu_median_ns = nan;   // same, CPU time of the benchmark thread
  std::int64_t iterations = 0;  // benchmark iterations per repetition
  std::string error;
};

struct machine {
  int cpus = 0;
  double mhz = 0;
  std::vector<double> load_avg;
};

// Keeps every repetition and the median aggregate of each benchmark, keyed
// by its name ("workload/contender"); optionally forwards to Google
// Benchmark's console reporter.
class collector final : public benchmark::BenchmarkReporter {
 public:
  struct unit {
    double ns_per_unit;  // nanoseconds per benchmark iteration -> workload unit
    std::string name;
    std::string counter;  // when set, the figure is this user counter, not time
  };
  collector(bool verbose, std::map<std::string, unit> units) : units_(std::move(units)) {
    if (verbose) {
      console_.emplace(benchmark::ConsoleReporter::OO_Tabular);
      console_->SetOutputStream(&std::cerr);
      console_->SetErrorStream(&std::cerr);
    }
  }

  bool ReportContext(const Context& context) override {
    machine_.cpus = context.cpu_info.num_cpus;
    machine_.mhz = context.cpu_info.cycles_per_second / 1e6;
    machine_.load_avg = context.cpu_info.load_avg;
    if (console_) console_->ReportContext(context);
    return true;
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    if (console_) console_->ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string name = r.run_name.function_name;
      sample& s = samples_[name];
      if (r.error_occurred) {
        s.error = r.error_message;
        std::cerr << "  " << name << ": error: " << r.error_message << "\n";
        continue;
      }
      auto u = units_.find(name);
      const std::string counter = u == units_.end() ? std::string() : u->second.counter;
      auto value = [&]() -> double {
        if (counter.empty()) return r.GetAdjustedRealTime();
        auto c = r.counters.find(counter);
        return c == r.counters.end() ? nan : c->second.value;
      };
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") {
          s.median_ns = value();
          s.cpu_median_ns = counter.empty() ? r.GetAdjustedCPUTime() : nan;
          progress(name, s);
        }
      } else {
        s.reps_ns.push_back(value());
        s.iterations = r.iterations;
        if (r.repetitions <= 1) progress(name, s);  // no aggregate follows
      }
    }
  }

  void Finalize() override {
    if (console_) console_->Finalize();
  }

  [[nodiscard]] const std::map<std::string, sample>& samples() const noexcept { return samples_; }
  [[nodiscard]] const machine& machine_info() const noexcept { return machine_; }

 private:
  void progress(const std::string& name, const sample& s) const {
    const double ns = std::isnan(s.median_ns) ? s.reps_ns.back() : s.median_ns;
    auto it = units_.find(name);
    std::cerr << "  " << name << ": ";
    if (it != units_.end()) {
      std::cerr << ns / it->second.ns_per_unit << " " << it->second.name;
    } else {
      std::cerr << ns << " ns per benchmark iteration";
    }
    std::cerr << " (median of " << s.reps_ns.size() << " reps x " << s.iterations << " iterations)\n";
  }

  std::map<std::string, unit> units_;
  std::optional<benchmark::ConsoleReporter> console_;
  std::map<std::string, sample> samples_;
  machine machine_;
};

// --- results -----------------------------------------------------------------

struct figure {
  const contender* c = nullptr;
  double median = nan;      // in the workload's unit
  double cpu_median = nan;  // CPU time of the benchmark thread, same unit
  double min = nan;
  double max = nan;
  std::size_t reps = 0;
  std::int64_t iterations = 0;
  std::string error;
};

struct target_result {
  const target* t = nullptr;
  std::string text;
  double value = nan;
  bool holds = false;
};

struct workload_result {
  const workload* w = nullptr;
  std::vector<figure> figures;  // ours first, then the baselines
  std::vector<target_result> targets;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return nan;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

figure make_figure(const workload& w, const contender& c, const std::map<std::string, sample>& samples) {
  figure f;
  f.c = &c;
  auto it = samples.find(w.id + "/" + c.name);
  if (it == samples.end()) {
    f.error = "not run";
    return f;
  }
  const sample& s = it->second;
  f.error = s.error;
  if (!s.error.empty() || s.reps_ns.empty()) {
    if (f.error.empty()) f.error = "no result";
    return f;
  }
  const double scale = w.counter.empty() ? 1.0 / (c.units_per_iteration * w.unit_ns) : 1.0;
  f.median = (std::isnan(s.median_ns) ? median_of(s.reps_ns) : s.median_ns) * scale;
  f.cpu_median = s.cpu_median_ns * scale;
  f.min = *std::min_element(s.reps_ns.begin(), s.reps_ns.end()) * scale;
  f.max = *std::max_element(s.reps_ns.begin(), s.reps_ns.end()) * scale;
  f.reps = s.reps_ns.size();
  f.iterations = s.iterations;
  return f;
}

std::string fmt(double v) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  const double a = std::fabs(v);
  const int prec = a >= 1000 ? 0 : a >= 100 ? 1 : a >= 10 ? 2 : 3;
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string limit_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

target_result check_target(const workload& w, const target& t, const std::vector<figure>& figures) {
  target_result r;
  r.t = &t;
  const double ours = figures.front().median;
  double other = nan;
  for (const figure& f : figures) {
    if (f.c->name == t.baseline) other = f.median;
  }
  switch (t.kind) {
    case target_kind::max_value:
      r.text = "ours <= " + limit_text(t.limit) + " " + w.unit;
      r.value = ours;
      r.holds = r.value <= t.limit;
      break;
    case target_kind::min_value:
      r.text = "ours >= " + limit_text(t.limit) + " " + w.unit;
      r.value = ours;
      r.holds = r.value >= t.limit;
      break;
    case target_kind::max_difference:
      r.text = "ours - " + t.baseline + " <= " + limit_text(t.limit) + " " + w.unit;
      r.value = ours - other;
      r.holds = r.value <= t.limit;
      break;
    case target_kind::max_ratio:
      r.text = "ours / " + t.baseline + " <= " + limit_text(t.limit);
      r.value = ours / other;
      r.holds = r.value <= t.limit;
      break;
    case target_kind::min_inverse:
      r.text = t.baseline + " / ours >= " + limit_text(t.limit);
      r.value = other / ours;
      r.holds = r.value >= t.limit;
      break;
  }
  if (std::isnan(r.value)) r.holds = false;
  return r;
}

std::string_view kind_name(target_kind k) {
  switch (k) {
    case target_kind::max_value: return "max_value";
    case target_kind::min_value: return "min_value";
    case target_kind::max_difference: return "max_difference";
    case target_kind::max_ratio: return "max_ratio";
    case target_kind::min_inverse: return "min_inverse_ratio";
  }
  return "?";
}

std::string compiler() {
#if defined(__clang__)
  std::string s = std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  std::string s = std::string("g++ ") + __VERSION__;
#else
  std::string s = "unknown compiler";
#endif
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string build_kind() {
  std::string s;
#if defined(__OPTIMIZE__)
  s = "optimized";
#else
  s = "not optimized";
#endif
#if defined(NDEBUG)
  s += ", NDEBUG";
#else
  s += ", assertions on";
#endif
  return s;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void print_table(const std::vector<workload_result>& results) {
  for (const workload_result& r : results) {
    std::printf("\n[%s] %s\n", r.w->id.c_str(), r.w->title.c_str());
    std::printf("  %-14s %12s %12s %12s %12s\n", "contender", r.w->unit.c_str(), "min", "max", "ours/this");
    const double ours = r.figures.front().median;
    for (std::size_t i = 0; i < r.figures.size(); ++i) {
      const figure& f = r.figures[i];
      if (!f.error.empty()) {
        std::printf("  %-14s %s\n", f.c->name.c_str(), ("error: " + f.error).c_str());
        continue;
      }
      const std::string ratio = i == 0 ? "" : fmt(ours / f.median);
      std::printf("  %-14s %12s %12s %12s %12s\n", f.c->name.c_str(), fmt(f.median).c_str(), fmt(f.min).c_str(),
                  fmt(f.max).c_str(), ratio.c_str());
    }
    for (const target_result& t : r.targets) {
      std::printf("  target: %-36s got %-10s %s\n", t.text.c_str(), fmt(t.value).c_str(), t.holds ? "yes" : "NO");
    }
    if (r.targets.empty()) std::printf("  target: none (informational)\n");
  }
}

json::object to_json(const std::vector<workload_result>& results, const options& o, int reps, double min_time,
                     const machine& m) {
  json::object root;
  root["tool"] = "taskgroup_bench";
  root["mode"] = o.quick ? "quick" : "normal";
  root["repetitions"] = reps;
  root["min_time_s"] = min_time;
  root["statistic"] = "median of repetitions (real time)";
  json::object ctx;
  ctx["date"] = now_utc();
  ctx["compiler"] = compiler();
  ctx["build"] = build_kind();
  ctx["boost"] = BOOST_LIB_VERSION;
  ctx["tbb"] = TBB_VERSION_STRING;
  ctx["cpus"] = m.cpus;
  ctx["mhz"] = m.mhz;
  json::array load;
  for (double l : m.load_avg) load.push_back(l);
  ctx["load_avg"] = std::move(load);
  root["context"] = std::move(ctx);

  auto num = [](double v) -> json::value {
    if (std::isnan(v)) return nullptr;
    return v;
  };
  json::array workloads;
  for (const workload_result& r : results) {
    json::object w;
    w["id"] = r.w->id;
    w["title"] = r.w->title;
    w["unit"] = r.w->unit;
    w["figure"] = r.w->counter.empty() ? "real time per unit" : "counter " + r.w->counter;
    const double ours = r.figures.front().median;
    json::array contenders;
    for (std::size_t i = 0; i < r.figures.size(); ++i) {
      const figure& f = r.figures[i];
      json::object c;
      c["name"] = f.c->name;
      c["role"] = i == 0 ? "ours" : "baseline";
      c["what"] = f.c->what;
      c["median"] = num(f.median);
      c["min"] = num(f.min);
      c["max"] = num(f.max);
      c["cpu_median_main_thread"] = num(f.cpu_median);
      c["repetitions"] = f.reps;
      c["iterations_per_repetition"] = f.iterations;
      c["units_per_iteration"] = f.c->units_per_iteration;
      if (i > 0) c["ratio_ours_over_this"] = num(ours / f.median);
      if (!f.error.empty()) c["error"] = f.error;
      contenders.push_back(std::move(c));
    }
    w["contenders"] = std::move(contenders);
    json::array targets;
    bool all = true;
    for (const target_result& t : r.targets) {
      json::object jt;
      jt["text"] = t.text;
      jt["kind"] = kind_name(t.t->kind);
      if (!t.t->baseline.empty()) jt["baseline"] = t.t->baseline;
      jt["limit"] = t.t->limit;
      jt["value"] = num(t.value);
      jt["holds"] = t.holds;
      all = all && t.holds;
      targets.push_back(std::move(jt));
    }
    w["targets"] = std::move(targets);
    w["all_targets_hold"] = all;
    workloads.push_back(std::move(w));
  }
  root["workloads"] = std::move(workloads);
  return root;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == "--probe") {
    // A child started by tgbench::run_probe: print the probe's number.
    const tgbench::probe* p = tgbench::registry::get().find_probe(argv[2]);
    if (p == nullptr) {
      std::printf("no probe named %s\n", argv[2]);
      return 2;
    }
    const double v = p->fn();
    std::printf("%.17g\n", v);
    std::fflush(stdout);
    return std::isnan(v) ? 1 : 0;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      usage(std::cout);  // before Google Benchmark, which has its own --help
      return 0;
    }
  }
  // Every process measures as a multi-threaded one, whatever the filter:
  // until a process has started a thread, libstdc++ counts shared_ptr
  // references without atomic instructions, which made Asio's strand hop
  // (w8_empty_run's baseline) about 20% faster in a process that ran it
  // alone than after any workload that starts a thread. Servers and the
  // sessions' own pools always have threads.
  std::thread([] {}).join();
  benchmark::Initialize(&argc, argv);  // consumes --benchmark_* flags
  const auto parsed = parse(argc, argv);
  if (!parsed) return 2;
  const options& o = *parsed;

  // Workloads to run, in display order, each with its contenders (ours
  // first, then the baselines in the workload's order, then any others).
  std::optional<std::regex> filter;
  if (o.filter) {
    try {
      filter.emplace(*o.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "taskgroup_bench: bad --filter: " << e.what() << "\n";
      return 2;
    }
  }
  const auto& reg = tgbench::registry::get();
  std::vector<const workload*> selected;
  for (const workload& w : reg.workloads()) {
    if (!filter || std::regex_search(w.id, *filter)) selected.push_back(&w);
  }
  std::stable_sort(selected.begin(), selected.end(),
                   [](const workload* a, const workload* b) { return a->order < b->order; });
  if (selected.empty()) {
    std::cerr << "taskgroup_bench: no workload matches the filter\n";
    return 2;
  }
  std::map<const workload*, std::vector<const contender*>> plan;
  for (const workload* w : selected) {
    auto& list = plan[w];
    auto rank = [w](const contender& c) -> std::size_t {
      if (c.name == tgbench::ours) return 0;
      auto it = std::find(w->baselines.begin(), w->baselines.end(), c.name);
      return it == w->baselines.end() ? w->baselines.size() + 1
                                      : 1 + static_cast<std::size_t>(it - w->baselines.begin());
    };
    for (const contender& c : reg.contenders()) {
      if (c.workload == w->id) list.push_back(&c);
    }
    std::stable_sort(list.begin(), list.end(),
                     [&](const contender* a, const contender* b) { return rank(*a) < rank(*b); });
    if (list.empty() || list.front()->name != tgbench::ours) {
      std::cerr << "taskgroup_bench: workload " << w->id << " has no \"ours\" contender\n";
      return 2;
    }
  }

  if (o.list) {
    for (const workload* w : selected) {
      std::cout << w->id << ": " << w->title << " [" << w->unit << "]\n";
      for (const contender* c : plan[w]) std::cout << "  " << c->name << ": " << c->what << "\n";
    }
    return 0;
  }

  const int reps = o.repetitions.value_or(o.quick ? 3 : 7);
  const double min_time = o.min_time.value_or(o.quick ? 0.02 : 0.5);
  const double warmup = o.quick ? 0.0 : 0.1;
  std::map<std::string, collector::unit> units;
  for (const workload* w : selected) {
    // An alternated workload registers each contender once per repetition,
    // in turn: Google Benchmark runs them in registration order.
    const int rounds = w->alternate ? reps : 1;
    for (int round = 0; round < rounds; ++round) {
      for (const contender* c : plan[w]) {
        const std::string name = w->id + "/" + c->name;
        const bool by_counter = !w->counter.empty();
        units[name] = {by_counter ? 1.0 : c->units_per_iteration * w->unit_ns, w->unit, w->counter};
        auto* b = benchmark::RegisterBenchmark(name.c_str(), c->fn)
                      ->UseRealTime()
                      ->Unit(benchmark::kNanosecond)
                      ->Repetitions(w->alternate ? 1 : reps)
                      ->ReportAggregatesOnly(false);
        if (c->iterations > 0) {
          b->Iterations(c->iterations);
        } else {
          b->MinTime(min_time)->MinWarmUpTime(warmup);
        }
      }
    }
  }

  std::cerr << "taskgroup_bench: " << (o.quick ? "quick" : "normal") << " mode, " << reps
            << " repetitions x >= " << min_time << " s per contender (median reported)\n";
  collector coll(o.verbose, units);
  benchmark::RunSpecifiedBenchmarks(&coll);
  benchmark::Shutdown();

  std::vector<workload_result> results;
  bool all_hold = true;
  for (const workload* w : selected) {
    workload_result r;
    r.w = w;
    for (const contender* c : plan[w]) r.figures.push_back(make_figure(*w, *c, coll.samples()));
    for (const target& t : w->targets) {
      r.targets.push_back(check_target(*w, t, r.figures));
      all_hold = all_hold && r.targets.back().holds;
    }
    results.push_back(std::move(r));
  }

  const machine& m = coll.machine_info();
  std::string load;
  for (double l : m.load_avg) load += (load.empty() ? "" : " ") + fmt(l);
  std::printf(
      "taskgroup_bench: %s, %s; %d CPUs @ %.0f MHz, load average %s; %s mode: median of %d repetitions "
      "(>= %g s each)\n",
      compiler().c_str(), build_kind().c_str(), m.cpus, m.mhz, load.empty() ? "n/a" : load.c_str(),
      o.quick ? "quick" : "normal", reps, min_time);
  print_table(results);
  std::printf("\n");
  std::fflush(stdout);

  if (o.json_file) {
    std::ofstream out(*o.json_file);
    out << json::serialize(to_json(results, o, reps, min_time, m)) << "\n";
    if (!out) {
      std::cerr << "taskgroup_bench: cannot write " << *o.json_file << "\n";
      return 2;
    }
  }
  return (o.check && !all_hold) ? 1 : 0;
}
