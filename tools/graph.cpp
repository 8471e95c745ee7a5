#include "graph.hpp"
#include "results.hpp"

#include <taskgroup/control.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/task.hpp>

#include <cstdio>
#include <sstream>
#include <variant>
#include <vector>

namespace taskgroup::cli {

namespace {

constexpr std::size_t max_ops_shown = 24;
constexpr std::size_t max_line = 72;

std::string exact_number_text(double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

// A text value in quotes, as is: the label's own escaping shows its
// control characters (quote() would turn them into escapes first).
std::string quoted_text(const std::string& v) { return "\"" + v + "\""; }

std::string arg_text(const argument& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return exact_number_text(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quoted_text(v);
        } else {
          std::string out = "[";
          bool first = true;
          for (const auto& x : v) {
            if (!first) out += ", ";
            first = false;
            using E = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<E, std::int64_t>) {
              out += std::to_string(x);
            } else if constexpr (std::is_same_v<E, double>) {
              out += exact_number_text(x);
            } else if constexpr (std::is_same_v<E, std::string>) {
              out += quoted_text(x);
            } else {
              out += x ? "true" : "false";
            }
          }
          return out + "]";
        }
      },
      a);
}

std::string op_text(const op_def& op) {
  std::string s = op.type + "(" + join(op.inputs) + ")";
  if (!op.outputs.empty()) s += " -> " + join(op.outputs);
  if (!op.args.empty()) {
    std::vector<std::string> args;
    for (const auto& [k, v] : op.args) args.push_back(k + "=" + arg_text(v));
    s += " [" + join(args) + "]";
  }
  if (s.size() > max_line) {
    // Cut at a character's first byte: a cut UTF-8 sequence is no text.
    std::size_t cut = max_line - 3;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// A policy that retries, in short: its attempts (`taskgroup check` shows
// the rest).
std::string retry_text(const retry_policy& p) { return "retry x" + std::to_string(p.max_attempts); }

class dot_writer {
 public:
  std::ostringstream out;

  std::string fresh() { return "n" + std::to_string(next_++); }

  // A graph node; `lines` are escaped here and joined with `sep` ("\\n"
  // centred, "\\l" left-justified).
  std::string vertex(const std::vector<std::string>& lines, const std::string& attrs, const char* sep = "\\n") {
    std::string id = fresh();
    std::string label;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) label += sep;
      label += dot_escape(lines[i]);
    }
    if (std::string_view(sep) == "\\l") label += sep;
    out << indent_ << id << " [label=\"" << label << "\", " << attrs << "];\n";
    return id;
  }

  void edge(const std::string& from, const std::string& to, const std::string& label = {},
            const std::string& attrs = {}) {
    out << indent_ << from << " -> " << to;
    std::string a;
    if (!label.empty()) a = "label=\"" + dot_escape(label) + "\"";
    if (!attrs.empty()) a += (a.empty() ? "" : ", ") + attrs;
    if (!a.empty()) out << " [" << a << "]";
    out << ";\n";
  }

  std::string net_vertex(const net& n) {
    std::vector<std::string> lines{"net " + n.name()};
    const auto& ops = n.ops();
    for (std::size_t i = 0; i < ops.size() && i < max_ops_shown; ++i) lines.push_back(op_text(ops[i]));
    if (ops.size() > max_ops_shown) lines.push_back("... " + std::to_string(ops.size() - max_ops_shown) + " more ops");
    if (ops.empty()) lines.push_back("(no ops)");
    return vertex(lines, "shape=box, style=filled, fillcolor=\"#fff6d5\"", "\\l");
  }

  std::string step_vertex(const execution_step& s) {
    std::vector<std::string> lines{"step " + s.name()};
    std::vector<std::string> fields;
    if (s.iterations()) fields.push_back("num_iter " + std::to_string(*s.iterations()));
    if (s.should_stop_blob()) fields.push_back("stop when " + quote(*s.should_stop_blob()));
    if (s.only_once()) fields.push_back("only once");
    if (s.concurrent_substeps()) fields.push_back("concurrent substeps");
    if (s.run_every()) fields.push_back("every " + ms_text(*s.run_every()));
    if (s.create_workspace()) fields.push_back("own workspace");
    if (s.concurrent_instances() != 1) {
      fields.push_back(std::to_string(s.concurrent_instances()) + " concurrent instances");
    }
    if (s.timeout()) fields.push_back("timeout " + ms_text(*s.timeout()));
    if (s.retry().retries()) fields.push_back(retry_text(s.retry()));
    for (auto& f : fields) lines.push_back(std::move(f));
    const std::string id = vertex(lines, "shape=box, style=rounded");

    const bool numbered = s.nets().size() + s.substeps().size() > 1;
    std::size_t order = 0;
    for (const auto& n : s.nets()) {
      ++order;
      edge(id, net_vertex(n), numbered ? std::to_string(order) : std::string());
    }
    for (const auto& c : s.substeps()) {
      const std::string child = step_vertex(c);
      if (c.run_every()) {
        edge(id, child, "report", "style=dashed");
        continue;
      }
      ++order;
      if (s.concurrent_substeps()) {
        edge(id, child, "", "style=bold");
      } else {
        edge(id, child, numbered ? std::to_string(order) : std::string());
      }
    }
    return id;
  }

  // The items of a body (setup work) hung under `from`.
  void body_edges(const std::string& from, const body& b, const std::string& label) {
    for (const auto& item : b.items()) {
      if (const auto* n = std::get_if<net>(&item)) {
        edge(from, net_vertex(*n), label, "style=dotted");
      } else if (const auto* s = std::get_if<execution_step>(&item)) {
        edge(from, step_vertex(*s), label, "style=dotted");
      } else {
        const auto& m = std::get<stop_marker>(item);
        std::string text = "stop";
        if (m.cond) text += " if " + quote(m.cond->blob());
        edge(from, vertex({text}, "shape=octagon"), label, "style=dotted");
      }
    }
  }

  void task_vertex(const std::string& anchor, const task& t, std::optional<workspace_type> group_type) {
    std::vector<std::string> lines{"task " + t.name()};
    const auto type = t.workspace_type().value_or(group_type.value_or(workspace_type::private_));
    lines.push_back(std::to_string(t.num_instances()) + (t.num_instances() == 1 ? " instance, " : " instances, ") +
                    std::string(to_string(type)) + " workspace");
    std::vector<std::string> outs;
    for (const auto& st : t.declared_outputs()) {
      outs.push_back(st.list ? "[" + join(st.blobs) + "]" : st.blobs.front());
    }
    if (!outs.empty()) lines.push_back("outputs: " + join(outs));
    if (t.retry().retries()) lines.push_back(retry_text(t.retry()));
    const std::string id = vertex(lines, "shape=box, style=\"rounded,filled,bold\", fillcolor=\"#dbe9f6\"");
    edge(anchor, id);
    for (const auto& [obj, scope] : t.setups()) {
      const char* prefix = scope == setup_scope::instance ? "instance " : scope == setup_scope::local ? "local " : "";
      body_edges(id, obj->setup(), std::string(prefix) + "init");
      body_edges(id, obj->exit(), std::string(prefix) + "exit");
    }
    if (t.step()) edge(id, step_vertex(*t.step()), "step");
    for (const auto& [s, every] : t.reports())
      edge(id, step_vertex(s), "report every " + ms_text(every), "style=dashed");
  }

  void indent(int level) { indent_.assign(static_cast<std::size_t>(level) * 2, ' '); }

 private:
  std::size_t next_ = 0;
  std::string indent_ = "  ";
};

}  // namespace

