// Internal: the turns that runs take on a node whose workspace they share.
#pragma once

#include <taskgroup/error.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <memory>

namespace taskgroup::detail {

// Runs of groups with GLOBAL tasks on one node take turns: one at a time
// uses the node's workspace, the others wait in arrival order (a GLOBAL
// task's blobs are the node's, so two such runs at once would read and
// write each other's). Used on the node's strand only.
class node_turns : public std::enable_shared_from_this<node_turns> {
 public:
  // Released when destroyed: the holder of a turn.
  class turn {
   public:
    turn() = default;
    explicit turn(std::shared_ptr<node_turns> t) noexcept : turns_(std::move(t)) {}
    turn(turn&&) noexcept = default;
    turn& operator=(turn&& o) noexcept {
      if (this != &o) {
        if (turns_) turns_->release();
        turns_ = std::move(o.turns_);
      }
      return *this;
    }
    turn(const turn&) = delete;
    turn& operator=(const turn&) = delete;
    ~turn() {
      if (turns_) turns_->release();
    }

   private:
    std::shared_ptr<node_turns> turns_;
  };

  // Completes when the caller holds the node (at once when no run holds
  // it). Cancellation: a cancelled wait leaves the queue and completes
  // with `errc::cancelled`.
  boost::asio::awaitable<result<turn>> acquire();

 private:
  struct waiter {
    boost::asio::steady_timer timer;
    bool granted = false;
  };
  void release() noexcept;

  bool held_ = false;
  std::deque<waiter*> queue_;
};

}  // namespace taskgroup::detail
