// The reference model's step runner (model.hpp): one task's (or one
// node's) steps, run synchronously and recursively, recording events.
#pragma once

#include "model/interp.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace taskgroup::model {

class runner {
 public:
  runner(run_outcome& out, std::string task, std::string node, const execution_step* counted)
      : out_(out), task_(std::move(task)), node_(std::move(node)), counted_(counted) {}

  std::uint64_t iterations = 0;  // of the counted step
  bool cancels_run = false;      // an op asked for the run's cancellation

  void emit(event::type t, const std::string& name, std::uint64_t it = 0, ending end = ending::ok) {
    out_.events.push_back(event{task_, node_, t, name, it, end});
  }
  void unordered() { out_.unordered.insert(node_ + "|" + task_); }

  /// One execution of `s` at step path `path` (which ends with its name)
  /// in `w`, bound in `b` unless it has its own workspace.
  err exec(const execution_step& s, std::shared_ptr<ws> w, bstep* b, const std::string& path);

  /// A step started on its own (a task's tree, setup, local init or exit):
  /// bound here unless it makes its own workspace.
  err start(const execution_step& s, const std::shared_ptr<ws>& w);

  /// A group or task report step's run (once, after its siblings).
  err report(const execution_step& r, std::shared_ptr<ws> w, bstep* b, const std::string& path);

 private:
  err run_net(const bnet& n, const std::string& path);
  err iterate(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b, std::uint64_t& it,
              const std::string& path);
  err concurrent_iteration(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b,
                           const std::vector<std::size_t>& rec, const std::string& path);
  err reports(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b, const std::string& path);

  run_outcome& out_;
  std::string task_, node_;
  const execution_step* counted_;
};

}  // namespace taskgroup::model
