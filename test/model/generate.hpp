// Random task groups for the property test of the step semantics.
//
// `generate(seed)` makes a `group_spec`: plain data describing a task group
// (nodes, tasks, their step trees built from raw steps and the control
// helpers of control.hpp, setup work, report steps). `build` turns a spec
// into a real `task_group` through the public API; `intent` computes what
// the spec means for the user's counters straight from the spec (what each
// helper is documented to do), independently of how lib/model/control.cpp assembles
// its steps. Specs are values, so the property test can shrink them.
//
// Blobs. Every node starts with int64 counters c0..c2, int64 constants
// k1..k3 (1, 2, 3) and bools T (true) and F (false), set before the first
// run. Leaves add constants into counters (commutative, so concurrent parts
// give one result whatever the interleaving) and may make a local blob of
// their own (`g<id>/tmp`). Every helper names its blobs after its id, so no
// two helpers share one. Conditions that read a counter are generated only
// where nothing runs concurrently with them (`safe` mode off).
//
// Failures, cancellation, waits (decorate.cpp). A leaf may run one more op
// (`extra`): a Sleep that ends on its own, in any seed; and in about a
// third of the seeds one trigger, an op that fails (Fail, or Div by zero
// on the leaf's n-th run in its task's run) or that cancels the run
// (the test's CancelRun), with, in other tasks and in the trigger's
// concurrent siblings, Sleeps of an hour that only the run's end stops
// ("blockers"). Such a seed is deterministic by construction on any
// number of threads, whatever the order of tasks and nodes:
//   - one trigger, in task T (instances 1) or in node N's own work;
//   - T's trigger has at most one concurrent ancestor, whose children have
//     none of their own, and no Sleep runs in a concurrent step: the
//     trigger's failure is inline, so the siblings after it do not start
//     and those before it have ended or wait in a blocker;
//   - every other task can only be cancelled where it waits for that: it
//     has no concurrency, instance, report step or short Sleep (no point
//     where it suspends before its end or a blocker), and the other
//     nodes have no local init, exit or group report step. The library
//     then begins a task or not (its report says which), and a task that
//     began runs to its end or to a blocker;
//   - blockers stay only where the model says the run fails or is
//     cancelled (`settle`): else the run would wait an hour.
#pragma once

#include <taskgroup/task_group.hpp>

#include <cstdint>
#include <string>
#include <vector>

// The counted loop whose count is read from a blob at run time
// (`loop(name, count_blob, body)`): generated only when the library has it.
#ifndef TASKGROUP_MODEL_COUNT_BLOB
#define TASKGROUP_MODEL_COUNT_BLOB 1
#endif

