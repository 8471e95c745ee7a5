// A run's data in and out: feeds checked and placed, outputs fetched into
// the run's own report, the output handles filled from it.
#include "session/node_run.hpp"
#include "session/run.hpp"

#include <taskgroup/codec.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <typeindex>

namespace taskgroup::detail {

namespace {

std::string feed_name(std::string_view node, std::string_view blob) {
  return quote(std::string(node) + "/" + std::string(blob));
}

// The one check of a run's feeds (taskgroup::check_feeds). `node_of(name)`
// is the index of node `name` when a task of the group is on it;
// `runs(i)` whether node #i runs (its required inputs must be fed);
// `placed(i, f)` is told each feed once checked, with its node's index.
template <class NodeOf, class Runs, class Placed>
status check_feeds_with(const task_group& g, const feeds& given, NodeOf node_of, Runs runs, Placed placed) {
  std::map<std::pair<std::string_view, std::string_view>, const group_input*> declared;
  for (const auto& in : g.inputs())
    declared.emplace(std::pair<std::string_view, std::string_view>(in.node, in.blob), &in);
  std::set<const group_input*> fed;
  for (const auto& f : given.entries()) {
    const std::string name = feed_name(f.node, f.blob);
    auto it = declared.find({f.node, f.blob});
    if (it == declared.end()) {
      std::string known;
      for (const auto& in : g.inputs()) {
        if (in.node == f.node) known += (known.empty() ? "" : ", ") + quote(in.blob);
      }
      return fail(errc::invalid_feed, "feed " + name + ": the group declares no such input" +
                                          (known.empty() ? " (none on node " + quote(f.node) + ")"
                                                         : " (on node " + quote(f.node) + ": " + known + ")"));
    }
    const group_input& in = *it->second;
    if (!fed.insert(&in).second) return fail(errc::invalid_feed, "feed " + name + ": fed twice");
    if (f.value == nullptr || !f.value->has_value()) return fail(errc::invalid_feed, "feed " + name + ": no value");
    if (!f.value->copyable()) {
      return fail(errc::invalid_feed, "feed " + name + ": a " + f.value->type_name() +
                                          " cannot be copied into the run (its type is move-only)");
    }
    if (in.type != nullptr && !same_type(f.value->type(), *in.type)) {
      return fail(errc::invalid_feed, "feed " + name + ": expected " + in.type_name + ", got " + f.value->type_name());
    }
    const std::optional<std::size_t> n = node_of(in.node);
    if (!n) return fail(errc::invalid_feed, "feed " + name + ": node " + quote(in.node) + " has no task in the group");
    placed(*n, f);
  }
  for (const auto& in : g.inputs()) {
    if (!in.required || fed.count(&in) != 0) continue;
    // A node that does not run (run_options::only_nodes) needs no feed.
    if (const std::optional<std::size_t> n = node_of(in.node); n && !runs(*n)) continue;
    return fail(errc::invalid_feed, "input " + feed_name(in.node, in.blob) + " is required and was not fed" +
                                        (in.type != nullptr ? " (" + in.type_name + ")" : ""));
  }
  return ok();
}

}  // namespace

status check_feeds(const task_group& g, const feeds& given, run_state& rs) {
  // Most runs have neither: no maps to build.
  if (g.inputs().empty() && given.entries().empty()) return ok();
  const compiled_group& cg = *rs.group;
  std::map<std::string_view, std::size_t> node_index;
  for (std::size_t i = 0; i < cg.nodes.size(); ++i) node_index.emplace(cg.nodes[i].name, i);
  return check_feeds_with(
      g, given,
      [&](std::string_view node) -> std::optional<std::size_t> {
        auto n = node_index.find(node);
        return n == node_index.end() ? std::nullopt : std::optional<std::size_t>(n->second);
      },
      [&](std::size_t i) { return std::find(rs.active.begin(), rs.active.end(), i) != rs.active.end(); },
      [&](std::size_t i, const feeds::entry& f) { rs.nodes[i].fed.push_back(&f); });
}

status node_run::place_feeds() {
  if (fed.empty()) return ok();
  if (compiled->global) displaced_.reserve(fed.size());
  for (const feeds::entry* f : fed) {
    auto copy = f->value->clone();
    if (!copy) return copy.error().with_context("feed " + feed_name(f->node, f->blob));
    blob& b = ws->create_local(f->blob);
    if (compiled->global) displaced_.push_back(displaced_feed{&f->blob, std::move(b)});
    b = std::move(copy).value();
  }
  return ok();
}

void node_run::restore_feeds() noexcept {
  if (displaced_.empty()) return;
  // The blob stays (emptied, or holding what the feed displaced): the
  // node's nets, which outlive the run in its workspace, are bound to it.
  for (displaced_feed& d : displaced_) {
    if (blob* b = ws->find(*d.name)) *b = std::move(d.value);
  }
  displaced_.clear();
}

// Copies the declared outputs of the node's tasks out of the run's
// workspace; a borrowed output (output_state::borrow) is the workspace's
// blob itself when no exit work of the node runs after this.
void node_run::fetch_outputs(const run_state& rs) {
  for (std::size_t j = 0; j < compiled->tasks.size(); ++j) {
    const std::size_t k = compiled->tasks[j];
    const compiled_task& ct = rs.group->tasks[k];
    if (!ct.has_outputs || rs.records[k].status != task_status::succeeded) continue;
    for (const auto& out : task_access::outputs(ct.t)) {
      const bool borrow = out->borrow && !compiled->exit;
      for (const auto& name : out->blobs) {
        if (outputs.empty()) outputs.resize(compiled->tasks.size());
        blob* b = ws->find(name);
        if (b == nullptr || !b->has_value()) {
          outputs[j].errors.emplace_back(
              name,
              error(errc::output_not_set, "blob " + quote(name) + " has no value in node " + quote(compiled->name)));
          continue;
        }
        if (borrow) {
          outputs[j].values.emplace_back(name, std::shared_ptr<const blob>(ws, b));  // keeps the workspace alive
          continue;
        }
        auto copy = b->clone();
        if (!copy) {
          outputs[j].errors.emplace_back(name, copy.error());
          continue;
        }
        outputs[j].values.emplace_back(name, std::make_shared<const blob>(std::move(copy).value()));
      }
    }
  }
}

status round_trip_outputs(run_state& rs, const codec_registry& codecs) {
  status first = ok();
  for (std::size_t i : rs.active) {
    node_run& n = rs.nodes[i];
    if (n.outputs.empty()) continue;
    for (std::size_t j = 0; j < n.compiled->tasks.size(); ++j) {
      const compiled_task& ct = rs.group->tasks[n.compiled->tasks[j]];
      task_record& rec = rs.records[n.compiled->tasks[j]];
      if (rec.status != task_status::succeeded) continue;
      for (auto& [name, value] : n.outputs[j].values) {
        auto copy = codecs.round_trip(*value);
        if (!copy) {
          const error failure = task_error(ct, copy.error().with_context("output " + quote(name)));
          rec.status = task_status::failed;
          rec.failure = std::make_unique<error>(failure);
          n.outputs[j] = {};
          if (first) first = failure;
          break;
        }
        value = std::make_shared<const blob>(std::move(copy).value());
      }
    }
  }
  return first;
}

void publish_outputs(const compiled_group& cg, const run_report& report, std::span<const std::size_t> active) {
  std::unique_lock<std::mutex> lock;
  for (std::size_t i : active) {
    for (std::size_t k : cg.nodes[i].tasks) {
      if (!cg.tasks[k].has_outputs) continue;
      // Taken at the first output only: most groups' runs take no lock.
      if (!lock.owns_lock()) lock = std::unique_lock(cg.publishing);
      for (const auto& out : task_access::outputs(cg.tasks[k].t)) set_output(*out, report.tasks[k]);
    }
  }
}

}  // namespace taskgroup::detail

namespace taskgroup {

status check_feeds(const task_group& group, const feeds& given) {
  if (group.inputs().empty() && given.entries().empty()) return ok();
  // The group's nodes are those of its tasks (as the compiled group's).
  return detail::check_feeds_with(
      group, given,
      [&](std::string_view node) -> std::optional<std::size_t> {
        const auto& tasks = group.tasks();
        auto t = std::find_if(tasks.begin(), tasks.end(), [&](const task& x) { return x.node_name() == node; });
        // Any index: every node counts as running, and nothing is placed.
        return t == tasks.end() ? std::nullopt : std::optional<std::size_t>(0);
      },
      [](std::size_t) { return true; }, [](std::size_t, const feeds::entry&) {});
}

}  // namespace taskgroup
