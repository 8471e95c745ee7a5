// A program that uses taskgroup as a Meson subproject.
#include <taskgroup/taskgroup.hpp>

#include <cstdint>
#include <iostream>

int main() {
  auto ws = taskgroup::workspace::make("consumer");
  taskgroup::net n("sum");
  n.op("ConstantFill", {}, {"a"}, {{"value", std::int64_t{40}}});
  n.op("ConstantFill", {}, {"b"}, {{"value", std::int64_t{2}}});
  n.op("Add", {"a", "b"}, {"c"});
  auto inst = ws->create_net(n);
  if (!inst) {
    std::cerr << inst.error().message << '\n';
    return 1;
  }
  if (auto st = inst.value()->run_sync(); !st) {
    std::cerr << st.error().message << '\n';
    return 1;
  }
  auto c = ws->read<std::int64_t>("c");
  if (!c || c.value() != 42) return 1;
  std::cout << "consumer: c = " << c.value() << '\n';
  return 0;
}
