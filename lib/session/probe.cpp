// run_probe: where a run's tasks stand while it runs, asked of each node
// on its strand.
#include "session/answer_wait.hpp"
#include "session/node_tasks.hpp"
#include "session/run.hpp"

#include "detail/errors.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <exception>
#include <iterator>
#include <mutex>
#include <optional>
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
  const node_watch& w = rs.nodes[i].watch;
  const std::size_t first = out.size();
  for (const wait_site& s : w.sites) out.emplace_back(s.task, where(s, &w.feeders));
  if (w.waiting != nullptr) {
    for (const auto& r : *w.waiting) {
      if (std::string at = r->where(); !at.empty()) out.emplace_back(r->task, std::move(at));
    }
  }
  if (w.tasks != nullptr) w.tasks->describe_retries(out);
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

// What the nodes answered, on the coordinator.
struct asking {
  asking(const asio::any_io_executor& coord, std::size_t nodes) : wait(coord), answers(nodes) {}
  answer_wait wait;
  std::vector<std::optional<lines>> answers;
};

}  // namespace

// A late answer still lands in `ask` (the visit holds it and the run's
// state), unread.
asio::awaitable<std::vector<std::string>> where_tasks(std::shared_ptr<run_state> rs) {
  const asio::any_io_executor coord = co_await asio::this_coro::executor;
  const std::size_t nodes = rs->group->nodes.size();
  auto ask = std::make_shared<asking>(coord, nodes);
  for (std::size_t i = 0; i < nodes; ++i) {
    if (rs->nodes[i].node == nullptr) continue;  // not in this run
    ask->wait.expect();
    asio::post(rs->nodes[i].node->executor, [rs, ask, i, coord] {
      lines found;
      describe_node(*rs, i, found);
      asio::post(coord, [ask, i, found = std::move(found)]() mutable {
        ask->answers[i] = std::move(found);
        ask->wait.answered();
      });
    });
  }
  co_await ask->wait.wait(std::chrono::steady_clock::now() + run_probe::answer_within);
  lines found;
  std::vector<std::string> silent;
  for (std::size_t i = 0; i < nodes; ++i) {
    if (rs->nodes[i].node == nullptr) continue;
    if (ask->answers[i]) {
      found.insert(found.end(), std::make_move_iterator(ask->answers[i]->begin()),
                   std::make_move_iterator(ask->answers[i]->end()));
    } else {
      silent.push_back("node " + quote(rs->group->nodes[i].name) + ": did not answer within " +
                       std::to_string(run_probe::answer_within.count()) +
                       " ms: a task there holds the node's thread (an op that blocks, or a long computation "
                       "between two yields)");
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(found.size() + silent.size());
  for (auto& [k, at] : found) out.push_back(task_error(rs->group->tasks[k], error(errc::cancelled, at)).message);
  out.insert(out.end(), std::make_move_iterator(silent.begin()), std::make_move_iterator(silent.end()));
  co_return out;
}

}  // namespace detail

namespace {

using where_handler = asio::any_completion_handler<void(boost::system::error_code, std::vector<std::string>)>;

// The handler's associated executor (`fallback` when it has none), with
// work counted on it from the start until the handler has run: its
// io_context does not run out of work while the nodes are asked.
template <class Executor>
auto tracked_executor(const where_handler& h, const Executor& fallback) {
  return asio::prefer(asio::get_associated_executor(h, fallback), asio::execution::outstanding_work.tracked);
}

// Calls `h` with `found` on `ex` (tracked_executor); never from inside
// the initiating call.
template <class Executor>
void complete(where_handler h, std::vector<std::string> found, const Executor& ex) {
  ex.execute([h = std::move(h), found = std::move(found)]() mutable {
    std::move(h)(boost::system::error_code(), std::move(found));
  });
}

}  // namespace

std::string run_probe::trace_id() const {
  std::shared_ptr<detail::run_state> rs;
  {
    std::lock_guard lock(state_->mutex);
    rs = state_->run.lock();
  }
  // The run's scope is set before a probe can follow it and never changes
  // (its report, which its handler may be moving out, is not read).
  return rs ? rs->scope.trace.trace_id_hex() : std::string();
}

void run_probe::start_where(const std::shared_ptr<state>& s, where_handler handler) {
  std::shared_ptr<detail::run_state> rs;
  {
    std::lock_guard lock(s->mutex);
    rs = s->run.lock();
  }
  if (!rs) {
    // Not inside the initiating call: through another thread first.
    auto ex = tracked_executor(handler, asio::system_executor());
    asio::post(asio::system_executor(), [h = std::move(handler), ex]() mutable { complete(std::move(h), {}, ex); });
    return;
  }
  const asio::any_io_executor coord = *rs->session_coord;
  auto ex = tracked_executor(handler, coord);
  asio::co_spawn(coord, detail::where_tasks(std::move(rs)),
                 [h = std::move(handler), ex](std::exception_ptr e, std::vector<std::string> found) mutable {
                   if (e) found = {detail::error_from_exception(e).message};
                   complete(std::move(h), std::move(found), ex);
                 });
}

}  // namespace taskgroup
