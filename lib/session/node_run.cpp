// A node's part in a run: its stages, one after another on its strand.
#include "session/node_run.hpp"

#include "detail/errors.hpp"
#include "session/node_tasks.hpp"
#include "session/run.hpp"
#include "session/workspace_reuse.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>

#include <exception>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

asio::awaitable<status> acquire_turn(std::shared_ptr<node_turns> turns, node_turns::turn& out) {
  auto t = co_await turns->acquire();
  if (!t) co_return t.error();
  out = std::move(t).value();
  co_return ok();
}

// Under report steps the tasks are awaited beside them.
asio::awaitable<status> tasks_awaited(std::shared_ptr<node_tasks> t) { co_return co_await node_tasks::run(t); }

}  // namespace

error node_run::node_error(const error& e) const {
  return {e.code, "node " + quote(compiled->name) + ": " + e.message};
}

void node_run::start(const std::shared_ptr<run_state>& rs, bool fresh_clock) {
  // Feeds copied in take time of their own.
  start_fresh = fresh_clock && fed.empty();
  options_.registry = rs->registry;
  observed_ = rs->observed;
  observed_.at = event_source{{}, compiled->name, rs->report.trace_id};
  own_run_.emplace(&rs->scope, 1, 1, wants(observed_.kinds, observe::offloads) ? &observed_ : nullptr);
  advance(rs, ok());
}

void node_run::advance(const std::shared_ptr<run_state>& rs, status st) {
  // Each case ends the current stage with `st` and enters the next: a
  // stage that waits returns here through its completion; one that does
  // not goes round the loop with its status.
  try {
    for (;;) {
      switch (stage_) {
        case stage::idle:
          stage_ = stage::turn;
          if (compiled->global && !stopped_) return spawn(rs, acquire_turn(node->turns, turn_));
          break;
        case stage::turn:
          if (!st) return finish(rs, node_error(st.error()));  // its tasks never ran
          stage_ = stage::set_up;
          st = set_up(*rs);
          break;
        case stage::set_up:
          if (!st) return finish(rs, node_error(st.error()));
          stage_ = stage::init;
          if (compiled->init && !stopped_)
            return spawn(rs, run_compiled(compiled->init, ws, options_, observed_, {}, &*own_run_));
          break;
        case stage::init:
          if (!st) return finish(rs, node_error(st.error()));  // its tasks never ran
          stage_ = stage::tasks;
          return start_tasks(rs);
        case stage::tasks:
          tasks_ = nullptr;
          stage_ = stage::fetch;
          fetch_outputs(*rs);
          if (!outputs.empty()) tasks_ended_at = {};  // copied out since
          if (!st) return finish(rs, std::move(st));
          break;
        case stage::fetch:
          stage_ = stage::exit;
          if (compiled->exit) return spawn(rs, run_compiled(compiled->exit, ws, options_, observed_, {}, &*own_run_));
          break;
        case stage::exit: return finish(rs, st ? ok() : status(node_error(st.error())));
        case stage::done: return;
      }
    }
  } catch (...) {
    // Out of memory in a stage: the node's end.
    if (stage_ != stage::done) finish(rs, error_from_exception(std::current_exception()));
  }
}

void node_run::spawn(const std::shared_ptr<run_state>& rs, asio::awaitable<status> a) {
  in_coroutine_ = true;
  start_fresh = false;  // it goes on in another handler
  tasks_ended_at = {};
  asio::co_spawn(node->executor, std::move(a),
                 asio::bind_cancellation_slot(signal_.slot(), [rs, this](std::exception_ptr e, status st) {
                   in_coroutine_ = false;
                   advance(rs, e ? status(error_from_exception(e)) : std::move(st));
                 }));
}

// The run's workspace on the node (the node's own, in turn, for a node
// with GLOBAL tasks; otherwise a child of it), its declared outputs and
// feeds in it.
status node_run::set_up(run_state& rs) {
  // Named as the node: messages read the same either way (and a spare
  // one, an earlier run's here, is already).
  if (compiled->global) {
    ws = node->ws;
  } else if (node->spare.run_ws) {
    ws = std::move(node->spare.run_ws);
    spare_task_ws = std::move(node->spare.task_ws);
  } else {
    ws = node->ws->create_child(compiled->name);
  }
  watch.feeders = compiled->feeders;
  // Every declared output lives in the run's workspace, made before any
  // task starts, so private tasks write through to it and it survives
  // them; unless the node keeps a blob of that name: then the run writes
  // that one (state shared by the node's runs on purpose).
  for (std::size_t k : compiled->tasks) {
    const compiled_task& ct = rs.group->tasks[k];
    if (!ct.has_outputs) continue;  // without touching the task
    for (const auto& out : task_access::outputs(ct.t)) {
      for (const auto& name : out->blobs) ws->create(name);
    }
  }
  return place_feeds();
}

void node_run::start_tasks(const std::shared_ptr<run_state>& rs) {
  if (stopped_) {
    for (std::size_t k : compiled->tasks) cancel_unstarted(*rs, k);
    return advance(rs, error(errc::cancelled, "cancelled"));
  }
  std::shared_ptr<node_tasks> t = node_tasks::make(rs, index);
  tasks_ = t.get();
  if (compiled->reports.empty()) return t->start();  // its end: tasks_ended
  spawn(rs, run_with_reporters(tasks_awaited(std::move(t)), compiled->reports, ws, options_, observed_, compiled->name,
                               &*own_run_));
}

void node_run::stop() {
  stopped_ = true;
  // A coroutine stage (report steps with the tasks beside them included)
  // passes the cancellation on; the tasks alone are told directly.
  if (in_coroutine_) {
    signal_.emit(asio::cancellation_type::terminal);
  } else if (tasks_ != nullptr) {
    // Held while told: a run cancelled inline may end the tasks.
    const std::shared_ptr<node_tasks> held = tasks_->shared_from_this();
    held->stop();
  }
}

// The node's part is over: a GLOBAL node's feeds leave its workspace, its
// turn goes (the next run of a GLOBAL group there may start), and the run
// is told.
void node_run::finish(const std::shared_ptr<run_state>& rs, status st) {
  stage_ = stage::done;
  restore_feeds();
  turn_ = node_turns::turn();
  recycle_workspace();
  rs->node_ended(index, std::move(st));
}

// The run's own workspace here, when nothing else holds it or its spare
// task workspace (an op that kept one, say), is emptied for the node's
// next run: its blobs go now, as they would with it.
void node_run::recycle_workspace() noexcept {
  if (!ws || compiled->global) return;
  if (spare_task_ws && spare_task_ws.use_count() != 1) return;
  // This part, and the spare's link to its parent.
  if (!workspace_reuse::keep(ws, spare_task_ws ? 2 : 1, node->spare.run_ws)) return;
  node->spare.task_ws = std::move(spare_task_ws);
}

}  // namespace taskgroup::detail
