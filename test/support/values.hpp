// Test harness: a user type with a codec, and a net that writes a value.
#pragma once

#include <taskgroup/codec.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/operator.hpp>

#include <string>

namespace taskgroup::test {

/// A user type that the built-in codecs do not know.
struct point {
  double x = 0;
  double y = 0;
};

/// Registers the codec of `point` (tag "point") in `reg`.
inline status add_point(codec_registry& reg) {
  return reg.add<point>(
      "point",
      [](const point& p, byte_writer& w) {
        w.f64(p.x);
        w.f64(p.y);
      },
      [](byte_reader& r) -> result<point> {
        TASKGROUP_TRY(auto x, r.f64());
        TASKGROUP_TRY(auto y, r.f64());
        return point{x, y};
      });
}

/// A net of one inline op writing `value` to `blob`.
template <class T>
net put(const std::string& name, const std::string& blob, T value) {
  net n(name);
  n.lambda("Put", {}, {blob}, [value](op_context& ctx) -> status {
    ctx.set_output(0, value);
    return ok();
  });
  return n;
}

}  // namespace taskgroup::test
