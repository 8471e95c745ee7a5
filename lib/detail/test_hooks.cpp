#include "detail/test_hooks.hpp"

namespace taskgroup {

detail::driver_hooks& detail::test_driver_hooks() noexcept {
  static driver_hooks hooks;
  return hooks;
}

detail::step_hooks& detail::test_step_hooks() noexcept {
  thread_local step_hooks hooks;
  return hooks;
}

}  // namespace taskgroup
