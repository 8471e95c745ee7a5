// session_metrics: its queries, and its renderings in Prometheus' text
// format and in JSON.
#include <taskgroup/session_metrics.hpp>

#include <boost/json.hpp>

#include <cstdio>
#include <string>

namespace taskgroup {

std::string_view to_string(run_outcome o) noexcept {
  switch (o) {
    case run_outcome::succeeded: return "succeeded";
    case run_outcome::failed: return "failed";
    case run_outcome::cancelled: return "cancelled";
    case run_outcome::timed_out: return "timed_out";
    case run_outcome::overloaded: return "overloaded";
  }
  return "failed";
}

run_outcome outcome_of(const run_report& report) noexcept {
  if (!report.failure) return run_outcome::succeeded;
  const boost::system::error_code& ec = report.failure->code;
  if (ec == errc::cancelled) return run_outcome::cancelled;
  if (ec == errc::timeout) return run_outcome::timed_out;
  if (ec == errc::overloaded) return run_outcome::overloaded;
  return run_outcome::failed;
}

std::uint64_t group_metrics::runs_ended() const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t r : runs) n += r;
  return n;
}

const group_metrics* session_metrics::find(std::string_view label) const noexcept {
  for (const group_metrics& g : groups) {
    if (g.group == label) return &g;
  }
  return nullptr;
}

group_metrics session_metrics::total() const {
  group_metrics all;
  for (const group_metrics& g : groups) {
    for (std::size_t i = 0; i < all.runs.size(); ++i) all.runs[i] += g.runs[i];
    for (std::size_t i = 0; i < all.tasks.size(); ++i) all.tasks[i] += g.tasks[i];
    all.attempts_retried += g.attempts_retried;
    all.offloaded_ops += g.offloaded_ops;
    all.run_latency += g.run_latency;
    all.queue_wait += g.queue_wait;
    all.task_duration += g.task_duration;
    all.offload_wait += g.offload_wait;
  }
  return all;
}

