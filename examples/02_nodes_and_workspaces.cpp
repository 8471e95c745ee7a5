// 02: nodes and workspaces, the classic Caffe2 TaskGroup example.
//
//   with TaskGroup() as tg:          # in Caffe2's task.py
//       Task(step=s1); Task(step=s2)  # node 'local'
//       with Node('n2'): Task(step=s3)
//       with Node('n1'): Task(step=s4)
//       with Node('n2'): Task(step=s5)
//   session.run(tg)  # all in parallel; s1 and s2 share a workspace
//
// Here nodes are named where a task is added (`group.add(t, "n2")`); there
// is no "current node". A session gives every node one workspace and one
// strand. In a GLOBAL group every task runs directly in its node's
// workspace, so tasks of one node see each other's blobs, and nodes share
// nothing at all: the same blob name on two nodes is two blobs.
//
// Tasks of a node start together, so one task cannot simply read a blob
// that a sibling will write later: each task binds its nets (resolving
// every input) when it starts. The hand-over goes through something that
// exists before both start: a queue blob made by the node's `local_init`
// (run before the node's tasks). s1 writes a note and enqueues it, s2
// dequeues it; s3 and s5 do the same on n2 through their own `mailbox`.
//
// After the run, the node workspaces (kept by the session) show who saw
// what. A second run on the same session shows two more rules: GLOBAL
// blobs stay in the node workspace across runs (a new task on `local`
// reads s1's note directly), and a task on n1 that names s3's blob fails
// when it binds, because n1's workspace has no such blob. That run uses
// `run_policy::gather`, so one failing task does not cancel the other and
// the report holds both results.
//
// No event loop here: the session owns a pool of two threads, nodes run in
// parallel on it, and the blocking `run` waits for the run.
#include <taskgroup/taskgroup.hpp>

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace tg = taskgroup;
using i64 = std::int64_t;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "check failed: " << what << '\n';
    ++failures;
  }
}

// A task running one net, named after the task.
tg::task task_of(const std::string& name, tg::net n) { return tg::task(name, tg::step(name).add_net(std::move(n))); }

// s1 / s3: write a note, then post it to the node's mailbox.
tg::task writer(const std::string& name, const std::string& note_blob, const std::string& text) {
  tg::net n(name);
  n.op("ConstantFill", {}, {note_blob}, {{"value", text}}).op("Enqueue", {"mailbox", note_blob}, {});
  return task_of(name, n);
}

// s2 / s5: take the note out of the mailbox.
tg::task reader(const std::string& name, const std::string& got_blob) {
  tg::net n(name);
  n.op("Dequeue", {"mailbox"}, {got_blob, name + "_ok"});
  return task_of(name, n);
}

}  // namespace

