// taskgroup: workspaces, the stores of named blobs and instantiated nets.
//
// Semantics follow Caffe2 (docs/semantics.md, "Workspaces"): lookup goes
// local blobs, then forwarded aliases, then the parent chain; `create`
// returns the visible blob (even the parent's) and only creates a local one
// when the name is visible nowhere; `create_local` always creates locally
// and shadows; `remove` removes local blobs only. Nets are never inherited.
//
// Threading: strand-bound. A workspace has no lock; every coroutine that
// touches it runs on its node's strand (one strand per node in a session).
// Using one workspace from two threads at once is a data race.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup {

class net;
class net_instance;
class operator_registry;
class workspace;

namespace detail {
class offload_gate;
offload_gate& gate_of(workspace& ws);
offload_gate* find_gate(const workspace& ws) noexcept;
struct workspace_reuse;
}  // namespace detail

/// A store of named blobs and instantiated nets, optionally a child of a
/// parent workspace (which it keeps alive).
class TASKGROUP_API workspace : public std::enable_shared_from_this<workspace> {
 public:
  /// A root workspace (or a child of `parent` when given). `name` appears
  /// in error messages.
  explicit workspace(std::string name = "workspace", std::shared_ptr<workspace> parent = nullptr);
  ~workspace();
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;

  /// Makes a new root workspace.
  static std::shared_ptr<workspace> make(std::string name = "workspace");