namespace {

// The task outcomes' label values, by task_status.
constexpr std::string_view task_outcome[task_status_count] = {"succeeded", "failed", "cancelled", "not_run"};

// `ns` nanoseconds (never negative: durations are counted from 0) as
// seconds, in exact decimal ("0.000001", "67.108864").
std::string seconds(std::int64_t ns) {
  const std::uint64_t v = ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
  std::string out = std::to_string(v / 1'000'000'000);
  if (const std::uint64_t frac = v % 1'000'000'000; frac != 0) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%09llu", static_cast<unsigned long long>(frac));
    std::string f(digits);
    f.erase(f.find_last_not_of('0') + 1);
    out += '.';
    out += f;
  }
  return out;
}

// Bucket i's `le` value.
std::string bound(std::size_t i) {
  if (i + 1 >= duration_histogram::bucket_count) return "+Inf";
  return seconds(duration_histogram::upper_bound(i).count());
}

// A label value in the text format: backslash, double quote and line
// feed escaped.
std::string escaped(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

// Writes the samples of one session_metrics.
class exposition {
 public:
  explicit exposition(const session_metrics& m) : m_(m) {
    if (m.rank) rank_ = "rank=\"" + std::to_string(*m.rank) + "\"";
  }

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP taskgroup_";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE taskgroup_";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // One sample: `labels` are written as given ("a=\"x\"", comma-joined).
  void sample(std::string_view name, std::string_view labels, const std::string& value) {
    out_ += "taskgroup_";
    out_ += name;
    std::string all(labels);
    if (!rank_.empty()) all += (all.empty() ? "" : ",") + rank_;
    if (!all.empty()) {
      out_ += '{';
      out_ += all;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }

  void histogram(std::string_view name, std::string_view help, duration_histogram group_metrics::*which) {
    const std::string full = std::string(name) + "_seconds";
    header(full, "histogram", help);
    for (const group_metrics& g : m_.groups) {
      const duration_histogram& h = g.*which;
      const std::string group = "group=\"" + escaped(g.group) + "\"";
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < duration_histogram::bucket_count; ++i) {
        cumulative += h.counts[i];
        sample(full + "_bucket", group + ",le=\"" + bound(i) + "\"", std::to_string(cumulative));
      }
      sample(full + "_sum", group, seconds(h.sum.count()));
      sample(full + "_count", group, std::to_string(cumulative));
    }
  }

  std::string take() { return std::move(out_); }

 private:
  const session_metrics& m_;
  std::string rank_;
  std::string out_;
};

}  // namespace

std::string to_prometheus(const session_metrics& m) {
  exposition x(m);
  x.header("runs_total", "counter", "Runs ended, by group label and outcome.");
  for (const group_metrics& g : m.groups) {
    for (std::size_t o = 0; o < run_outcome_count; ++o) {
      x.sample(
          "runs_total",
          "group=\"" + escaped(g.group) + "\",outcome=\"" + std::string(to_string(static_cast<run_outcome>(o))) + "\"",
          std::to_string(g.runs[o]));
    }
  }
  x.header("tasks_total", "counter", "Tasks of the runs ended, by group label and outcome.");
  for (const group_metrics& g : m.groups) {
    for (std::size_t s = 0; s < task_status_count; ++s) {
      x.sample("tasks_total", "group=\"" + escaped(g.group) + "\",outcome=\"" + std::string(task_outcome[s]) + "\"",
               std::to_string(g.tasks[s]));
    }
  }
  x.header("attempts_retried_total", "counter", "Attempts of tasks and steps that ran again after a failed one.");
  for (const group_metrics& g : m.groups) {
    x.sample("attempts_retried_total", "group=\"" + escaped(g.group) + "\"", std::to_string(g.attempts_retried));
  }
  x.header("offloaded_ops_total", "counter", "Ops that ran offloaded on the compute executor.");
  for (const group_metrics& g : m.groups) {
    x.sample("offloaded_ops_total", "group=\"" + escaped(g.group) + "\"", std::to_string(g.offloaded_ops));
  }
  x.header("runs_in_flight", "gauge", "Runs admitted and not ended.");
  x.sample("runs_in_flight", "", std::to_string(m.runs_in_flight));
  x.header("runs_queued", "gauge", "Runs waiting for admission.");
  x.sample("runs_queued", "", std::to_string(m.runs_queued));
  x.histogram("run_latency", "Admitted runs, from their arrival to their completion.", &group_metrics::run_latency);
  x.histogram("queue_wait", "Admitted runs' wait for admission.", &group_metrics::queue_wait);
  x.histogram("task_duration", "Tasks that began, from their start to their end.", &group_metrics::task_duration);
  x.histogram("offload_wait", "Offloaded ops, from their hand-off to the start of their kernel.",
              &group_metrics::offload_wait);
  return x.take();
}

namespace {

boost::json::object histogram_json(const duration_histogram& h) {
  boost::json::array buckets;
  for (std::size_t i = 0; i < duration_histogram::bucket_count; ++i) {
    boost::json::object b;
    if (i + 1 < duration_histogram::bucket_count) {
      b["le_seconds"] = static_cast<double>(duration_histogram::upper_bound(i).count()) / 1e9;
    } else {
      b["le_seconds"] = "+Inf";
    }
    b["count"] = h.counts[i];
    buckets.push_back(std::move(b));
  }
  boost::json::object o;
  o["count"] = h.count();
  o["sum_seconds"] = static_cast<double>(h.sum.count()) / 1e9;
  o["buckets"] = std::move(buckets);
  return o;
}

}  // namespace

std::string to_json(const session_metrics& m) {
  boost::json::object root;
  root["enabled"] = m.enabled;
  root["runs_in_flight"] = m.runs_in_flight;
  root["runs_queued"] = m.runs_queued;
  if (m.rank) root["rank"] = *m.rank;
  boost::json::array groups;
  for (const group_metrics& g : m.groups) {
    boost::json::object o;
    o["group"] = g.group;
    boost::json::object runs;
    for (std::size_t i = 0; i < run_outcome_count; ++i) runs[to_string(static_cast<run_outcome>(i))] = g.runs[i];
    o["runs"] = std::move(runs);
    boost::json::object tasks;
    for (std::size_t i = 0; i < task_status_count; ++i) tasks[task_outcome[i]] = g.tasks[i];
    o["tasks"] = std::move(tasks);
    o["attempts_retried"] = g.attempts_retried;
    o["offloaded_ops"] = g.offloaded_ops;
    o["run_latency"] = histogram_json(g.run_latency);
    o["queue_wait"] = histogram_json(g.queue_wait);
    o["task_duration"] = histogram_json(g.task_duration);
    o["offload_wait"] = histogram_json(g.offload_wait);
    groups.push_back(std::move(o));
  }
  root["groups"] = std::move(groups);
  return boost::json::serialize(root);
}

}  // namespace taskgroup
