// 05: one task group across the ranks of an MPI job.
//
//   mpirun -np 3 ./05_mpi
//
// Every rank runs this same program and builds the same group: a task on
// each of three nodes, `shard0` .. `shard2`, sums the squares of its shard
// of 1..300,000 and declares the sum (an int64) and its range (a string)
// as outputs. An `mpi_session` places the nodes on the ranks (node i on
// rank i modulo the job size), each rank runs its own nodes, and the
// outputs travel to rank 0, where the typed output handles read them as
// in a local run. With one rank (no mpirun) every node runs here.
//
// The same `co_await session.async_run(group)` as a local session: rank 0 gets
// the report of every task, other ranks the report of their own.
#include <taskgroup/mpi_session.hpp>
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace tg = taskgroup;
using i64 = std::int64_t;

namespace {

constexpr i64 total = 300'000;
constexpr int shards = 3;

// The net of shard k: sum of i*i over its range, as one inline operator.
tg::net shard_net(int k) {
  const i64 first = 1 + k * (total / shards);
  const i64 last = (k + 1) * (total / shards);
  tg::net n("sum_squares");
  n.lambda("SumSquares", {}, {"sum", "range"}, [first, last](tg::op_context& ctx) -> tg::status {
    i64 s = 0;
    for (i64 i = first; i <= last; ++i) s += i * i % 1'000'003;
    ctx.set_output(0, s);
    ctx.set_output(1, std::to_string(first) + ".." + std::to_string(last));
    return tg::ok();
  });
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  tg::mpi_environment mpi(argc, argv);  // first in, last out
  asio::io_context io;
  tg::mpi_session session(io.get_executor());

  tg::task_group group;
  std::vector<tg::task_output<i64>> sums;
  std::vector<tg::task_output<std::string>> ranges;
  for (int k = 0; k < shards; ++k) {
    tg::task t("sum", tg::step("sum").add_net(shard_net(k)));
    sums.push_back(t.output<i64>("sum"));
    ranges.push_back(t.output<std::string>("range"));
    if (!group.add(t, tg::node("shard" + std::to_string(k)))) return 1;
  }

  int status = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, r] = co_await session.async_run(group, asio::as_tuple(asio::use_awaitable));
        if (ec) {
          std::cerr << "rank " << session.rank() << ": " << r.failure->message << '\n';
          status = 1;
          co_return;
        }
        if (!session.is_client()) co_return;  // rank 0 prints
        auto where = session.placement(group).value();
        i64 expected = 0;
        for (i64 i = 1; i <= total; ++i) expected += i * i % 1'000'003;
        i64 sum = 0;
        for (int k = 0; k < shards; ++k) {
          const std::string n = "shard" + std::to_string(k);
          std::cout << n << " on rank " << where[n] << ": " << ranges[k].get().value() << " -> "
                    << sums[k].get().value() << '\n';
          sum += sums[k].get().value();
        }
        std::cout << "total " << sum << (sum == expected ? " (as computed here)" : " (WRONG)") << '\n';
        if (sum != expected) status = 1;
      },
      [](const std::exception_ptr& e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  return status;
}
