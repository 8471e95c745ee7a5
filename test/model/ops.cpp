// The reference model's values, events, binding and operators.
#include "model/interp.hpp"

#include <algorithm>
#include <variant>

namespace taskgroup::model {

std::string value::str() const {
  switch (t) {
    case type::none: return "(no value)";
    case type::i64: return std::to_string(i) + " (int64)";
    case type::boolean: return b ? "true (bool)" : "false (bool)";
    case type::other: return "(other type)";
  }
  return "?";
}

std::string event::str() const {
  static const char* const names[] = {"task_begin", "task_end", "step_begin",   "step_end",
                                      "net_begin",  "net_end",  "report_begin", "report_end"};
  std::string s = std::string(names[static_cast<int>(t)]) + " " + name;
  if (t == type::step_end || t == type::task_end) s += " iterations=" + std::to_string(iterations);
  if (t == type::step_end || t == type::task_end || t == type::net_end || t == type::report_end) {
    s += end == ending::ok ? " ok" : end == ending::failed ? " FAILED" : " CANCELLED";
  }
  return s;
}

err bind_nets(const execution_step& s, ws& w, bstep& b, const std::string& path) {
  b = bstep{};
  for (const auto& n : s.nets()) {
    bnet bn{n.name(), {}};
    for (std::size_t k = 0; k < n.ops().size(); ++k) {
      const op_def& d = n.ops()[k];
      bop o{&d, {}, {}};
      for (const auto& in : d.inputs) {
        auto v = w.find(in);
        if (!v)
          return halt{halt::why::failed, errc::blob_not_found,
                      path + "/net " + n.name() + " op #" + std::to_string(k) + ": non-existing input blob " + in};
        o.in.push_back(std::move(v));
      }
      for (const auto& out : d.outputs) o.out.push_back(w.create(out));
      bn.ops.push_back(std::move(o));
    }
    b.nets.push_back(std::move(bn));
  }
  b.kids.resize(s.substeps().size());
  for (std::size_t i = 0; i < s.substeps().size(); ++i) {
    const auto& c = s.substeps()[i];
    if (c.create_workspace()) continue;
    if (auto e = bind_nets(c, w, b.kids[i], path + "/" + c.name())) return e;
  }
  if (s.should_stop_blob()) {
    b.stop = w.find(*s.should_stop_blob());
    if (!b.stop)
      return halt{halt::why::failed, errc::blob_not_found,
                  path + ": stop blob " + *s.should_stop_blob() + " does not exist"};
  }
  return std::nullopt;
}

namespace {

value int_value(std::int64_t i) { return {value::type::i64, i, false}; }
value bool_value(bool b) { return {value::type::boolean, 0, b}; }

op_end failed(std::string text) { return {halt{halt::why::failed, errc::op_failed, std::move(text)}, false}; }
op_end waits(errc code, std::string text, bool cancels_run = false) {
  return {halt{halt::why::blocked, code, std::move(text)}, cancels_run};
}

// The ops without inputs or outputs of their own kind: Fail, Sleep and
// CancelRun; nullopt for any other type.
std::optional<op_end> run_effect(const bop& o) {
  const std::string& t = o.def->type;
  if (t == "Fail") {
    const argument* a = o.def->args.find("message");
    const auto* m = a != nullptr ? std::get_if<std::string>(a) : nullptr;
    return failed(m != nullptr ? *m : "Fail operator");
  }
  if (t == "Sleep") {
    // Only an hour-long Sleep is still waiting when the run ends.
    const argument* a = o.def->args.find("ms");
    const auto* ms = a != nullptr ? std::get_if<std::int64_t>(a) : nullptr;
    if (ms != nullptr && *ms == block_ms) return waits(errc::cancelled, wait_cancelled);
    return op_end{};
  }
  if (t == "CancelRun") return waits(errc::cancelled, cancel_run_text, true);
  return std::nullopt;
}

op_end run_logic(const bop& o) {
  const std::string& t = o.def->type;
  auto need = [&](value::type ty) {
    return std::all_of(o.in.begin(), o.in.end(), [&](const auto& v) { return v->t == ty; });
  };
  auto bad = [&] { return failed("op " + t + ": unsupported or mistyped inputs"); };
  value& out = *o.out[0];
  if (t == "Copy") {
    if (o.in.size() != 1 || o.in[0]->t == value::type::none) return bad();
    out = *o.in[0];
    return {};
  }
  if (t == "Not") {
    if (o.in.size() != 1 || !need(value::type::boolean)) return bad();
    out = bool_value(!o.in[0]->b);
    return {};
  }
  if (o.in.size() != 2) return bad();
  if (t == "Or" || t == "And") {
    if (!need(value::type::boolean)) return bad();
    out = bool_value(t == "Or" ? (o.in[0]->b || o.in[1]->b) : (o.in[0]->b && o.in[1]->b));
    return {};
  }
  if (!need(value::type::i64)) return bad();
  const std::int64_t x = o.in[0]->i, y = o.in[1]->i;
  if (t == "Add") {
    out = int_value(x + y);
  } else if (t == "Sub") {
    out = int_value(x - y);
  } else if (t == "Div") {
    if (y == 0) return failed("division by zero");  // the output keeps its value
    out = int_value(x / y);
  } else if (t == "GE") {
    out = bool_value(x >= y);
  } else if (t == "LT") {
    out = bool_value(x < y);
  } else if (t == "EQ") {
    out = bool_value(x == y);
  } else {
    return bad();
  }
  return {};
}

}  // namespace

op_end run_op(const bop& o) {
  if (auto e = run_effect(o)) return *e;
  const std::string& t = o.def->type;
  if (o.out.size() != 1) return failed("op " + t + ": unsupported or mistyped inputs");
  if (t == "ConstantFill") {
    const argument* a = o.def->args.find("value");
    if (const auto* i = a != nullptr ? std::get_if<std::int64_t>(a) : nullptr) {
      *o.out[0] = int_value(*i);
    } else if (const auto* b = a != nullptr ? std::get_if<bool>(a) : nullptr) {
      *o.out[0] = bool_value(*b);
    } else {
      return failed("op ConstantFill: unsupported value");
    }
    return {};
  }
  return run_logic(o);
}

}  // namespace taskgroup::model
