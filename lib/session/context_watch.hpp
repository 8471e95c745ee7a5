// Internal: tells an object that the execution context it works on is
// going away, for objects that hold what belongs to the context (strands,
// which live in its strand service) and may outlive it.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace taskgroup::detail {

/// Calls `gone(owner)` when the execution context of `ex` is destroyed
/// (`io_context`'s destructor; `asio::thread_pool`'s, once its threads are
/// joined), if `owner` is alive then: after the context has shut down (its
/// handlers destroyed, none will run again) and before any of its services
/// is destroyed, so that `gone` may still release what belongs to them.
/// The context keeps only a weak reference: `owner` may die first without
/// saying so. `gone` runs on the thread that destroys the context and must
/// not throw. Threading: thread-safe.
void watch_context(const boost::asio::any_io_executor& ex, std::weak_ptr<void> owner, void (*gone)(void*) noexcept);

/// The same for `owner->context_gone()`.
template <class T>
void watch_context(const boost::asio::any_io_executor& ex, const std::shared_ptr<T>& owner) {
  watch_context(ex, std::weak_ptr<void>(owner), [](void* p) noexcept { static_cast<T*>(p)->context_gone(); });
}

}  // namespace taskgroup::detail
