// taskgroup: nodes and the cluster view.
//
// A node is a name (default `local`) plus free-form options; tasks are
// placed on nodes. In a session every node gets its own workspace and its
// own strand: tasks of one node share blobs, tasks of different nodes
// share nothing. A `cluster` lists node names in order of first use and
// merges their options, the first registration winning on a conflicting
// key (Caffe2 Cluster). There is no thread-local "current node": a node
// is named where a task is added.
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/operator.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace taskgroup {

/// A named placement for tasks, with options (e.g. resources).
class TASKGROUP_API node {
 public:
  /// The node `local`.
  node() = default;
  /// The node `name`, with `options` (Caffe2 Node kwargs).
  node(std::string name, arguments options = {})  // NOLINT(google-explicit-constructor)
      : name_(std::move(name)), options_(std::move(options)) {}
  node(const char* name) : name_(name) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const arguments& options() const noexcept { return options_; }

 private:
  std::string name_ = "local";
  arguments options_;
};

/// Node names in order of first use, with merged options. Registering and
/// looking up a name take constant time on average (a cluster of 10^5
/// nodes builds in linear time).
class TASKGROUP_API cluster {
 public:
  /// Registers `n`: a new name is appended; for a known name, options with
  /// new keys are added and conflicting keys keep the first value.
  void add(const node& n);

  /// Node names in order of first use.
  [[nodiscard]] const std::vector<std::string>& nodes() const noexcept { return names_; }
  /// The merged options of node `name` (empty when unknown).
  [[nodiscard]] const arguments& options(std::string_view name) const;
  [[nodiscard]] bool has(std::string_view name) const noexcept;
  [[nodiscard]] bool empty() const noexcept { return names_.empty(); }

 private:
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  [[nodiscard]] const arguments* find(std::string_view name) const noexcept;

  std::vector<std::string> names_;
  std::vector<arguments> options_;
  std::unordered_map<std::string, std::size_t, name_hash, std::equal_to<>> index_;  // name -> position
};

}  // namespace taskgroup
