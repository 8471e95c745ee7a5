// A consumer of taskgroup-mpi (taskgroup::mpi in CMake): one group across
// the ranks of an MPI job, or all of it in this process when started
// alone. Node i goes to rank i modulo the job size; rank 0 checks every
// task's output.
#include <taskgroup/mpi_session.hpp>
#include <taskgroup/taskgroup.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace tg = taskgroup;
using i64 = std::int64_t;

int main(int argc, char** argv) {
  tg::mpi_environment mpi(argc, argv);
  tg::mpi_session session(1);

  // Task k on node "n<k>": sum = 0, then k + 1 iterations of sum = sum + 7.
  tg::task_group group;
  std::vector<tg::task_output<i64>> sums;
  for (int k = 0; k < 2; ++k) {
    tg::net init("init");
    init.op("ConstantFill", {}, {"sum"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"step"}, {{"value", i64{7}}});
    tg::net add("add");
    add.op("Add", {"sum", "step"}, {"sum"});
    tg::task t("count", tg::step("loop").add_net(add).iterations(k + 1));
    t.init(init);
    sums.push_back(t.output<i64>("sum"));
    if (auto added = group.add(t, tg::node("n" + std::to_string(k))); !added) {
      std::cerr << "consumer_mpi: " << added.error().message << '\n';
      return 1;
    }
  }
  boost::system::error_code ec;
  auto report = session.run(group, {}, ec);
  if (ec) {
    std::cerr << "consumer_mpi: rank " << mpi.rank() << ": " << report.failure->message << '\n';
    return 1;
  }
  if (!session.is_client()) return 0;
  for (int k = 0; k < 2; ++k) {
    auto got = sums[static_cast<std::size_t>(k)].get();
    if (!got || got.value() != 7 * (k + 1)) {
      std::cerr << "consumer_mpi: task on n" << k << ": wrong sum\n";
      return 1;
    }
  }
  std::cout << "consumer_mpi: sums = 7, 14 over " << mpi.size() << " rank(s)\n";
  return 0;
}
