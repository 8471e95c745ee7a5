// 00: nets and operators on one workspace.
//
// A net is data: a list of operator definitions over named blobs. Binding
// it in a workspace resolves every blob once; running it calls synchronous
// operators inline and awaits only the asynchronous ones (here Enqueue,
// Dequeue and Sleep), so a producer and a consumer interleave on one
// io_context thread without blocking it.
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <iostream>

namespace asio = boost::asio;
using taskgroup::net;
using i64 = std::int64_t;

int main() {
  auto ws = taskgroup::workspace::make("example");

  net init("init");
  init.op("CreateQueue", {}, {"queue"}, {{"capacity", i64{2}}})
      .op("ConstantFill", {}, {"one"}, {{"value", i64{1}}})
      .op("ConstantFill", {}, {"item"}, {{"value", i64{0}}})
      .op("ConstantFill", {}, {"total"}, {{"value", i64{0}}})
      .op("ConstantFill", {}, {"received"}, {{"value", std::vector<i64>{}}});

  // The producer enqueues 1..5, then closes the queue.
  net produce("produce");
  for (int i = 0; i < 5; ++i) {
    produce.op("Add", {"item", "one"}, {"item"}).op("Enqueue", {"queue", "item"}, {});
  }
  produce.op("CloseQueue", {"queue"}, {});

  // The consumer dequeues until the queue is closed and drained.
  net consume("consume");
  consume.op("Dequeue", {"queue"}, {"value", "ok"}).op("Sleep", {}, {}, {{"ms", i64{1}}});
  net accumulate("accumulate");
  accumulate.op("Add", {"total", "value"}, {"total"}).op("Append", {"received", "value"}, {"received"});

  if (auto st = ws->create_net(init).value()->run_sync(); !st) {
    std::cerr << st.error().message << '\n';
    return 1;
  }
  auto* producer = ws->create_net(produce).value();
  auto* consumer = ws->create_net(consume).value();
  auto* adder = ws->create_net(accumulate).value();

  asio::io_context io;
  int failures = 0;
  auto report = [&](std::exception_ptr e, taskgroup::status st) {
    if (e || !st) {
      ++failures;
      if (!st) std::cerr << st.error().message << '\n';
    }
  };
  asio::co_spawn(io, producer->run(), report);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<taskgroup::status> {
        for (;;) {
          TASKGROUP_CO_TRY(co_await consumer->run());
          if (!ws->read<bool>("ok").value()) co_return taskgroup::ok();
          TASKGROUP_CO_TRY(adder->run_sync());
        }
      },
      report);
  io.run();

  net show("show");
  show.op("Print", {"total", "received"}, {});
  (void)ws->create_net(show).value()->run_sync();
  if (failures != 0 || ws->read<i64>("total").value() != 15) return 1;
  return 0;
}
