// An op library with an op that holds its thread: Block sleeps the calling
// thread for `ms` milliseconds (a stand-in for a blocking call or a long
// computation that never yields), so that a node's strand cannot answer
// while it runs.
#include <taskgroup/op_library.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace tg = taskgroup;

namespace {

constexpr std::int64_t max_block_ms = 60'000;

tg::result<std::unique_ptr<tg::op_kernel>> block_factory(tg::op_context& ctx) {
  TASKGROUP_TRY(std::int64_t ms, ctx.args().get_or<std::int64_t>("ms", 0));
  if (ms < 0 || ms > max_block_ms) {
    return tg::fail(tg::errc::bad_argument,
                    "argument \"ms\": " + std::to_string(ms) + " is not within 0.." + std::to_string(max_block_ms));
  }
  return tg::make_kernel([ms]() -> tg::status {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return tg::ok();
  });
}

}  // namespace

TASKGROUP_OP_LIBRARY(registry) {
  TASKGROUP_TRY(registry.add(tg::operator_schema("Block")
                                 .inputs(0)
                                 .outputs(0)
                                 .arg_with_default("ms", std::int64_t{0}, "how long to hold the thread (0 to 60000)")
                                 .doc("sleeps the calling thread for `ms` milliseconds")
                                 .factory(block_factory)));
  return tg::ok();
}
