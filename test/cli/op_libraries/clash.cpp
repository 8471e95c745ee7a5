// An op library that registers Lower, then Add, a built-in's type: loading
// it is refused naming "Add", and Lower must not be registered either (all
// or nothing).
#include <taskgroup/op_library.hpp>

TASKGROUP_OP_LIBRARY(registry) {
  auto copy = [](taskgroup::op_context& ctx) -> taskgroup::status {
    ctx.set_output(0, ctx.input<std::string>(0));
    return taskgroup::ok();
  };
  TASKGROUP_TRY(registry.add(taskgroup::operator_schema("Lower").inputs(1).outputs(1).sync(copy)));
  return registry.add(taskgroup::operator_schema("Add").inputs(2).outputs(1).sync(copy));
}
