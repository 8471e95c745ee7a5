#include "model/compare.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

namespace taskgroup::model {

value value_of(const blob* b) {
  if (b == nullptr || !b->has_value()) return {};
  if (const auto* i = b->try_get<std::int64_t>()) return {value::type::i64, *i, false};
  if (const auto* v = b->try_get<bool>()) return {value::type::boolean, 0, *v};
  return {value::type::other, 0, false};
}

std::string normalized(std::string m) {
  static const std::regex left("wait cancelled [0-9]+ ms");
  if (m.find("wait cancelled") == std::string::npos) return m;
  return std::regex_replace(m, left, "wait cancelled # ms");
}

namespace {

using event_list = std::vector<const event*>;

std::string first_difference(const event_list& want, const event_list& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && *want[i] == *got[i]) ++i;
  std::ostringstream o;
  o << "at event #" << i << ": model " << (i < want.size() ? want[i]->str() : "(end)") << ", library "
    << (i < got.size() ? got[i]->str() : "(end)") << " (" << want.size() << " vs " << got.size() << " events)";
  return o.str();
}

bool same_events(const event_list& a, const event_list& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const event* x, const event* y) { return *x == *y; });
}

std::string status_text(bool ok, const std::string& error) { return ok ? "succeeded" : "failed: " + error; }

std::optional<failure> compare_task(const task_outcome& want, const task_report& got) {
  const std::string error = got.failure ? normalized(got.failure->message) : std::string();
  if (want.status != got.status || want.iterations != got.iterations || want.error != error) {
    return failure{"task", "task " + want.name + ": model " + std::string(to_string(want.status)) + ", iterations " +
                               std::to_string(want.iterations) + (want.error.empty() ? "" : ", " + want.error) +
                               "; library " + std::string(to_string(got.status)) + ", iterations " +
                               std::to_string(got.iterations) + (error.empty() ? "" : ", " + error)};
  }
  std::vector<std::pair<std::string, value>> outs;
  for (const auto& [name, v] : got.outputs) outs.emplace_back(name, value_of(v.get()));
  if (outs == want.outputs) return std::nullopt;
  std::string d = "task " + want.name + " outputs:";
  for (std::size_t i = 0; i < want.outputs.size(); ++i) {
    d += " " + want.outputs[i].first + " model " + want.outputs[i].second.str() + " library " +
         (i < outs.size() ? outs[i].second.str() : "(missing)");
  }
  if (outs.size() > want.outputs.size()) d += " and " + std::to_string(outs.size() - want.outputs.size()) + " more";
  return failure{"output", d};
}

std::optional<failure> compare_blobs(const std::string& node, const std::map<std::string, value>& want,
                                     const std::map<std::string, value>& got) {
  if (got == want) return std::nullopt;
  std::string d = "node " + node + " blobs:";
  for (const auto& [name, v] : want) {
    auto it = got.find(name);
    if (it == got.end() || !(it->second == v)) {
      d += " " + name + " model " + v.str() + " library " + (it == got.end() ? "(absent)" : it->second.str());
    }
  }
  for (const auto& [name, v] : got) {
    if (!want.count(name)) d += " " + name + " model (absent) library " + v.str();
  }
  return failure{"blobs", d};
}

}  // namespace

// Per task (and per node for its own work), in order, or as multisets where
// the model ran concurrent parts. Pointers, so sorting moves no strings.
std::optional<std::string> compare_events(const run_outcome& m, const std::vector<event>& got) {
  std::map<std::string, event_list> want_by, got_by;
  for (const auto& e : m.events) want_by[e.node + "|" + e.task].push_back(&e);
  for (const auto& e : got) got_by[e.node + "|" + e.task].push_back(&e);
  auto less = [](const event* x, const event* y) { return *x < *y; };
  for (auto& [key, want] : want_by) {
    auto& have = got_by[key];
    const bool unordered = m.unordered.count(key) != 0;
    if (unordered) {
      std::sort(want.begin(), want.end(), less);
      std::sort(have.begin(), have.end(), less);
    }
    if (!same_events(want, have)) {
      return "events of " + key + (unordered ? " (as a multiset)" : " (in order)") + " " + first_difference(want, have);
    }
  }
  for (const auto& [key, have] : got_by) {
    if (!want_by.count(key) && !have.empty()) return "unexpected events for " + key + ": " + have.front()->str();
  }
  return std::nullopt;
}

std::optional<failure> compare_run(const run_outcome& m, const run_report& r, local_session& s,
                                   const node_blobs& model_blobs, const std::vector<std::string>& nodes) {
  const std::string error = r.failure ? normalized(r.failure->message) : std::string();
  if (m.ok != !r.failure) {
    return failure{"status", "model " + status_text(m.ok, m.error) + ", library " + status_text(!r.failure, error)};
  }
  if (!m.ok && (r.failure->code != make_error_code(m.code) || error != m.error)) {
    return failure{"error", "model " + m.error + " (" + make_error_code(m.code).message() + "), library " + error +
                                " (" + r.failure->code.message() + ")"};
  }
  for (std::size_t k = 0; k < m.tasks.size(); ++k) {
    if (auto f = compare_task(m.tasks[k], r.tasks.at(k))) return f;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto ws = s.node_workspace(nodes[i]);
    std::map<std::string, value> got;
    for (const auto& name : ws->local_blobs()) got[name] = value_of(ws->find(name));
    if (auto f = compare_blobs(nodes[i], model_blobs[i], got)) return f;
  }
  return std::nullopt;
}

}  // namespace taskgroup::model
