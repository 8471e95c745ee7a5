// Tests of the bounded blob queue (include/taskgroup/queue.hpp) and of the
// queue operators driving it from nets.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/queue.hpp>
#include <taskgroup/workspace.hpp>

#include <catch2/catch.hpp>

#include "support/checks.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace taskgroup;
using test::message_of;
using test::require_error;

using i64 = std::int64_t;

namespace {

using pop_result = result<std::optional<blob>>;

// Rethrows an exception escaping a spawned coroutine out of io_context::run.
void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

blob int_blob(i64 v) { return blob(v); }

// Spawns a coroutine storing the outcome of `q->push(value)` in `out`.
void spawn_push(asio::io_context& io, const queue_ptr& q, i64 value, std::optional<status>& out) {
  asio::co_spawn(
      io, [q, value, &out]() -> asio::awaitable<void> { out = co_await q->push(int_blob(value)); }, rethrow);
}

// Spawns a coroutine storing the outcome of `q->pop()` in `out`.
void spawn_pop(asio::io_context& io, const queue_ptr& q, std::optional<pop_result>& out) {
  asio::co_spawn(
      io, [q, &out]() -> asio::awaitable<void> { out = co_await q->pop(); }, rethrow);
}

}  // namespace

TEST_CASE("Several producers and several consumers on one io_context move every item exactly once", "[queue]") {
  constexpr int producers = 4;
  constexpr int consumers = 3;
  constexpr i64 per_producer = 500;
  constexpr i64 total = producers * per_producer;

  asio::io_context io;
  auto q = std::make_shared<blob_queue>(3);
  int producers_left = producers;
  int failures = 0;
  std::vector<i64> sums(consumers, 0);
  std::vector<i64> counts(consumers, 0);
  bool in_order = true;  // each consumer sees each producer's items in order

  for (int p = 0; p < producers; ++p) {
    asio::co_spawn(
        io,
        [&, p]() -> asio::awaitable<void> {
          for (i64 i = 1; i <= per_producer; ++i) {
            status st = co_await q->push(int_blob(p * per_producer + i));
            if (!st) {
              ++failures;
              break;
            }
          }
          if (--producers_left == 0) q->close();
        },
        rethrow);
  }
  for (int c = 0; c < consumers; ++c) {
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          std::vector<i64> last(producers, 0);
          for (;;) {
            pop_result r = co_await q->pop();
            if (!r) {
              ++failures;
              co_return;
            }
            if (!r.value()) co_return;  // closed and drained
            const i64 v = r.value()->as<i64>();
            const auto p = static_cast<std::size_t>((v - 1) / per_producer);
            in_order = in_order && v > last[p];
            last[p] = v;
            sums[static_cast<std::size_t>(c)] += v;
            ++counts[static_cast<std::size_t>(c)];
          }
        },
        rethrow);
  }
  io.run();

  CHECK(failures == 0);
  CHECK(in_order);
  i64 sum = 0, count = 0;
  for (int c = 0; c < consumers; ++c) {
    sum += sums[static_cast<std::size_t>(c)];
    count += counts[static_cast<std::size_t>(c)];
  }
  CHECK(count == total);
  CHECK(sum == total * (total + 1) / 2);
  CHECK(q->size() == 0);
  CHECK(q->closed());
}

TEST_CASE("Several producer and consumer nets move every item through Enqueue and Dequeue", "[queue][builtin_ops]") {
  constexpr int producers = 3;
  constexpr int consumers = 2;
  constexpr i64 per_producer = 200;
  constexpr i64 total = producers * per_producer;

  auto ws = workspace::make("pipeline");
  net create("create");
  create.op("CreateQueue", {}, {"q"}, {{"capacity", i64{2}}});
  REQUIRE(ws->create_net(create).value()->run_sync());
  net closing("close");
  closing.op("CloseQueue", {"q"}, {});
  net_instance* closer = ws->create_net(closing).value();

  std::vector<net_instance*> producer_nets, consumer_nets;
  for (int p = 0; p < producers; ++p) {
    const std::string v = "value_" + std::to_string(p);
    ws->set(v, i64{0});
    net n("producer_" + std::to_string(p));
    n.op("Enqueue", {"q", v}, {});
    producer_nets.push_back(ws->create_net(n).value());
  }
  for (int c = 0; c < consumers; ++c) {
    const std::string s = std::to_string(c);
    net n("consumer_" + s);
    n.op("Dequeue", {"q"}, {"item_" + s, "ok_" + s});
    consumer_nets.push_back(ws->create_net(n).value());
  }

  asio::io_context io;
  int producers_left = producers;
  std::vector<std::string> failures;
  i64 sum = 0, count = 0;
  for (int p = 0; p < producers; ++p) {
    asio::co_spawn(
        io,
        [&, p]() -> asio::awaitable<void> {
          const std::string v = "value_" + std::to_string(p);
          for (i64 i = 1; i <= per_producer; ++i) {
            ws->set(v, p * per_producer + i);
            status st = co_await producer_nets[static_cast<std::size_t>(p)]->run();
            if (!st) {
              failures.push_back(message_of(st));
              break;
            }
          }
          if (--producers_left == 0) {
            if (status st = closer->run_sync(); !st) failures.push_back(message_of(st));
          }
        },
        rethrow);
  }
  for (int c = 0; c < consumers; ++c) {
    asio::co_spawn(
        io,
        [&, c]() -> asio::awaitable<void> {
          const std::string s = std::to_string(c);
          for (;;) {
            status st = co_await consumer_nets[static_cast<std::size_t>(c)]->run();
            if (!st) {
              failures.push_back(message_of(st));
              co_return;
            }
            if (!ws->read<bool>("ok_" + s).value()) co_return;
            sum += ws->read<i64>("item_" + s).value();
            ++count;
          }
        },
        rethrow);
  }
  io.run();

  CHECK(failures.empty());
  CHECK(count == total);
  CHECK(sum == total * (total + 1) / 2);
}

