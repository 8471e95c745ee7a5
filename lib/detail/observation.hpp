// Internal: a run's observer as the layers that emit its events hold it.
#pragma once

#include <taskgroup/run_observer.hpp>

namespace taskgroup::detail {

/// A run's observer as the engine holds it: the observer, the kinds of
/// events it asked for (`run_observer::interests`, read once when the run
/// started: none without an observer), and where the events happen.
struct observation {
  run_observer* observer = nullptr;
  observe kinds = observe::none;
  event_source at{};
};
/// The observation of a run without an observer.
inline constexpr observation no_observation{};

/// `o` asked once what it wants, for events at `at` (no observation when
/// `o` is null).
inline observation observe_with(run_observer* o, event_source at = {}) {
  if (o == nullptr) return no_observation;
  return observation{o, o->interests(), at};
}

}  // namespace taskgroup::detail
