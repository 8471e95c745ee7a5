// The frame-free driver: runs the step machine with no coroutine frame.
// Synchronous nets are called inline; an asynchronous op is started
// through its callback form (`op_kernel::start`) and the run resumes from
// its completion. One machine per step execution, on an explicit stack, so
// a run can stop at any op and resume there. It takes the trees that
// `may_run_inline` accepts (no concurrency, deadline, report step or
// nested own workspace: bounded work between suspensions), observed or not.
#include "step/machine.hpp"

#include "ops/net_run.hpp"
#include "ops/run_scope.hpp"
#include "step/runner.hpp"

#include <boost/asio/cancellation_signal.hpp>
#include <boost/container/small_vector.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace {

namespace asio = boost::asio;

// A status in one pointer (null: success), for what a waiting run keeps:
// a status is seven times that size.
class compact_status {
 public:
  compact_status& operator=(status st) {
    if (st) {
      failure_.reset();
    } else {
      failure_ = std::make_unique<error>(std::move(st).assume_error());
    }
    return *this;
  }
  explicit operator bool() const noexcept { return failure_ == nullptr; }
  [[nodiscard]] status get() const { return failure_ ? status(*failure_) : ok(); }
  // The status, leaving success behind.
  [[nodiscard]] status take() {
    status out = get();
    failure_.reset();
    return out;
  }

 private:
  std::unique_ptr<error> failure_;
};

class frame_free_driver final : public frame_free_run {
 public:
  explicit frame_free_driver(task_host& host) noexcept : host_(&host) {}

  outcome start(const compiled_step& s, std::shared_ptr<workspace>& ws) override {
    const program_step& root = s.root;
    if (!may_run_inline(s) || !ws) return outcome::declined;
    stats_ = step_stats{};
    std::shared_ptr<workspace> own;
    if (root.create_ws) own = ws->create_child(ws->name() + "/" + root.name);
    workspace& w = own ? *own : *ws;
    const step_path path{nullptr, root.name};
    if (status st = bind_step(root, w, host_->registry(), bound_, &path); !st) {
      host_->run_begins(*this);  // as the coroutine driver, which binds once the task has begun
      result_ = std::move(st);
      return outcome::ended;
    }
    if (!startable(root, bound_)) return outcome::declined;
    host_->run_begins(*this);
    stack_.clear();
    push(root, bound_);
    // Without a context of its own, the task serves the ambient one, which
    // the host has made current around this call.
    const run_context* own_run = host_->own_run(task);
    if (own_run == nullptr ? advance() : in_run(own_run, [this] { return advance(); })) return outcome::ended;
    // Waiting: the run holds its workspaces until it ends.
    // A child keeps its parent: the run holds the innermost one.
    ws_ = own ? std::move(own) : std::move(ws);
    ws.reset();
    return outcome::waiting;
  }

  void cancel() noexcept override {
    // Only while an op pends: the slot's handler belongs to that op.
    if (waiting_) signal_.emit(asio::cancellation_type::terminal);
  }
  [[nodiscard]] status result() const override { return result_.get(); }
  [[nodiscard]] const step_stats& stats() const noexcept override { return stats_; }
  void reset() noexcept override {
    ws_.reset();
    observed = &no_observation;
  }
  void rehost(task_host& host) noexcept override { host_ = &host; }