TEST_CASE("push waits while the queue is full and resumes after a pop", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(2);
  blob one = int_blob(1), two = int_blob(2);
  REQUIRE(q->try_push(one));
  REQUIRE(q->try_push(two));

  std::optional<status> pushed;
  spawn_push(io, q, 3, pushed);
  io.poll();
  CHECK_FALSE(pushed.has_value());
  CHECK(q->size() == 2);

  auto first = q->try_pop();
  REQUIRE(first.has_value());
  CHECK(first->as<i64>() == 1);
  io.run();
  REQUIRE(pushed.has_value());
  CHECK(pushed->has_value());
  CHECK(q->size() == 2);
  CHECK(q->try_pop()->as<i64>() == 2);
  CHECK(q->try_pop()->as<i64>() == 3);
}

TEST_CASE("pop waits while the queue is empty and takes values in FIFO order", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(4);
  std::optional<pop_result> popped;
  spawn_pop(io, q, popped);
  io.poll();
  CHECK_FALSE(popped.has_value());

  std::optional<status> a, b;
  spawn_push(io, q, 10, a);
  spawn_push(io, q, 20, b);
  io.run();
  REQUIRE(popped.has_value());
  REQUIRE(popped->has_value());
  REQUIRE(popped->value().has_value());
  CHECK(popped->value()->as<i64>() == 10);
  CHECK(q->size() == 1);
  CHECK(q->try_pop()->as<i64>() == 20);
}

TEST_CASE("close wakes waiting consumers, which complete with no value", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(1);
  std::vector<std::optional<pop_result>> popped(3);
  for (auto& p : popped) spawn_pop(io, q, p);
  io.poll();
  for (auto& p : popped) CHECK_FALSE(p.has_value());

  q->close();
  io.run();  // returns: nobody is left waiting
  for (auto& p : popped) {
    REQUIRE(p.has_value());
    REQUIRE(p->has_value());
    CHECK_FALSE(p->value().has_value());
  }
}

TEST_CASE("close lets consumers drain the remaining values first", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(3);
  for (i64 v : {1, 2}) {
    blob b = int_blob(v);
    REQUIRE(q->try_push(b));
  }
  q->close();
  std::vector<std::optional<pop_result>> popped(3);
  for (auto& p : popped) spawn_pop(io, q, p);
  io.run();
  std::vector<i64> got;
  int none = 0;
  for (auto& p : popped) {
    REQUIRE(p.has_value());
    REQUIRE(p->has_value());
    if (p->value()) {
      got.push_back(p->value()->as<i64>());
    } else {
      ++none;
    }
  }
  CHECK(got == std::vector<i64>{1, 2});
  CHECK(none == 1);
}

TEST_CASE("push after close fails with errc::queue_closed, also for a push waiting while full", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(1);
  blob first = int_blob(1);
  REQUIRE(q->try_push(first));

  std::optional<status> waiting;
  spawn_push(io, q, 2, waiting);
  io.poll();
  CHECK_FALSE(waiting.has_value());

  q->close();
  std::optional<status> late;
  spawn_push(io, q, 3, late);
  io.run();
  for (auto* st : {&waiting, &late}) {
    REQUIRE(st->has_value());
    REQUIRE_FALSE(**st);
    CHECK((*st)->error().code == errc::queue_closed);
    CHECK((*st)->error().message == "the queue is closed");
  }
  CHECK(q->size() == 1);
  blob b = int_blob(4);
  CHECK_FALSE(q->try_push(b));
  CHECK(b.has_value());  // not consumed by a failed try_push
}

TEST_CASE("A waiting pop cancelled from outside completes with errc::cancelled and leaves the queue usable",
          "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(1);
  asio::cancellation_signal signal;
  std::optional<pop_result> popped;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { popped = co_await q->pop(); },
      asio::bind_cancellation_slot(signal.slot(), rethrow));
  io.poll();
  CHECK_FALSE(popped.has_value());

  signal.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE(popped.has_value());
  REQUIRE_FALSE(popped->has_value());
  CHECK(popped->error().code == errc::cancelled);
  CHECK(popped->error().is_cancelled());

  CHECK(q->size() == 0);
  CHECK_FALSE(q->closed());
  blob b = int_blob(5);
  REQUIRE(q->try_push(b));  // nobody took it on behalf of the cancelled pop
  CHECK(q->size() == 1);
  CHECK(q->try_pop()->as<i64>() == 5);
}

