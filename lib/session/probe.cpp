// run_probe: where a run's tasks stand while it runs, asked of each node
// on its strand.
#include "state.hpp"

#include "../detail/errors.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

namespace asio = boost::asio;

struct run_probe::state {
  std::mutex mutex;  // guards what follows
  // Nothing that outlives the run: the probe may outlive its session's
  // executor.
  std::weak_ptr<detail::run_state> run;
};

run_probe::run_probe() : state_(std::make_shared<state>()) {}
run_probe::~run_probe() = default;

namespace detail {

status probe_access::attach(run_probe& p, const std::shared_ptr<run_state>& rs) {
  std::lock_guard lock(p.state_->mutex);
  if (!p.state_->run.expired()) {
    return fail(errc::invalid_task, "run_options::probe already follows another run in flight");
  }
  p.state_->run = rs;
  return ok();
}

void probe_access::detach(run_probe& p, const run_state& rs) {
  std::lock_guard lock(p.state_->mutex);
  if (p.state_->run.lock().get() == &rs) p.state_->run.reset();
}

void describe_node(const run_state& rs, std::size_t i, std::vector<std::pair<std::size_t, std::string>>& out) {
  const node_watch& w = rs.watch[i];
  const std::size_t first = out.size();
  for (const wait_site& s : w.sites) out.emplace_back(s.task, where(s, &w.feeders));
  if (w.waiting != nullptr) {
    for (const auto& r : *w.waiting) {
      if (std::string at = r->where(); !at.empty()) out.emplace_back(r->task, std::move(at));
    }
  }
  // This node's waits, [first, listed_end), by task: looked up below.
  auto by_task = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_task);
  const std::size_t listed_end = out.size();
  // The node's other tasks that have begun and not ended: between two
  // ops (a yield), or in a wait of their steps' own (a step deadline,
  // concurrent substeps, report steps).
  for (std::size_t k : rs.group->nodes[i].tasks) {
    const task_record& r = rs.records[k];
    if (r.started == std::chrono::system_clock::time_point{} || r.finished != std::chrono::system_clock::time_point{})
      continue;
    const auto begin = out.begin() + static_cast<std::ptrdiff_t>(first);
    const auto end = out.begin() + static_cast<std::ptrdiff_t>(listed_end);
    if (!std::binary_search(begin, end, std::pair<std::size_t, std::string>(k, {}), by_task))
      out.emplace_back(k, std::string(root_name(rs.group->step(k))) + ": running, not waiting on an op");
  }
}

namespace {

using lines = std::vector<std::pair<std::size_t, std::string>>;

asio::awaitable<void> describe_on(const run_state* rs, std::size_t i, lines* out) {
  describe_node(*rs, i, *out);
  co_return;
}

// Node after node, each on its strand (the run holds `rs` as long).
asio::awaitable<std::vector<std::string>> where_tasks(std::shared_ptr<run_state> rs) {
  lines found;
  for (std::size_t i = 0; i < rs->nodes.size(); ++i) {
    if (rs->nodes[i] == nullptr) continue;  // not in this run
    auto visit = describe_on(rs.get(), i, &found);
    co_await asio::co_spawn(rs->nodes[i]->executor, std::move(visit), asio::use_awaitable);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& [k, at] : found) out.push_back(task_error(rs->group->tasks[k], error(errc::cancelled, at)).message);
  co_return out;
}

}  // namespace

}  // namespace detail

namespace {

// Calls `h` with `found` on its associated executor (`fallback` when it
// has none); never from inside the initiating call.
template <class Executor>
void complete(asio::any_completion_handler<void(std::vector<std::string>)> h, std::vector<std::string> found,
              const Executor& fallback) {
  auto ex = asio::get_associated_executor(h, fallback);
  ex.execute([h = std::move(h), found = std::move(found)]() mutable { std::move(h)(std::move(found)); });
}

}  // namespace

void run_probe::start_where(const std::shared_ptr<state>& s,
                            asio::any_completion_handler<void(std::vector<std::string>)> handler) {
  std::shared_ptr<detail::run_state> rs;
  {
    std::lock_guard lock(s->mutex);
    rs = s->run.lock();
  }
  if (!rs) {
    // Not inside the initiating call: through another thread first.
    asio::post(asio::system_executor(),
               [h = std::move(handler)]() mutable { complete(std::move(h), {}, asio::system_executor()); });
    return;
  }
  const asio::any_io_executor coord = rs->coord;
  asio::co_spawn(coord, detail::where_tasks(std::move(rs)),
                 [h = std::move(handler), coord](std::exception_ptr e, std::vector<std::string> found) mutable {
                   if (e) found = {detail::error_from_exception(e).message};
                   complete(std::move(h), std::move(found), coord);
                 });
}

}  // namespace taskgroup
