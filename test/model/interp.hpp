// The reference model's interpreter (model.hpp): workspaces, bound nets and
// the operators, shared by the step runner (model.cpp), the run of a group
// (run.cpp) and the operators (ops.cpp).
#pragma once

#include "model/model.hpp"

#include <taskgroup/error.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::model {

// A workspace: local blobs and a parent.
struct ws {
  std::shared_ptr<ws> parent;
  std::map<std::string, std::shared_ptr<value>> blobs;

  [[nodiscard]] std::shared_ptr<value> find(const std::string& name) const {
    for (const ws* w = this; w != nullptr; w = w->parent.get()) {
      if (auto it = w->blobs.find(name); it != w->blobs.end()) return it->second;
    }
    return nullptr;
  }
  std::shared_ptr<value> create(const std::string& name) {
    if (auto b = find(name)) return b;
    return blobs[name] = std::make_shared<value>();
  }
  static std::shared_ptr<ws> child(std::shared_ptr<ws> of) {
    auto w = std::make_shared<ws>();
    w->parent = std::move(of);
    return w;
  }
};

// Why an execution ended early. `failed`: an op (or a binding, or the stop
// blob) failed, the run's failure. `blocked`: an op waits until the run is
// cancelled (an hour's Sleep, CancelRun): the execution and every one
// around it end `cancelled` once the run's failure or cancellation reaches
// them, which the model takes as given (the run is checked to have one).
// The message is the library's at the step that ended first:
// `<step path>/net "<net>" op #<i> (<type>): <text>`.
struct halt {
  enum class why : std::uint8_t { failed, blocked };
  why w = why::failed;
  errc code = errc::op_failed;
  std::string message;
};
using err = std::optional<halt>;

struct bop {
  const op_def* def;
  std::vector<std::shared_ptr<value>> in, out;
};
struct bnet {
  std::string name;
  std::vector<bop> ops;
};
// A step's nets and stop blob bound in one workspace; children with their
// own workspace are bound when they start.
struct bstep {
  std::vector<bnet> nets;
  std::shared_ptr<value> stop;
  std::vector<bstep> kids;
};

// What one op did: nothing wrong, a failure or a wait (the op's own text),
// and whether it asked for the run's cancellation (CancelRun).
struct op_end {
  std::optional<halt> stop;
  bool cancels_run = false;
};

/// Binds `s` (and its children without their own workspace) in `w`;
/// a failure names the step path `path`.
err bind_nets(const execution_step& s, ws& w, bstep& b, const std::string& path);
/// Runs one bound op.
op_end run_op(const bop& o);

/// The ending an execution's halt gives its observer events.
inline ending ending_of(const err& e) {
  if (!e) return ending::ok;
  return e->w == halt::why::failed ? ending::failed : ending::cancelled;
}

/// The text a cancelled hour-long Sleep ends with (its milliseconds left
/// vary: the comparison reads every `wait cancelled <n> ms` as this).
inline constexpr const char* wait_cancelled = "wait cancelled # ms before it was due";
/// The Sleep that waits until the run ends (an hour).
inline constexpr std::int64_t block_ms = 3600 * 1000;

}  // namespace taskgroup::model
