// 03: producers and consumers through a queue blob, with a progress report.
//
// The Caffe2 pipeline pattern on one node:
//
//   local init : CreateQueue "queue", counters            (before all tasks)
//   produce x2 : loop 20 times { item = iter + 1; Enqueue; Sleep 1 ms }
//                task exit: CloseQueue                    (after both instances)
//   consume x3 : loop { Dequeue -> value, ok; stop_if(!ok); total += value }
//   report     : Print "consumed" every 5 ms, and once more at the end
//
// Everything runs on the node's strand. Enqueue waits while the queue is
// full and Dequeue while it is empty; both suspend the coroutine, so five
// loops interleave on one strand without blocking a thread.
//
// Design points:
// - `num_instances(n)` runs n copies of a task's step, each in its own
//   child workspace: the loop counters and `value`/`ok` are per instance,
//   while `queue`, `total` and `consumed` (made by the node's local init)
//   are found in the node workspace and shared.
// - A task's exit work runs once after all its instances, the natural place
//   to close the queue: CloseQueue lets consumers drain what is left, then
//   Dequeue answers ok = false.
// - The consumer loop uses the control helpers: `loop(name, body)` runs
//   until a stop marker fires; `stop_if(net)` evaluates the net (Not ok) and
//   stops the loop when its last output is true.
// - `group.report_step(step, node, interval)` runs a step beside the node's
//   tasks every interval, then once more after they finish, so the last
//   line always shows the final count.
//
// The run is started with the token form, `session.async_run(group, {},
// asio::use_future)`, on a session that owns its threads: the future's
// `get()` returns the report, or throws `boost::system::system_error` when
// the run failed.
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
namespace tg = taskgroup;
using namespace std::chrono_literals;
using i64 = std::int64_t;

int main() {
  constexpr i64 per_producer = 20;
  constexpr i64 producers = 2;
  constexpr i64 consumers = 3;

  // Collect what Print writes (and still show it).
  std::mutex mu;
  std::vector<std::string> progress;
  tg::set_print_sink([&](std::string_view line) {
    std::lock_guard lock(mu);
    progress.emplace_back(line);
    std::cout << line << '\n';
  });

  tg::task_group group(tg::workspace_type::global);

  // Node-level setup: what every task of the node shares.
  tg::net setup("setup");
  setup.op("CreateQueue", {}, {"queue"}, {{"capacity", i64{4}}})
      .op("ConstantFill", {}, {"one"}, {{"value", i64{1}}})
      .op("ConstantFill", {}, {"total"}, {{"value", i64{0}}})
      .op("ConstantFill", {}, {"consumed"}, {{"value", i64{0}}});
  group.local_init("local", setup);

  // Producers: a counted loop; `produce/iter` counts 0..19 in each instance.
  tg::net produce("produce_one");
  produce.op("Add", {tg::loop_iter_blob("produce"), "one"}, {"item"})
      .op("Enqueue", {"queue", "item"}, {})
      .op("Sleep", {}, {}, {{"ms", i64{1}}});
  tg::net close("close_queue");
  close.op("CloseQueue", {"queue"}, {});
  tg::task producer("produce", tg::loop("produce", per_producer, produce));
  producer.num_instances(producers).exit(close);

  // Consumers: an open loop ended by the queue's ok = false.
  tg::net take("take");
  take.op("Dequeue", {"queue"}, {"value", "ok"});
  tg::net drained("drained");
  drained.op("Not", {"ok"}, {"drained"});
  tg::net add("accumulate");
  add.op("Add", {"total", "value"}, {"total"}).op("Add", {"consumed", "one"}, {"consumed"});
  tg::task consumer("consume", tg::loop("consume", {take, tg::stop_if(drained), add}));
  consumer.num_instances(consumers);
  auto total = consumer.output<i64>("total");
  auto consumed = consumer.output<i64>("consumed");

  (void)group.add(producer).value();
  (void)group.add(consumer).value();

  // Progress: a report step on node `local` every 5 ms.
  tg::net show("show_progress");
  show.op("Print", {"consumed"}, {}, {{"prefix", std::string("progress: ")}});
  group.report_step(tg::step("progress").add_net(show), "local", 5ms);

  tg::local_session session(2);
  std::future<tg::run_report> done = session.async_run(group, {}, asio::use_future);
  tg::run_report report;
  try {
    report = done.get();
  } catch (const boost::system::system_error& e) {
    tg::set_print_sink({});
    std::cerr << "run failed: " << e.what() << '\n';
    return 1;
  }
  tg::set_print_sink({});  // back to stdout; `progress` is ours again

  for (const auto& t : report.tasks) {
    std::cout << t.name << ": " << tg::to_string(t.status) << ", " << t.iterations << " iterations\n";
  }
  const i64 expected_total = producers * per_producer * (per_producer + 1) / 2;
  std::cout << "total = " << total.get(report).value() << " (expected " << expected_total
            << "), consumed = " << consumed.get(report).value() << ", progress lines = " << progress.size() << '\n';

  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::cerr << "check failed: " << what << '\n';
      ++failures;
    }
  };
  check(report.ok(), "every task succeeded");
  check(total.get(report).value() == expected_total, "total");
  check(consumed.get(report).value() == producers * per_producer, "consumed");
  // At least one periodic report (the producers alone take 20 ms) and the final one.
  check(progress.size() >= 2, "the report step ran during the tasks");
  check(!progress.empty() && progress.back() == "progress: consumed: " + std::to_string(producers * per_producer),
        "the final report shows the final count");
  std::cout << (failures == 0 ? "ok" : "FAILED") << '\n';
  return failures == 0 ? 0 : 1;
}
