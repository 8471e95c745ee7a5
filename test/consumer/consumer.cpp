// A program that uses taskgroup the way a consumer does: built as a Meson
// subproject's consumer, with pkg-config, and with CMake's find_package
// (test/consumer/run.sh, installed.sh). It runs a group of one task, a
// counted loop of built-in operators, and checks its output; and it uses
// Asio's deprecated asio::experimental::as_tuple, which compiles only if
// taskgroup leaves the consumer's Asio alone (no BOOST_ASIO_NO_DEPRECATED
// forced on it).
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <tuple>

namespace tg = taskgroup;
using i64 = std::int64_t;

namespace {

// A timer completion through experimental::as_tuple: true when it fired
// without an error.
bool timer_through_as_tuple() {
  boost::asio::io_context io;
  boost::asio::steady_timer timer(io, std::chrono::milliseconds(1));
  bool fired = false;
  timer.async_wait(
      boost::asio::experimental::as_tuple([&](std::tuple<boost::system::error_code> r) { fired = !std::get<0>(r); }));
  io.run();
  return fired;
}

}  // namespace

int main() {
  if (!timer_through_as_tuple()) {
    std::cerr << "consumer: the timer did not complete through as_tuple\n";
    return 1;
  }

  // sum = 0; step = 3; then 14 iterations of sum = sum + step.
  tg::net init("init");
  init.op("ConstantFill", {}, {"sum"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"step"}, {{"value", i64{3}}});
  tg::net add("add");
  add.op("Add", {"sum", "step"}, {"sum"});
  tg::task count("count", tg::step("loop").add_net(add).iterations(14));
  count.init(init);
  auto sum = count.output<i64>("sum");

  tg::task_group group;
  if (auto added = group.add(count); !added) {
    std::cerr << "consumer: " << added.error().message << '\n';
    return 1;
  }
  tg::local_session session(1);
  boost::system::error_code ec;
  auto report = session.run(group, {}, ec);
  if (ec) {
    std::cerr << "consumer: " << report.failure->message << '\n';
    return 1;
  }
  auto got = sum.get();
  if (!got || got.value() != 42) {
    std::cerr << "consumer: sum is " << (got ? std::to_string(got.value()) : got.error().message) << ", not 42\n";
    return 1;
  }
  std::cout << "consumer: sum = " << got.value() << '\n';
  return 0;
}