  /// Makes a child workspace whose parent is this one. The child keeps
  /// this workspace alive. Requires this workspace to be owned by a
  /// `shared_ptr` (made by `make` or `create_child`).
  std::shared_ptr<workspace> create_child(std::string name);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] workspace* parent() const noexcept { return parent_.get(); }

  // --- blobs -------------------------------------------------------------

  /// The blob visible under `name` (local, forwarded, then parents), or null.
  [[nodiscard]] blob* find(std::string_view name) const noexcept;
  /// Same, sharing ownership: net instances hold blobs this way, so a
  /// removed blob stays valid for the nets already bound to it.
  [[nodiscard]] std::shared_ptr<blob> find_shared(std::string_view name) const noexcept;

  /// The blob visible under `name`. Errors: `errc::blob_not_found`
  /// (`workspace "w": blob "x" does not exist`).
  [[nodiscard]] result<blob*> get_blob(std::string_view name) const;

  /// The visible blob named `name`, or a new empty local one if the name
  /// is visible nowhere (Caffe2 CreateBlob).
  blob& create(std::string_view name);
  /// Same as `create`, sharing ownership.
  std::shared_ptr<blob> create_shared(std::string_view name);
  /// A local blob named `name`, created empty if there is none locally;
  /// shadows any parent blob of that name (Caffe2 CreateLocalBlob).
  blob& create_local(std::string_view name);

  /// Removes the local blob `name`; returns false when there is none.
  /// Parent blobs are never removed through a child.
  bool remove(std::string_view name);

  /// True when `name` is visible (local, forwarded or in a parent).
  [[nodiscard]] bool has(std::string_view name) const noexcept { return find(name) != nullptr; }

  /// Visible names: local (sorted), then forwarded, then the parent's
  /// list; a shadowed name appears more than once, as in Caffe2.
  [[nodiscard]] std::vector<std::string> blobs() const;
  /// Local names only, sorted.
  [[nodiscard]] std::vector<std::string> local_blobs() const;

  /// Makes `local_name` an alias of `other_name` in `other`, looked up
  /// after local blobs and before the parent. Errors: `errc::blob_not_found`
  /// when `other_name` is not visible in `other`.
  status forward(std::string local_name, const workspace& other, std::string_view other_name);

  /// The value of blob `name` as a `T`. Errors: `errc::blob_not_found`,
  /// `errc::blob_empty`, `errc::type_mismatch` (the message names the
  /// workspace, the blob, the expected and the actual type).
  template <class T>
  [[nodiscard]] result<T*> get(std::string_view name) const {
    TASKGROUP_TRY(blob * b, get_blob(name));
    if (T* p = b->try_get<T>()) return p;
    return typed_error(name, *b, type_name<T>());
  }

  /// A copy of the value of blob `name`; errors as `get`.
  template <class T>
  [[nodiscard]] result<T> read(std::string_view name) const {
    TASKGROUP_TRY(T * p, get<T>(name));
    return T(*p);
  }

  /// Stores `value` in the blob `create(name)` returns (so a visible parent
  /// blob is written, as an op output would be).
  template <class T>
  std::decay_t<T>& set(std::string_view name, T&& value) {
    return create(name).set(std::forward<T>(value));
  }

  // --- nets --------------------------------------------------------------

  /// Instantiates `n` here under its name, binding every op input and
  /// output once (inputs must exist; outputs are `create`d). Errors:
  /// `errc::net_exists` when the name is taken and `overwrite` is false;
  /// the net's binding errors (`net "n" op #2 (Add): input blob "x" does
  /// not exist`, unknown operator, arity, arguments).
  result<net_instance*> create_net(const net& n, bool overwrite = false);
  result<net_instance*> create_net(const net& n, const operator_registry& registry, bool overwrite = false);

  /// The local net instance named `name`, or null (nets are not inherited).
  [[nodiscard]] net_instance* find_net(std::string_view name) const noexcept;
  /// The same, shared: the instance stays valid while it is held, also
  /// after `remove_net` or an overwriting `create_net` (how `RunNet` holds
  /// the net it runs).
  [[nodiscard]] std::shared_ptr<net_instance> shared_net(std::string_view name) const noexcept;

  /// Removes the net instance `name` (a run of it in progress keeps its
  /// own reference, see `shared_net`); returns false when there is none.
  bool remove_net(std::string_view name);

  /// Names of the local net instances, sorted.
  [[nodiscard]] std::vector<std::string> nets() const;

  /// The instance of this very net object in this workspace, bound on first
  /// use and reused afterwards (the step runner's instances: a net listed at
  /// several places of a tree is one instance per workspace, with shared
  /// state). Kept apart from the named nets of `create_net`, so nets of
  /// different tasks that share a name never replace each other. Errors:
  /// the binding errors of `create_net`.
  result<net_instance*> instance_of(const net& n, const operator_registry& registry);

  // --- offload -----------------------------------------------------------

  /// Sets the executor that runs the offloaded kernels of this workspace's
  /// node (`operator_schema::offload`): its root workspace and every child
  /// share it. A session sets it on its node workspaces
  /// (`local_session::set_compute_executor`). Threading: strand-bound; set
  /// it while no offloaded op runs.
  void set_compute_executor(boost::asio::any_io_executor ex);
  /// That executor, or `default_compute_executor()` when none was set.
  [[nodiscard]] boost::asio::any_io_executor compute_executor() const;

 private:
  friend detail::offload_gate& detail::gate_of(workspace& ws);
  friend detail::offload_gate* detail::find_gate(const workspace& ws) noexcept;
  friend struct detail::workspace_reuse;

  // Drops every local net instance, forwarded blob and blob, nets first:
  // their kernels may refer to blobs and to this workspace.
  void clear() noexcept;

  [[nodiscard]] error typed_error(std::string_view name, const blob& b, const std::string& expected) const;
  [[nodiscard]] std::shared_ptr<blob> lookup(std::string_view name) const noexcept;

  struct keyed_instance {
    std::weak_ptr<const void> token;
    std::unique_ptr<net_instance> instance;
  };
  // What most workspaces never use (forwarded blobs, named nets, a second
  // bound net), made on first use: a PRIVATE task's workspace stays small.
  struct extras {
    std::map<std::string, std::shared_ptr<blob>, std::less<>> forwarded;
    std::map<std::string, std::shared_ptr<net_instance>, std::less<>> nets;
    std::map<const void*, keyed_instance> instances;
    // instance_of sweeps instances of dead nets once `instances` reaches
    // this size, then sets it to twice the survivors: amortized O(log n)
    // per new instance, at most about twice the live instances kept.
    std::size_t sweep_at = 64;
    // A root's: made by its first offloaded op or a compute executor set.
    std::unique_ptr<detail::offload_gate> gate;
  };
  extras& more();

  std::string name_;
  std::shared_ptr<workspace> parent_;
  std::map<std::string, std::shared_ptr<blob>, std::less<>> blobs_;
  // The first net bound here is kept inline, the others in `extras`: most
  // workspaces (a PRIVATE task's own, an instance's) bind one net.
  const void* first_key_ = nullptr;
  keyed_instance first_;
  std::unique_ptr<extras> more_;
};

}  // namespace taskgroup
