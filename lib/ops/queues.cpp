// taskgroup: the built-in queue operators (CreateQueue, Enqueue, Dequeue,
// CloseQueue); Enqueue and Dequeue are asynchronous.
#include "ops/queues.hpp"

#include "ops/builtins.hpp"
#include "ops/net_run.hpp"

#include <taskgroup/net.hpp>
#include <taskgroup/queue.hpp>

#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

[[gnu::cold]] error queue_input_error(const op_context& ctx, std::size_t i) {
  if (ctx.input_blob(i).holds<queue_ptr>()) return {errc::blob_empty, input_where(ctx, i) + "the queue blob is null"};
  return input_type_error(ctx, i, "queue");
}

kernel_result create_queue_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t capacity, ctx.args().get<std::int64_t>("capacity"));
  if (capacity < 1) {
    return fail(errc::bad_argument,
                "argument " + quote("capacity") + " must be at least 1, got " + std::to_string(capacity));
  }
  blob* out = &ctx.output_blob(0);
  const auto cap = static_cast<std::size_t>(capacity);
  return make_kernel([out, cap]() -> status {
    out->set(std::make_shared<blob_queue>(cap));
    return ok();
  });
}

// A wait on the queue of input 0 that ended in an error (cancelled, or
// the queue closed): the error names the queue's blob.
[[gnu::cold]] error queue_wait_error(const op_context& ctx, const error& e) {
  return {e.code, input_where(ctx, 0) + e.message};
}

// What a pending Enqueue or Dequeue waits for (op_kernel::waiting_for),
// in the words of its cancellation.
std::string queue_wait(const op_context& ctx, const char* what) {
  const queue_ptr* q = ctx.input_blob(0).try_get<queue_ptr>();
  std::string out = input_where(ctx, 0) + "waiting for " + what;
  if (q != nullptr && *q) out += ": " + (*q)->describe();
  return out;
}

class enqueue_kernel final : public op_kernel {
 public:
  explicit enqueue_kernel(const op_context& ctx) noexcept
      : op_kernel(true), ctx_(&ctx), queue_(&ctx.input_blob(0)), value_(&ctx.input_blob(1)) {}

  asio::awaitable<status> run_async() override {
    const queue_ptr* qp = queue_->try_get<queue_ptr>();
    if (qp == nullptr || !*qp) co_return queue_input_error(*ctx_, 0);
    // Our own reference: the queue outlives the wait even if its blob is
    // overwritten meanwhile.
    queue_ptr q = *qp;
    if (!value_->has_value()) co_return empty_input_error(*ctx_, 1);
    result<blob> copy = value_->clone();
    if (!copy) co_return error(copy.error().code, input_where(*ctx_, 1) + copy.error().message);
    status st = co_await q->push(std::move(copy).value());
    if (!st) co_return queue_wait_error(*ctx_, st.error());
    co_return ok();
  }

  [[nodiscard]] std::string waiting_for() const override { return queue_wait(*ctx_, "room"); }

 private:
  const op_context* ctx_;
  const blob* queue_;
  const blob* value_;
};

class dequeue_kernel final : public op_kernel {
 public:
  explicit dequeue_kernel(const op_context& ctx) noexcept
      : op_kernel(true),
        ctx_(&ctx),
        queue_(&ctx.input_blob(0)),
        value_(&ctx.output_blob(0)),
        status_(&ctx.output_blob(1)) {}

  asio::awaitable<status> run_async() override {
    const queue_ptr* qp = queue_->try_get<queue_ptr>();
    if (qp == nullptr || !*qp) co_return queue_input_error(*ctx_, 0);
    queue_ptr q = *qp;  // see Enqueue
    result<std::optional<blob>> item = co_await q->pop();
    if (!item) co_return queue_wait_error(*ctx_, item.error());
    if (item.value()) {
      *value_ = std::move(*item.value());
      status_->set(true);
    } else {  // closed and drained: the value output is left alone
      status_->set(false);
    }
    co_return ok();
  }

  [[nodiscard]] std::string waiting_for() const override { return queue_wait(*ctx_, "an item"); }

  // The queue it takes from now; null when its input holds none.
  [[nodiscard]] const blob_queue* queue() const noexcept {
    const queue_ptr* q = queue_->try_get<queue_ptr>();
    return q != nullptr ? q->get() : nullptr;
  }

 private:
  const op_context* ctx_;
  const blob* queue_;
  blob* value_;
  blob* status_;
};

kernel_result close_queue_factory(op_context& ctx) {
  const blob* in = &ctx.input_blob(0);
  const op_context* c = &ctx;
  return make_kernel([in, c]() -> status {
    const queue_ptr* q = in->try_get<queue_ptr>();
    if (q == nullptr || !*q) return queue_input_error(*c, 0);
    (*q)->close();
    return ok();
  });
}

}  // namespace

bool may_feed_queues(const op_def& d) {
  if (d.inline_schema) return true;
  return d.type == "Enqueue" || d.type == "CloseQueue" || d.type == "RunNet" || !is_builtin_type(d.type);
}

bool starved(const net_instance& inst, std::size_t i, const std::uint32_t* feeders) noexcept {
  if (feeders == nullptr || *feeders != 0) return false;
  const auto* k = dynamic_cast<const dequeue_kernel*>(&net_access::kernel(inst, i));
  if (k == nullptr) return false;
  const blob_queue* q = k->queue();
  return q != nullptr && q->size() == 0 && !q->closed();
}

void add_queue_ops(builtin_table& t) {
  using k = argument_kind;
  t.add(operator_schema("CreateQueue")
            .inputs(0)
            .outputs(1)
            .required_arg("capacity", k::int64, "most values held (at least 1)")
            .doc("output = a new bounded queue")
            .factory(&create_queue_factory));
  t.add(operator_schema("Enqueue")
            .inputs(2)
            .outputs(0)
            .doc("pushes a copy of input 1; waits while full; asynchronous")
            .factory([](op_context& ctx)
                         -> kernel_result { return std::unique_ptr<op_kernel>(std::make_unique<enqueue_kernel>(ctx)); },
                     /*async=*/true));
  t.add(operator_schema("Dequeue")
            .inputs(1)
            .outputs(2)
            .doc("pops into output 0 with output 1 = true; output 1 = false once closed and drained; asynchronous")
            .factory([](op_context& ctx)
                         -> kernel_result { return std::unique_ptr<op_kernel>(std::make_unique<dequeue_kernel>(ctx)); },
                     /*async=*/true));
  t.add(operator_schema("CloseQueue").inputs(1).outputs(0).doc("closes the queue").factory(&close_queue_factory));
}

}  // namespace taskgroup::detail
