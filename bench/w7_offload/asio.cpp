// Workload 7o, the Asio baseline of the per-op cost: from a strand, post a
// trivial function to a pool of 1 thread and post back to the strand, 1,000
// times in a row (what an offloaded op does, without the op).
#include "common/registry.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cstdint>
#include <future>
#include <utility>

namespace asio = boost::asio;

namespace {

constexpr std::int64_t trivial_runs = 1000;

struct round_trips {
  round_trips(asio::strand<asio::thread_pool::executor_type> s, asio::thread_pool::executor_type c, std::int64_t n)
      : strand(std::move(s)), compute(std::move(c)), left(n) {}
  asio::strand<asio::thread_pool::executor_type> strand;
  asio::thread_pool::executor_type compute;
  std::int64_t left;
  std::int64_t value = 0;
  std::promise<void> done;

  void next() {
    if (left-- == 0) {
      done.set_value();
      return;
    }
    asio::post(compute, [this] {
      value = 1;
      asio::post(strand, [this] { next(); });
    });
  }
};

const tgbench::add_contender post_round_trip{{
    .workload = "w7_offload_op",
    .name = "asio_post",
    .what = "asio::post to thread_pool(1) and back to a strand of another thread_pool(1), in a row",
    .units_per_iteration = static_cast<double>(trivial_runs),
    .fn =
        [](benchmark::State& state) {
          asio::thread_pool io(1);
          asio::thread_pool compute(1);
          for (auto _ : state) {
            round_trips r(asio::make_strand(io.get_executor()), compute.get_executor(), trivial_runs);
            auto f = r.done.get_future();
            asio::post(r.strand, [&r] { r.next(); });
            f.wait();
            benchmark::DoNotOptimize(r.value);
          }
        },
}};

}  // namespace