TEST_CASE("A waiting push cancelled from outside completes with errc::cancelled and adds nothing", "[queue]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(1);
  blob first = int_blob(1);
  REQUIRE(q->try_push(first));

  asio::cancellation_signal signal;
  std::optional<status> pushed;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { pushed = co_await q->push(int_blob(2)); },
      asio::bind_cancellation_slot(signal.slot(), rethrow));
  io.poll();
  CHECK_FALSE(pushed.has_value());

  signal.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE(pushed.has_value());
  REQUIRE_FALSE(*pushed);
  CHECK(pushed->error().code == errc::cancelled);

  CHECK(q->size() == 1);
  CHECK(q->try_pop()->as<i64>() == 1);
  CHECK_FALSE(q->try_pop().has_value());
}

TEST_CASE("try_push and try_pop never wait", "[queue]") {
  blob_queue q(0);  // a capacity below 1 is raised to 1
  CHECK(q.capacity() == 1);
  CHECK_FALSE(q.try_pop().has_value());
  blob a = int_blob(1), b = int_blob(2);
  CHECK(q.try_push(a));
  CHECK_FALSE(a.has_value());  // moved into the queue
  CHECK_FALSE(q.try_push(b));  // full
  CHECK(b.has_value());
  CHECK(q.size() == 1);
  CHECK(q.try_pop()->as<i64>() == 1);
  CHECK(q.size() == 0);
}

TEST_CASE("close is idempotent and keeps queued values poppable", "[queue]") {
  blob_queue q(2);
  blob a = int_blob(1);
  REQUIRE(q.try_push(a));
  q.close();
  q.close();
  CHECK(q.closed());
  CHECK(q.size() == 1);
  CHECK(q.try_pop()->as<i64>() == 1);
  CHECK_FALSE(q.try_pop().has_value());
}

// A consumer that records what it pops until the queue is closed and
// drained (its state in the coroutine's parameters, not in a lambda's
// captures, which would die with the lambda).
asio::awaitable<void> consume_all(queue_ptr q, std::vector<i64>* out) {
  for (;;) {
    pop_result r = co_await q->pop();
    if (!r || !r.value()) co_return;
    out->push_back(*r.value()->try_get<i64>());
  }
}

// Pushes 0 .. n-1, letting the strand in after each, then closes.
asio::awaitable<void> produce_with_yields(queue_ptr q, i64 n, bool* all_pushed) {
  *all_pushed = true;
  for (i64 v = 0; v < n; ++v) {
    if (!co_await q->push(int_blob(v))) *all_pushed = false;
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  q->close();
}

TEST_CASE("waiting consumers are served in arrival order", "[queue][fairness]") {
  // Four consumers wait on one queue; a producer pushes 60 values, letting
  // the strand in after each. Each value goes to the consumer that has
  // waited longest, so the four take turns: 15 each, in order.
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(4);
  std::vector<std::vector<i64>> got(4);
  for (auto& out : got) asio::co_spawn(io, consume_all(q, &out), rethrow);
  bool all_pushed = false;
  asio::co_spawn(io, produce_with_yields(q, 60, &all_pushed), rethrow);
  io.run();
  CHECK(all_pushed);
  for (std::size_t c = 0; c < got.size(); ++c) {
    INFO("consumer " << c);
    REQUIRE(got[c].size() == 15);
    for (std::size_t k = 0; k < got[c].size(); ++k) CHECK(got[c][k] == static_cast<i64>(4 * k + c));
  }
}

TEST_CASE("a consumer cancelled after a value was handed to it gives the value back", "[queue][fairness]") {
  asio::io_context io;
  auto q = std::make_shared<blob_queue>(2);
  asio::cancellation_signal cancel_first;
  std::optional<pop_result> first, second;
  asio::co_spawn(io, q->pop(),
                 asio::bind_cancellation_slot(cancel_first.slot(), [&](std::exception_ptr e, pop_result r) {
                   rethrow(e);
                   first = std::move(r);
                 }));
  asio::co_spawn(io, q->pop(), [&](std::exception_ptr e, pop_result r) {
    rethrow(e);
    second = std::move(r);
  });
  io.poll();  // both wait, the first one first
  // On the io_context's thread, so that the cancellation reaches the first
  // consumer before it resumes with the value handed to it.
  asio::post(io, [&] {
    blob v = int_blob(7);
    REQUIRE(q->try_push(v));
    cancel_first.emit(asio::cancellation_type::terminal);
  });
  io.poll();
  REQUIRE(first);
  REQUIRE_FALSE(*first);
  CHECK(first->error().code == errc::cancelled);
  REQUIRE(second);
  REQUIRE(*second);
  REQUIRE(second->value());
  CHECK(*second->value()->try_get<i64>() == 7);
  CHECK(q->size() == 0);
}
