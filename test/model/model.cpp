// The reference model's step rules (docs/semantics.md, "Execution steps"):
// one execution of a step, its iterations, its stop checks, its report
// steps, and how a failure or a wait ends them.
#include "model/runner.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace taskgroup::model {

namespace {

// Tri-state stop check ("Stop blob checks"): stop, go on, or an error.
err stop_check(const bstep& b, bool& stop, const std::string& path) {
  stop = false;
  if (!b.stop || b.stop->t == value::type::none) return std::nullopt;
  if (b.stop->t != value::type::boolean) {
    return halt{halt::why::failed, errc::type_mismatch, path + ": stop blob expects a scalar boolean"};
  }
  stop = b.stop->b;
  return std::nullopt;
}

// What concurrent work cancelled from outside ends with: the error of its
// first cancelled branch (the branches end in their order) and how many
// more there were ("Step failure and cancellation").
halt and_more_cancelled(halt first, std::size_t more) {
  if (more != 0) {
    first.message +=
        " (and " + std::to_string(more) + " more concurrent " + (more == 1 ? "branch" : "branches") + " cancelled)";
  }
  return first;
}

}  // namespace

err runner::exec(const execution_step& s, std::shared_ptr<ws> w, bstep* b, const std::string& path) {
  emit(event::type::step_begin, s.name());
  bstep local;
  err e;
  if (s.create_workspace()) {
    w = ws::child(w);
    e = bind_nets(s, *w, local, path);
    b = &local;
  }
  std::uint64_t it = 0;
  if (!e) e = iterate(s, w, *b, it, path);
  // Report steps make their final run only after the iterations succeeded;
  // else they are cancelled, branches beside the iterations.
  if (!e) {
    e = reports(s, w, *b, path);
  } else if (e->w == halt::why::blocked) {
    const auto& kids = s.substeps();
    e = and_more_cancelled(*e, static_cast<std::size_t>(std::count_if(kids.begin(), kids.end(),
                                                                      [](const auto& c) { return c.run_every(); })));
  }
  emit(event::type::step_end, s.name(), it, ending_of(e));
  if (counted_ != nullptr && counted_->same(s)) iterations += it;
  return e;
}

err runner::start(const execution_step& s, const std::shared_ptr<ws>& w) {
  bstep b;
  if (!s.create_workspace()) {
    if (err e = bind_nets(s, *w, b, s.name())) return e;
  }
  return exec(s, w, &b, s.name());
}

// "Report steps": once, after its siblings.
err runner::report(const execution_step& r, std::shared_ptr<ws> w, bstep* b, const std::string& path) {
  emit(event::type::report_begin, r.name());
  err e = exec(r, std::move(w), b, path);
  emit(event::type::report_end, r.name(), 0, ending_of(e));
  return e;
}

// The first op that fails or waits ends the net; its message names the op.
err runner::run_net(const bnet& n, const std::string& path) {
  emit(event::type::net_begin, n.name);
  err e;
  for (std::size_t k = 0; k < n.ops.size() && !e; ++k) {
    op_end r = run_op(n.ops[k]);
    cancels_run = cancels_run || r.cancels_run;
    if (r.stop) {
      e = std::move(r.stop);
      e->message =
          path + "/net \"" + n.name + "\" op #" + std::to_string(k) + " (" + n.ops[k].def->type + "): " + e->message;
    }
  }
  emit(event::type::net_end, n.name, 0, ending_of(e));
  return e;
}

err runner::iterate(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b, std::uint64_t& it,
                    const std::string& path) {
  std::vector<std::size_t> rec;
  for (std::size_t i = 0; i < s.substeps().size(); ++i) {
    if (!s.substeps()[i].run_every()) rec.push_back(i);
  }
  const auto n = static_cast<std::size_t>(s.concurrent_instances());
  const bool concurrent = (s.concurrent_substeps() && rec.size() >= 2) || n > 1;
  const bool stop_mode = s.should_stop_blob().has_value();
  bool stop = false;
  for (std::int64_t i = 0;; ++i) {
    if (stop_mode ? (s.only_once() && i > 0) : i >= s.iterations().value_or(1)) return std::nullopt;
    ++it;  // an iteration counts once begun, also when it fails
    if (concurrent) {
      if (err e = concurrent_iteration(s, w, b, rec, path)) return e;
      if (err e = stop_check(b, stop, path)) return e;
      if (stop) return std::nullopt;
      continue;
    }
    for (const auto& bn : b.nets) {
      if (err e = run_net(bn, path)) return e;
      if (err e = stop_check(b, stop, path)) return e;
      if (stop) return std::nullopt;
    }
    for (std::size_t idx : rec) {
      const execution_step& c = s.substeps()[idx];
      if (err e = exec(c, w, &b.kids[idx], path + "/" + c.name())) return e;
      if (err e = stop_check(b, stop, path)) return e;
      if (stop) return std::nullopt;
    }
  }
}

// S x N children, child k runs recurring substep k mod S as instance k / S
// ("Sequential and concurrent iterations"), one after another here. A
// failure ends the iteration with its error: the children after it do not
// start. A child that waits does not stop the others; the iteration then
// waits too, until the run is cancelled.
err runner::concurrent_iteration(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b,
                                 const std::vector<std::size_t>& rec, const std::string& path) {
  if (rec.empty()) return std::nullopt;
  unordered();
  const auto n = static_cast<std::size_t>(s.concurrent_instances());
  std::vector<halt> waiting;
  for (std::size_t k = 0; k < rec.size() * n; ++k) {
    const std::size_t idx = rec[k % rec.size()];
    const execution_step& c = s.substeps()[idx];
    const std::string at = n > 1 ? path + "/instance " + std::to_string(k / rec.size()) : path;
    err e = exec(c, w, &b.kids[idx], at + "/" + c.name());
    if (!e) continue;
    if (e->w == halt::why::failed) return e;
    waiting.push_back(std::move(*e));
  }
  if (!waiting.empty()) return and_more_cancelled(waiting.front(), waiting.size() - 1);
  return std::nullopt;
}

err runner::reports(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b, const std::string& path) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < s.substeps().size(); ++i) {
    const execution_step& r = s.substeps()[i];
    if (!r.run_every()) continue;
    if (++count == 2) unordered();  // report substeps run concurrently with each other
    if (err e = report(r, w, &b.kids[i], path + "/" + r.name())) return e;
  }
  return std::nullopt;
}

}  // namespace taskgroup::model
