// taskgroup: the description of a group that the ranks of an MPI session
// compare before a run.
#include "mpi/fingerprint.hpp"

#include <taskgroup/control.hpp>

#include <algorithm>
#include <charconv>
#include <system_error>
#include <utility>

namespace taskgroup::detail::mpi {

namespace {

// A retry policy, every field exactly (ranks must agree on each).
std::string policy_text(const retry_policy& p) {
  char multiplier[32];
  const auto [end, ec] = std::to_chars(multiplier, multiplier + sizeof multiplier, p.multiplier);
  std::string out = "retry: max_attempts " + std::to_string(p.max_attempts) + ", initial_backoff " +
                    std::to_string(p.initial_backoff.count()) + " ms, multiplier " +
                    std::string(multiplier, ec == std::errc() ? end : multiplier) + ", max_backoff " +
                    std::to_string(p.max_backoff.count()) + " ms, " + (p.jitter ? "jitter" : "no jitter") +
                    ", retry_on [";
  for (std::size_t i = 0; i < p.retry_on.size(); ++i) out += (i ? ", " : "") + std::string(name_of(p.retry_on[i]));
  return out + "]";
}

// A line, `owner` + where + the step's path + its policy, for each step.
void step_policies(const std::vector<retried_step>& steps, const std::string& owner, std::vector<std::string>& lines) {
  for (const retried_step& r : steps) {
    lines.push_back(owner + r.where + "step " + quote(r.path) + " " + policy_text(r.step.retry()));
  }
}

// The retry policies of task `t` and of its steps, those that retry.
void task_policies(const task& t, std::vector<std::string>& lines) {
  const std::string owner = "task " + quote(t.name()) + " ";
  if (t.retry().retries()) lines.push_back(owner + policy_text(t.retry()));
  step_policies(t.retried_steps(), owner, lines);
}

// The group as every rank must see it, one line per fact.
std::vector<std::string> describe(const task_group& g, const std::map<std::string, int>& where, int size) {
  std::vector<std::string> lines;
  lines.push_back("ranks " + std::to_string(size));
  // Each rank labels its metrics with it.
  if (!g.name().empty()) lines.push_back("name " + quote(g.name()));
  for (const auto& n : g.used_nodes()) lines.push_back("node " + quote(n) + " on rank " + std::to_string(where.at(n)));
  for (const auto& t : g.tasks()) {
    std::string line = "task " + quote(t.name()) + " on node " + quote(t.node_name()) + ", outputs [";
    bool first = true;
    for (const auto& out : t.declared_outputs()) {
      for (const auto& b : out.blobs) {
        line += (first ? "" : ", ") + quote(b);
        first = false;
      }
      if (out.type != nullptr) line += ": " + detail::demangle(out.type->name());
    }
    lines.push_back(line + "]");
    task_policies(t, lines);
  }
  for (const auto& r : g.report_steps()) {
    step_policies(retried_steps(r.step), "node " + quote(r.node) + " report ", lines);
  }
  for (const auto& [n, obj] : g.local_setups()) {
    step_policies(retried_steps(obj->setup()), "node " + quote(n) + " local init ", lines);
    step_policies(retried_steps(obj->exit()), "node " + quote(n) + " local exit ", lines);
  }
  for (const auto& r : g.remote_nets()) {
    lines.push_back("remote net " + quote(r.net.name()) + " on node " + quote(r.node) + ", " +
                    std::to_string(r.net.size()) + " ops");
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    out.emplace_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return out;
}

error group_mismatch(int rank, const std::vector<std::string>& client, const std::vector<std::string>& mine) {
  const std::size_t n = std::max(client.size(), mine.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = i < client.size() ? client[i] : "(nothing)";
    const std::string b = i < mine.size() ? mine[i] : "(nothing)";
    if (a != b) {
      return {errc::group_mismatch,
              "built a different group: rank 0 has " + a + ", rank " + std::to_string(rank) + " has " + b};
    }
  }
  return {errc::group_mismatch, "built a different group"};
}

result<std::shared_ptr<const group_description>> describe_group(session_state& s, const task_group& g) {
  if (s.described && s.described->group == detail::group_access::identity(g).get() && !s.described->alive.expired())
    return s.described;
  TASKGROUP_TRY(auto where, s.place(g));
  auto d = std::make_shared<group_description>();
  d->alive = detail::group_access::identity(g);
  d->group = d->alive.lock().get();
  d->lines = describe(g, where, s.size);
  d->text = join_lines(d->lines);
  d->where = std::move(where);
  if (g.used()) s.described = d;
  return std::shared_ptr<const group_description>(std::move(d));
}

}  // namespace taskgroup::detail::mpi