namespace taskgroup::model {

enum class kind : std::uint8_t {
  leaf,       // a net adding constants into counters
  raw_iter,   // step with substeps (or nets) and iterations(n)
  raw_stop,   // step looping on a stop blob until its tick sets it (n iterations, at least 1)
  raw_once,   // step with a stop blob and only_once; a stopper substep may end it early
  loop_n,     // loop(name, n, body)
  loop_blob,  // loop(name, count_blob, body) (TASKGROUP_MODEL_COUNT_BLOB)
  loop_stop,  // loop(name, body) ended by stop_if(net)
  while_,     // while_, until, do_while, do_until, while_net over a counter g<id>/i < n
  until,
  do_while,
  do_until,
  while_net,
  if_,  // if_, if_not, if_net over a condition
  if_not,
  if_net,
  switch_,  // switch_, switch_not: one case per child
  switch_not,
  stop_guard,  // stop_guard with a stop_if marker
  do_,         // do_ with an optional stop marker
  do_parallel,
};

std::string to_string(kind k);

/// An op a leaf runs besides its adds, before or after them.
enum class extra : std::uint8_t {
  none,
  sleep,    // Sleep: 0 ms (ends at once) with n = 0, else 0.01 ms on the timer
  fail,     // Fail, message "g<id> fails"
  fail_at,  // Div by zero on the leaf's n-th run in its task's run (T's root counts)
  cancel,   // CancelRun: asks for the run's cancellation, then waits for it
  block,    // Sleep of an hour: waits until the run ends
};

/// `c<counter> += k<konst>` (konst 1..3).
struct add_op {
  int counter = 0;
  int konst = 1;
};

/// One node of a generated tree.
struct gnode {
  kind k = kind::leaf;
  int id = 0;             // names: g<id>, g<id>/i, ...
  int n = 1;              // iterations or limit
  bool cond_net = false;  // condition computed by a net (else a blob)
  int cond = 0;           // if_: 0 T, 1 F, 2 GE(c<cond_counter>, k2)
  int cond_counter = 0;
  bool concurrent = false;   // raw steps
  bool create_ws = false;    // raw steps
  bool direct_nets = false;  // raw_iter over leaves: the leaves as the step's own nets
  bool has_else = false;     // if_/if_net: kids [0, split) then, [split, end) else
  int split = 0;
  int stop_at = -1;              // position of a stop marker among the kids (-1: none)
  bool stop_true = true;         // the marker's condition (T or F); raw_once: the stopper's value
  std::vector<bool> case_conds;  // switch: one per kid
  std::vector<add_op> adds;      // leaf
  bool tmp = false;              // leaf: also makes g<id>/tmp and adds it to c0
  extra x = extra::none;         // leaf: one more op
  int x_n = 0;                   // sleep: 0 or short; fail_at: the run that fails
  bool x_first = false;          // the extra op before the adds
  std::vector<gnode> kids;
};

struct task_spec {
  int node = 0;
  int instances = 1;
  gnode root;
  std::vector<gnode> init, exit, inst_init, inst_exit;  // leaves
  std::vector<gnode> reports;                           // leaves, run every hour
  std::vector<int> outputs;                             // counters declared as outputs
};

struct node_spec {
  std::vector<gnode> local_init, local_exit;  // leaves
  std::vector<gnode> reports;                 // group report steps (leaves), every hour
  bool reset = false;                         // local init sets c2 to 0 first
  std::vector<std::int64_t> initial;          // c0..c2 before the first run
};

struct group_spec {
  std::uint64_t seed = 0;
  // The group's name (`task_group::name`), drawn apart from the tree's
  // draws: empty in about half the seeds, else names of every shape the
  // limits allow (spaces, quotes, backslashes, multi-byte characters, the
  // longest). It labels metrics only: the runs do not depend on it.
  std::string name;
  bool global = false;
  int runs = 2;  // runs of the same group on one session
  std::vector<node_spec> nodes;
  std::vector<task_spec> tasks;
};

constexpr int counters = 3;

/// A random group spec (deterministic in `seed`).
group_spec generate(std::uint64_t seed);

/// Adds the Sleeps and, to some seeds, a trigger and blockers (the top of
/// this file), drawn from `seed` apart from the tree's own draws.
void decorate(group_spec& spec, std::uint64_t seed);

/// Drops the blockers of a spec whose runs the model says would wait for
/// a cancellation that never comes (a trigger not reached).
void settle(group_spec& spec);

/// Whether a leaf of the spec has `x` (a trigger: fail, fail_at, cancel).
bool has_extra(const group_spec& spec, extra x);

/// The extra op's name, as `dump` shows it.
std::string to_string(extra x);

/// Node `i` of a spec is named `n<i>`; task `j` is `t<j>`.
std::string node_name(int i);

/// The group a spec describes (a new, unused group each call).
task_group build(const group_spec& spec);

/// The blobs every node has before the first run, with their values.
struct initial_blob {
  std::string name;
  bool is_bool = false;
  std::int64_t i = 0;
  bool b = false;
};
std::vector<initial_blob> initial_blobs(const node_spec& n);

/// The counters c0..c2 of every node after each of `spec.runs` runs, as
/// the helpers are documented to behave: [run][node][counter].
std::vector<std::vector<std::vector<std::int64_t>>> intent(const group_spec& spec);

/// A readable dump of the spec (the reproduction printed on failure).
std::string dump(const group_spec& spec);

/// Smaller variants of `spec` (one change each), for shrinking.
std::vector<group_spec> shrink_candidates(const group_spec& spec);

}  // namespace taskgroup::model
