// An op library: two string operators, Upper and Repeat, registered at run
// time by `taskgroup run --load` (examples/plans/strings.json uses them) or
// by a program's `load_op_library`. Built by Meson as a shared module
// linked against the shared libtaskgroup (examples/meson.build).
//
// | type | inputs -> outputs | arguments | effect |
// |---|---|---|---|
// | Upper | 1 -> 1 | | the string input in ASCII upper case |
// | Repeat | 1 -> 1 | times (int64, default 2, 0..max_repeat_times), separator (string, default "") | the string input
// `times` times, joined by the separator; at most max_repeat_size bytes |
#include <taskgroup/op_library.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace tg = taskgroup;

namespace {

// Repeat's limits: both enforced (an op beyond them fails, naming the limit).
constexpr std::int64_t max_repeat_times = 1'000'000;
constexpr std::size_t max_repeat_size = std::size_t{16} << 20;  // 16 MiB
// Repeat's defaults: the schema's and the kernel's fallback.
constexpr std::int64_t default_times = 2;
constexpr std::string_view default_separator;

char upper(char c) noexcept { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

tg::result<std::unique_ptr<tg::op_kernel>> upper_factory(tg::op_context& ctx) {
  const tg::op_context* c = &ctx;
  return tg::make_kernel([c]() -> tg::status {
    TASKGROUP_TRY(const std::string* in, c->try_input<std::string>(0));
    std::string out(in->size(), '\0');
    for (std::size_t i = 0; i < in->size(); ++i) out[i] = upper((*in)[i]);
    c->set_output(0, std::move(out));
    return tg::ok();
  });
}

tg::result<std::unique_ptr<tg::op_kernel>> repeat_factory(tg::op_context& ctx) {
  TASKGROUP_TRY(std::int64_t times, ctx.args().get_or<std::int64_t>("times", default_times));
  TASKGROUP_TRY(std::string separator, ctx.args().get_or<std::string>("separator", std::string(default_separator)));
  if (times < 0 || times > max_repeat_times) {
    return tg::fail(tg::errc::bad_argument, "argument \"times\": " + std::to_string(times) + " is not within 0.." +
                                                std::to_string(max_repeat_times));
  }
  const tg::op_context* c = &ctx;
  return tg::make_kernel([c, n = static_cast<std::size_t>(times), separator = std::move(separator)]() -> tg::status {
    TASKGROUP_TRY(const std::string* in, c->try_input<std::string>(0));
    // Checked before anything is allocated. With each part at most
    // max_repeat_size and n at most max_repeat_times, the products stay far
    // below SIZE_MAX (2^24 * 2^20 * 2).
    const bool parts_fit = in->size() <= max_repeat_size && separator.size() <= max_repeat_size;
    const std::size_t size = n == 0 ? 0 : n * in->size() + (n - 1) * separator.size();
    if (!parts_fit || size > max_repeat_size) {
      return tg::fail(tg::errc::op_failed, "the result would be more than " + std::to_string(max_repeat_size) +
                                               " bytes (" + std::to_string(n) + " copies of " +
                                               std::to_string(in->size()) + " bytes)");
    }
    std::string out;
    out.reserve(size);
    for (std::size_t i = 0; i < n; ++i) {
      if (i != 0) out += separator;
      out += *in;
    }
    c->set_output(0, std::move(out));
    return tg::ok();
  });
}

}  // namespace

TASKGROUP_OP_LIBRARY(registry) {
  TASKGROUP_TRY(registry.add(tg::operator_schema("Upper")
                                 .inputs(1)
                                 .outputs(1)
                                 .doc("the string input in ASCII upper case")
                                 .factory(upper_factory)));
  TASKGROUP_TRY(
      registry.add(tg::operator_schema("Repeat")
                       .inputs(1)
                       .outputs(1)
                       .arg_with_default("times", default_times, "how many copies (0 to 1000000)")
                       .arg_with_default("separator", std::string(default_separator), "text between the copies")
                       .doc("the string input repeated, at most 16 MiB")
                       .factory(repeat_factory)));
  return tg::ok();
}
