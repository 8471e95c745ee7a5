// A node's part in a run: its stages, one after another on its strand.
#include "session/node_tasks.hpp"

#include "detail/errors.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include <exception>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

using next_stage = void (*)(const std::shared_ptr<run_state>&, std::size_t, status);

error node_error(const compiled_node& cn, const error& e) {
  return {e.code, "node " + quote(cn.name) + ": " + e.message};
}

// The node's part is over: a GLOBAL node's feeds leave its workspace, its
// turn goes (the next run of a GLOBAL group there may start), and the
// coordinator is told.
void end_node(const std::shared_ptr<run_state>& rs, std::size_t i, status st) {
  restore_feeds(*rs, i);
  rs->parts[i].turn = node_turns::turn();
  asio::post(rs->coord, [rs, i, st = std::move(st)]() mutable { node_ended(rs, i, std::move(st)); });
}

// Calls `stage` for node i, its exceptions (out of memory) the node's end.
template <class... Args>
void guarded(void (*stage)(const std::shared_ptr<run_state>&, std::size_t, Args...),
             const std::shared_ptr<run_state>& rs, std::size_t i, Args... args) {
  try {
    stage(rs, i, std::move(args)...);
  } catch (...) {
    end_node(rs, i, error_from_exception(std::current_exception()));
  }
}

// Runs stage `a`, a coroutine, on node i's strand; `next` gets its end.
// The node's signal reaches it while it runs (cancel_node).
void run_stage(const std::shared_ptr<run_state>& rs, std::size_t i, asio::awaitable<status> a, next_stage next) {
  node_part& p = rs->parts[i];
  p.in_coroutine = true;
  asio::co_spawn(rs->nodes[i]->executor, std::move(a),
                 asio::bind_cancellation_slot(p.signal.slot(), [rs, i, next](std::exception_ptr e, status st) {
                   rs->parts[i].in_coroutine = false;
                   guarded(next, rs, i, e ? status(error_from_exception(e)) : std::move(st));
                 }));
}

asio::awaitable<status> acquire_turn(std::shared_ptr<run_state> rs, std::size_t i) {
  auto t = co_await rs->nodes[i]->turns->acquire();
  if (!t) co_return t.error();
  rs->parts[i].turn = std::move(t).value();
  co_return ok();
}

// Under report steps the tasks are awaited beside them.
asio::awaitable<status> tasks_awaited(std::shared_ptr<node_tasks> t) { co_return co_await node_tasks::run(t); }

void after_exit(const std::shared_ptr<run_state>& rs, std::size_t i, status st) {
  end_node(rs, i, st ? ok() : status(node_error(rs->group->nodes[i], st.error())));
}

// The tasks (and report steps) have ended: outputs fetched, local exit
// after a success.
void after_tasks(const std::shared_ptr<run_state>& rs, std::size_t i, status st) {
  const compiled_node& cn = rs->group->nodes[i];
  rs->parts[i].tasks.reset();
  fetch_outputs(*rs, i);
  if (!st || !cn.exit) return end_node(rs, i, std::move(st));
  run_stage(rs, i, run_compiled(cn.exit, rs->workspaces[i], rs->parts[i].options), after_exit);
}

void start_tasks(const std::shared_ptr<run_state>& rs, std::size_t i) {
  const compiled_node& cn = rs->group->nodes[i];
  node_part& p = rs->parts[i];
  if (p.cancelled) {
    for (std::size_t k : cn.tasks) cancel_unstarted(*rs, k);
    return after_tasks(rs, i, error(errc::cancelled, "cancelled"));
  }
  std::shared_ptr<node_tasks> t = node_tasks::make(rs, i);
  p.tasks = t;
  if (cn.reports.empty()) {
    t->start([](const std::shared_ptr<run_state>& r, std::size_t n, status st) { guarded(after_tasks, r, n, st); });
    return;
  }
  run_stage(rs, i, run_with_reporters(tasks_awaited(std::move(t)), cn.reports, rs->workspaces[i], p.options, cn.name),
            after_tasks);
}

void after_init(const std::shared_ptr<run_state>& rs, std::size_t i, status st) {
  if (!st) return end_node(rs, i, node_error(rs->group->nodes[i], st.error()));  // its tasks never ran
  start_tasks(rs, i);
}

// The run's workspace on the node (the node's own, in turn, for a node
// with GLOBAL tasks; otherwise a child of it), its declared outputs and
// feeds in it, then local init.
void set_up(const std::shared_ptr<run_state>& rs, std::size_t i, status turn) {
  const compiled_node& cn = rs->group->nodes[i];
  if (!turn) return end_node(rs, i, node_error(cn, turn.error()));  // its tasks never ran
  node_state* n = rs->nodes[i];
  // Named as the node: messages read the same either way.
  rs->workspaces[i] = cn.global ? n->ws : n->ws->create_child(cn.name);
  rs->watch[i].feeders = cn.feeders;
  workspace& ws = *rs->workspaces[i];
  // Every declared output lives in the run's workspace, made before any
  // task starts, so private tasks write through to it and it survives
  // them; unless the node keeps a blob of that name: then the run writes
  // that one (state shared by the node's runs on purpose).
  for (std::size_t k : cn.tasks) {
    const compiled_task& ct = rs->group->tasks[k];
    if (!ct.has_outputs) continue;  // without touching the task
    for (const auto& out : task_access::outputs(ct.t)) {
      for (const auto& name : out->blobs) ws.create(name);
    }
  }
  if (status st = place_feeds(*rs, i); !st) return end_node(rs, i, node_error(cn, st.error()));
  if (!cn.init || rs->parts[i].cancelled) return start_tasks(rs, i);
  run_stage(rs, i, run_compiled(cn.init, rs->workspaces[i], rs->parts[i].options), after_init);
}

}  // namespace

void start_node(std::shared_ptr<run_state> rs, std::size_t i) {
  try {
    const compiled_node& cn = rs->group->nodes[i];
    node_part& p = rs->parts[i];
    p.options.registry = rs->registry;
    if (rs->options.observer != nullptr) {
      p.events.emplace(rs->options.observer, std::string(), cn.name);
      p.options.observer = &*p.events;
    }
    if (cn.global && !p.cancelled) return run_stage(rs, i, acquire_turn(rs, i), set_up);
    set_up(rs, i, ok());
  } catch (...) {
    end_node(rs, i, error_from_exception(std::current_exception()));
  }
}

void cancel_node(run_state& rs, std::size_t i) {
  node_part& p = rs.parts[i];
  p.cancelled = true;
  // A coroutine stage (report steps with the tasks beside them included)
  // passes the cancellation on; the tasks alone are told directly.
  if (p.in_coroutine) {
    p.signal.emit(asio::cancellation_type::terminal);
  } else if (auto t = p.tasks.lock()) {
    t->stop();
  }
}

}  // namespace taskgroup::detail