 private:
  // Every asynchronous kernel of the bound tree has a callback form.
  static bool startable(const program_step& n, const bound_step& b) {
    for (const net_instance* inst : b.nets) {
      if (!inst->has_async()) continue;
      for (std::size_t i = 0; i < inst->size(); ++i) {
        const op_kernel& k = net_access::kernel(*inst, i);
        if (k.is_async() && !k.has_start()) return false;
      }
    }
    for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
      const std::size_t idx = n.recurring_at(j);
      if (!startable(n.children[idx], b.children[idx])) return false;
    }
    return true;
  }

  // The machines report to the run's counts and to the host's
  // observation (not kept apart: a waiting task holds its run).
  [[nodiscard]] step_context ctx() noexcept { return step_context{&stats_, observed, host_->run_of(task)}; }
  [[nodiscard]] stop_query stop() const noexcept { return stop_query{nullptr, host_->stopping_flag()}; }

  // An execution of `n` begins.
  void push(const program_step& n, const bound_step& b) { stack_.emplace_back(n, b).begins(ctx()); }

  using action = step_machine::action;

  // The execution just pushed: what it does first. A net step of
  // synchronous nets runs its whole loop here. nullopt: the run has ended.
  std::optional<action> enter(yield_clock& clock) {
    step_machine& m = stack_.back();
    if (!has_only_sync_nets(m.step(), m.bound())) return m.next(stop(), clock, ctx());
    if (!run_sync_level(m, clock)) return std::nullopt;
    return pop(clock);
  }

  // The top execution has ended well: its parent goes on (nullopt: it was
  // the root, the run has ended well).
  std::optional<action> pop(yield_clock& clock) {
    stack_.back().ends(ctx(), ok());
    stack_.pop_back();
    if (stack_.empty()) {
      finish(ok());
      return std::nullopt;
    }
    return stack_.back().unit_ended(stop(), clock, ctx());
  }

  // The run has ended with `st`: every execution on the stack ends with
  // it, innermost first (as the coroutine driver's frames unwind).
  bool finish(status st) {
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) it->ends(ctx(), st);
    result_ = std::move(st);
    stack_.clear();
    return true;
  }

  // The net of the top execution's last `run_net` action: the one running,
  // whose op `op_` pends while the run waits.
  [[nodiscard]] net_instance& net() const noexcept { return stack_.back().net(); }

  // Calls `f` with the step path of the top of the stack (made on demand:
  // for errors, and for the synchronous loop, which renders it only on
  // error).
  template <class F>
  auto with_path(F f) const {
    boost::container::small_vector<step_path, 4> chain;
    chain.reserve(stack_.size());
    for (const step_machine& m : stack_) {
      chain.push_back(step_path{chain.empty() ? nullptr : &chain.back(), m.step().name});
    }
    return f(&chain.back());
  }

 public:
  // frame_free_run: the path of the top of the stack, the net and its op
  // that pends (or the wait for an offloaded op, `retry_`).
  [[nodiscard]] std::string where() const override {
    if (!waiting_ || stack_.empty()) return {};
    const error op(errc::cancelled, op_waiting(net(), op_, retry_));
    return with_path([&](const step_path* p) { return at(p, op).message; });
  }

 private:
  // Carries out the machines' actions from where they stand until the
  // tree ends (true, result_ set) or an op waits (false). `resumed`: the
  // end of the op that waited.
  bool advance(std::optional<status> resumed = std::nullopt) {
    // The work between suspensions is bounded (may_run_inline): the clock
    // never asks for a yield here.
    yield_clock clock;
    std::optional<action> a;
    if (resumed) {
      if (!*resumed) {
        retry_ = false;
        result_ = net_access::op_error(net(), op_, resumed->error());
        (void)net_ended(clock);
        return true;
      }
      if (!std::exchange(retry_, false)) ++op_;  // after a wait for an offloaded op, op_ runs now
      if (!continue_net()) return false;
      a = net_ended(clock);
    } else {
      a = enter(clock);
    }
    while (a) {
      step_machine& m = stack_.back();
      switch (*a) {
        case action::run_net: {
          // The machine has begun the net's run (counted, told).
          net_instance& inst = m.net();
          op_ = 0;
          if (!inst.may_wait()) {
            result_ = inst.run_sync();
          } else if (!continue_net()) {
            return false;
          }
          a = net_ended(clock);
          break;
        }
        case action::run_child: {
          const std::size_t idx = m.unit();
          push(m.step().children[idx], m.bound().children[idx]);
          a = enter(clock);
          break;
        }
        case action::done: a = pop(clock); break;
        case action::yield: a = m.next(stop(), clock, ctx()); break;
        case action::bad_stop:
          return finish(with_path([&](const step_path* p) { return status(stop_blob_error(m.bound(), m.step(), p)); }));
        case action::cancelled: return finish(with_path([](const step_path* p) { return cancelled_at(p); }));
        case action::run_concurrent:
          return finish(with_path([](const step_path* p) {
            return status(at(p, errc::invalid_step, "internal: a concurrent step reached the frame-free driver"));
          }));
      }
    }
    return true;
  }

  // A net step of synchronous nets, its whole loop; false when the run has
  // ended (a failure or cancellation).
  bool run_sync_level(step_machine& m, yield_clock& clock) {
    return with_path([&](const step_path* p) {
      status failure = ok();
      for (;;) {
        switch (run_sync_loop(m, p, stop(), clock, ctx(), failure)) {
          case loop_exit::end: return true;
          case loop_exit::failed:
          case loop_exit::bad_stop: return !finish(std::move(failure));
          case loop_exit::cancelled: return !finish(cancelled_at(p));
          case loop_exit::yield: break;
        }
      }
    });
  }

  // Runs `net()` from op `op_`: false when an op waits; else the net has
  // ended, with its status (without the step path) in result_.
  bool continue_net() {
    result_ = ok();
    net_instance& net = this->net();
    for (;;) {
      std::size_t i = op_;
      status st = net_access::run_from(net, i);
      op_ = static_cast<std::uint32_t>(i);
      if (!st) {
        result_ = std::move(st);
        return true;
      }
      if (op_ == net.size()) return true;
      // A blocked op waits for the node's offloaded op, then runs.
      const bool blocked = net_access::blocked(net, op_);
      std::optional<status> now =
          blocked ? start_op([&net](const asio::any_io_executor& ex, op_completion done) {
            net_access::wait_unblocked(net, ex, std::move(done));
          })
                  : start_op([k = &net_access::kernel(net, op_)](const asio::any_io_executor& ex, op_completion done) {
                      k->start(ex, std::move(done));
                    });
      if (!now) {
        retry_ = blocked;
        return false;
      }
      if (!*now) {
        result_ = net_access::op_error(net, op_, now->error());
        return true;
      }
      if (!blocked) ++op_;
    }
  }

  // Net `net()` of the top execution has ended with result_: reported, and
  // the machine goes on (nullopt: the net failed, the run has ended).
  std::optional<action> net_ended(yield_clock& clock) {
    const status st = result_.take();
    step_machine& m = stack_.back();
    m.net_ended(ctx(), st);
    if (!st) {
      finish(with_path([&](const step_path* p) { return status(at(p, st.error())); }));
      return std::nullopt;
    }
    return m.unit_ended(stop(), clock, ctx());
  }

  // Starts an op through `start(ex, done)` (its kernel's start, or the
  // wait for an offloaded op): its status when it ended at once, nullopt
  // when it waits.
  template <class Start>
  std::optional<status> start_op(Start start) {
    if (stop().requested()) return status(fail(errc::cancelled, "cancelled"));
    in_start_ = true;
    ended_early_ = false;
    start(host_->executor(), op_completion(*this, signal_.slot()));
    in_start_ = false;
    if (ended_early_) return result_.take();
    waiting_ = true;
    return std::nullopt;
  }

  void complete(status st) noexcept override {
    if (in_start_) {  // ended inside start(): start_op takes it from result_
      result_ = std::move(st);
      ended_early_ = true;
      return;
    }
    waiting_ = false;
    if (!in_run(host_->run_of(task), [&] { return advance(std::move(st)); })) return;  // waits again
    reset();
    host_->run_ended(*this);  // last: the host may destroy this run (and itself)
  }

  void abandon() noexcept override {
    if (in_start_) {
      result_ = fail(errc::op_failed, "asynchronous operator dropped its completion");
      ended_early_ = true;
      return;
    }
    waiting_ = false;
    host_->run_abandoned(*this);  // last: the host may destroy this run (and itself)
  }

  task_host* host_;
  std::shared_ptr<workspace> ws_;  // while waiting: the root step's own workspace, else the task's
  bound_step bound_;
  boost::container::small_vector<step_machine, 1> stack_;  // a task's tree is mostly one step
  step_stats stats_;
  compact_status result_;  // the run's, a net's while it runs, or an op's end reported inside start()
  asio::cancellation_signal signal_;
  bool waiting_ = false;
  bool in_start_ = false;
  bool ended_early_ = false;
  bool retry_ = false;  // the pending wait is for an offloaded op: op_ runs when it ends
  // 32 bits, beside the flags: a waiting task holds its run (a net of 2^32
  // ops would need hundreds of GB).
  std::uint32_t op_ = 0;
};

}  // namespace

std::unique_ptr<frame_free_run> make_frame_free_run(task_host& host) {
  return std::make_unique<frame_free_driver>(host);
}

}  // namespace taskgroup::detail
