// The list an execution context keeps of the objects that must hear of its
// end (session/context_watch.hpp): an Asio service of the context, destroyed
// after every handler of the context is gone.
#include "session/context_watch.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace taskgroup::detail {

namespace {

namespace asio = boost::asio;

class context_watch final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;

  explicit context_watch(asio::execution_context& ctx) : service(ctx) {}

  context_watch(const context_watch&) = delete;
  context_watch& operator=(const context_watch&) = delete;

  // Services are destroyed newest first, each after all of them have shut
  // down: this one is made after the strand service whose strands its
  // watchers hold (a session makes its first strand before it asks to be
  // watched), so that service still exists here, while no handler of the
  // context is left to hold a watcher's strand.
  ~context_watch() override {
    std::vector<watcher> now;
    {
      std::lock_guard lock(mutex_);
      now.swap(watchers_);
    }
    for (const watcher& w : now) {
      if (auto owner = w.owner.lock()) w.gone(owner.get());
    }
  }

  void add(std::weak_ptr<void> owner, void (*gone)(void*) noexcept) {
    std::lock_guard lock(mutex_);
    // Watchers that died are dropped whenever the list doubles: a context
    // that sees many short-lived sessions keeps a list as long as the
    // live ones, at a constant cost per watcher.
    if (watchers_.size() >= prune_at_) {
      std::erase_if(watchers_, [](const watcher& w) { return w.owner.expired(); });
      prune_at_ = std::max<std::size_t>(16, 2 * watchers_.size());
    }
    watchers_.push_back(watcher{std::move(owner), gone});
  }

 private:
  struct watcher {
    std::weak_ptr<void> owner;
    void (*gone)(void*) noexcept;
  };

  // Nothing to do at shutdown: the handlers that the context destroys then
  // may still hold the watchers' strands.
  void shutdown() override {}

  std::mutex mutex_;
  std::vector<watcher> watchers_;
  std::size_t prune_at_ = 16;
};

asio::execution_context::id context_watch::id;

}  // namespace

void watch_context(const asio::any_io_executor& ex, std::weak_ptr<void> owner, void (*gone)(void*) noexcept) {
  asio::execution_context& ctx = asio::query(ex, asio::execution::context);
  asio::use_service<context_watch>(ctx).add(std::move(owner), gone);
}

}  // namespace taskgroup::detail