int main() {
  tg::local_session session(2);  // owns a pool of 2 threads

  // --- run 1: five tasks on three nodes -----------------------------------
  tg::task_group group(tg::workspace_type::global);

  tg::net make_mailbox("make_mailbox");
  make_mailbox.op("CreateQueue", {}, {"mailbox"}, {{"capacity", i64{1}}});
  group.local_init("local", make_mailbox);
  group.local_init("n2", make_mailbox);  // same net, another node: another queue

  tg::task s2 = reader("s2", "s2_got");
  tg::task s5 = reader("s5", "s5_got");
  auto s2_got = s2.output<std::string>("s2_got");
  auto s5_got = s5.output<std::string>("s5_got");
  tg::net lonely("s4");
  lonely.op("ConstantFill", {}, {"s4_note"}, {{"value", std::string("s4 was here")}});

  (void)group.add(writer("s1", "s1_note", "from s1 on local")).value();  // node `local` by default
  (void)group.add(s2).value();
  (void)group.add(writer("s3", "s3_note", "from s3 on n2"), "n2").value();
  (void)group.add(task_of("s4", lonely), "n1").value();
  (void)group.add(s5, "n2").value();

  std::cout << "tasks:";
  for (const auto& t : group.tasks()) std::cout << ' ' << t.name();
  std::cout << "\nnodes:";
  for (const auto& n : group.used_nodes()) std::cout << ' ' << n;
  std::cout << '\n';

  // A blocking run keeps its report on failure with an error_code (as
  // Asio's synchronous operations take one); without it, it throws.
  boost::system::error_code ec;
  auto r1 = session.run(group, {}, ec);
  if (ec) {
    std::cerr << "run 1 failed: " << r1.failure->message << '\n';
    return 1;
  }
  check(r1.ok(), "run 1: every task succeeded");
  check(s2_got.get().value() == "from s1 on local", "s2 read what s1 wrote");
  check(s5_got.get().value() == "from s3 on n2", "s5 read what s3 wrote");

  // Who can see which blob, read from the node workspaces (no run is in
  // flight, so touching them from this thread is fine).
  const std::vector<std::string> nodes{"local", "n2", "n1"};
  const std::vector<std::string> blobs{"mailbox", "s1_note", "s2_got", "s3_note", "s5_got", "s4_note"};
  std::cout << "\nblob visibility after run 1 (x = present in the node workspace):\n" << std::setw(10) << "";
  for (const auto& n : nodes) std::cout << std::setw(7) << n;
  std::cout << '\n';
  for (const auto& b : blobs) {
    std::cout << std::setw(10) << b;
    for (const auto& n : nodes) std::cout << std::setw(7) << (session.node_workspace(n)->has(b) ? "x" : ".");
    std::cout << '\n';
  }
  auto has = [&](const std::string& n, const std::string& b) { return session.node_workspace(n)->has(b); };
  check(has("local", "s1_note") && has("local", "s2_got"), "s1 and s2 share node local's workspace");
  check(has("n2", "s3_note") && has("n2", "s5_got"), "s3 and s5 share node n2's workspace");
  check(!has("n2", "s1_note") && !has("n1", "s1_note"), "s1's blob is on local only");
  check(!has("local", "s3_note") && !has("n1", "s3_note"), "s3's blob is on n2 only");
  check(has("n1", "s4_note") && !has("n1", "mailbox"), "n1 has s4's blob and no mailbox");
  check(!has("local", "s4_note") && !has("n2", "s4_note"), "s4's blob is on n1 only");

  // --- run 2: the workspaces outlive the run ------------------------------
  tg::task_group second(tg::workspace_type::global);
  tg::net reread("reread");
  reread.op("Copy", {"s1_note"}, {"reread"});  // bound now: s1_note exists on local
  tg::task t_reread = task_of("reread", reread);
  auto reread_out = t_reread.output<std::string>("reread");
  tg::net peek("peek");
  peek.op("Copy", {"s3_note"}, {"stolen"});  // n1 never had s3_note
  (void)second.add(t_reread).value();
  (void)second.add(task_of("peek", peek), "n1").value();

  tg::run_options gather;
  gather.policy = tg::run_policy::gather;
  auto r2 = session.run(second, gather, ec);
  if (ec) {
    std::cerr << "run 2 failed: " << r2.failure->message << '\n';
    return 1;
  }
  std::cout << "\nrun 2 (gather):\n";
  for (const auto& t : r2.tasks) {
    std::cout << "  " << t.name << ": " << tg::to_string(t.status);
    for (const auto& [name, value] : t.outputs) std::cout << ", " << name << " = " << tg::to_display_string(*value);
    if (t.failure) std::cout << "\n    " << t.failure->message;
    std::cout << '\n';
  }
  const auto* rr = r2.find("local/reread");
  const auto* pk = r2.find("n1/peek");
  check(rr != nullptr && rr->status == tg::task_status::succeeded, "local/reread succeeded");
  check(reread_out.get().has_value() && reread_out.get().value() == "from s1 on local", "reread saw s1's note");
  check(pk != nullptr && pk->status == tg::task_status::failed, "n1/peek failed");
  check(pk != nullptr && pk->failure && pk->failure->message.find("does not exist") != std::string::npos,
        "n1/peek failed because s3_note does not exist on n1");

  std::cout << (failures == 0 ? "ok" : "FAILED") << '\n';
  return failures == 0 ? 0 : 1;
}