std::string dot_escape(std::string_view s) {
  const std::string shown = escape_controls(s);
  std::string out;
  out.reserve(shown.size());
  for (char c : shown) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

std::string group_to_dot(const task_group& group, std::string_view title) {
  dot_writer w;
  w.out << "digraph \"taskgroup\" {\n";
  // A named group's name under the title.
  std::string title_label = dot_escape(title);
  if (!group.name().empty()) title_label += "\\n" + dot_escape("group " + quote(group.name()));
  w.out << "  graph [label=\"" << title_label << "\", labelloc=t, rankdir=LR, fontname=\"Helvetica\"];\n";
  w.out << "  node [fontname=\"Helvetica\", fontsize=10];\n";
  w.out << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  std::size_t cluster = 0;
  const auto locals = group.local_setups();
  for (const auto& node_name : group.used_nodes()) {
    w.indent(1);
    w.out << "  subgraph \"cluster_" << cluster++ << "\" {\n";
    w.indent(2);
    std::string label = dot_escape("node " + node_name);
    const auto& opts = group.cluster().options(node_name);
    if (!opts.empty()) {
      std::vector<std::string> kv;
      for (const auto& [k, v] : opts) kv.push_back(k + "=" + arg_text(v));
      label += "\\n" + dot_escape(join(kv));
    }
    w.out << "    label=\"" << label << "\";\n    style=rounded;\n    color=\"#7a7a7a\";\n";
    const std::string anchor = w.vertex({node_name}, "shape=folder, style=filled, fillcolor=\"#eeeeee\"");
    for (const auto& [n, obj] : locals) {
      if (n != node_name) continue;
      w.body_edges(anchor, obj->setup(), "local init");
    }
    for (const auto& t : group.tasks()) {
      if (t.node_name() == node_name) w.task_vertex(anchor, t, group.workspace_type());
    }
    for (const auto& r : group.report_steps()) {
      if (r.node != node_name) continue;
      w.edge(anchor, w.step_vertex(r.step), "report every " + ms_text(r.interval), "style=dashed");
    }
    for (const auto& [n, obj] : locals) {
      if (n != node_name) continue;
      w.body_edges(anchor, obj->exit(), "local exit");
    }
    for (const auto& r : group.remote_nets()) {
      if (r.node == node_name) w.edge(anchor, w.net_vertex(r.net), "remote net", "style=dashed");
    }
    w.indent(1);
    w.out << "  }\n";
  }
  w.out << "}\n";
  return w.out.str();
}

}  // namespace taskgroup::cli
