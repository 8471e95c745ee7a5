// taskgroup: RunNet, which runs a named net of the node: a remote net
// (task_group::add_remote_net) or any net made with workspace::create_net.
#include "ops/builtins.hpp"

#include "ops/net_run.hpp"
#include "ops/run_scope.hpp"

#include <taskgroup/net.hpp>
#include <taskgroup/workspace.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace {

namespace asio = boost::asio;

// Net `name` of `ws` or of its nearest parent that has one: a PRIVATE
// task's workspace (and a step's own) is a child of its node's.
std::shared_ptr<net_instance> find_named(const workspace& ws, std::string_view name) noexcept {
  for (const workspace* w = &ws; w != nullptr; w = w->parent()) {
    if (auto inst = w->shared_net(name)) return inst;
  }
  return nullptr;
}

error missing_net(const workspace& ws, const std::string& name) {
  return {errc::bad_argument, "no net " + quote(name) + " in workspace " + quote(ws.name()) + " or its parents"};
}

class run_net_kernel final : public op_kernel {
 public:
  run_net_kernel(workspace& ws, std::string name) : op_kernel(true), ws_(&ws), name_(std::move(name)) {}

  asio::awaitable<status> run_async() override {
    // Read before the first suspension, while it is this run's.
    const run_context* run = current_run;
    // Looked up at each run and held for its length: the net may have
    // been replaced or removed since the last one.
    std::shared_ptr<net_instance> inst = find_named(*ws_, name_);
    if (!inst) co_return missing_net(*ws_, name_);
    if (in_flight_ >= max_run_net_in_flight) {
      co_return fail(errc::op_failed, std::to_string(max_run_net_in_flight) + " runs of this op in flight (" +
                                          "taskgroup::max_run_net_in_flight): does net " + quote(name_) +
                                          " run itself?");
    }
    struct count {
      run_net_kernel& k;
      run_position here;
      count(run_net_kernel& kernel, const net_instance& inst) : k(kernel), here{&inst, 0, kernel.innermost_} {
        ++k.in_flight_;
        k.innermost_ = &here;
      }
      ~count() {
        --k.in_flight_;
        k.innermost_ = here.outer;
      }
      count(const count&) = delete;
      count& operator=(const count&) = delete;
    } guard(*this, *inst);
    co_return co_await run_net_at(*inst, &guard.here.at, run);
  }

  // Where its innermost run in flight stands (runs of one RunNet nest
  // only when a net runs itself).
  [[nodiscard]] std::string waiting_for() const override {
    if (innermost_ == nullptr) return {};
    const run_position& p = *innermost_;
    return "running net " + quote(name_) + ": " + op_waiting(*p.inst, p.at, detail::net_access::blocked(*p.inst, p.at));
  }

 private:
  struct run_position {
    const net_instance* inst;
    std::uint32_t at;  // the op it waits on
    run_position* outer;
  };
  workspace* ws_;  // the op's: it outlives its nets' kernels
  std::string name_;
  std::size_t in_flight_ = 0;          // on the node's strand, like every run
  run_position* innermost_ = nullptr;  // on the frame of the run it names
};

kernel_result run_net_factory(op_context& ctx) {
  TASKGROUP_TRY(std::string name, ctx.args().get<std::string>("net"));
  if (!find_named(ctx.ws(), name)) return missing_net(ctx.ws(), name);
  return std::unique_ptr<op_kernel>(std::make_unique<run_net_kernel>(ctx.ws(), std::move(name)));
}

}  // namespace

void add_net_ops(builtin_table& t) {
  using k = argument_kind;
  t.add(operator_schema("RunNet")
            .inputs(0)
            .outputs(0)
            .required_arg("net", k::string, "the name of a net of this workspace or a parent (a node's remote net)")
            .doc("runs the named net; async")
            .factory(&run_net_factory, true));
}

}  // namespace taskgroup::detail
