// Workload 7: the generated plans of the scale rows (check and run), in
// temporary files.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace tgbench::w7 {

inline constexpr std::size_t nodes_n = 100'000;
inline constexpr std::size_t tasks_n = 200'000;

// A plan file that removes itself.
class plan_file {
 public:
  explicit plan_file(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("taskgroup_bench_" + tag + "_" + std::to_string(::getpid()) + ".json")) {}
  plan_file(const plan_file&) = delete;
  plan_file& operator=(const plan_file&) = delete;
  ~plan_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// `n` nodes n0.., task t<i> on node n<i>, every step running the net "work".
inline void write_nodes_plan(const std::filesystem::path& path, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  out << R"({"taskgroup_plan": 1, "nodes": [)";
  for (std::size_t i = 0; i < n; ++i) out << (i ? "," : "") << R"({"name": "n)" << i << R"("})";
  out << R"(], "tasks": [)";
  for (std::size_t i = 0; i < n; ++i) {
    out << (i ? "," : "") << R"({"name": "t)" << i << R"(", "node": "n)" << i << R"(", "step": {"name": "s)" << i
        << R"(", "nets": ["work"]}})";
  }
  out << R"(], "nets": [{"name": "work", "ops": [{"type": "ConstantFill", "inputs": [], "outputs": ["x"], )"
      << R"("args": {"value": 1}}]}]})";
}

// `n` tasks on node "local", each with its own step, net and output.
inline void write_tasks_plan(const std::filesystem::path& path, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  out << R"({"taskgroup_plan": 1, "nodes": [{"name": "local"}], "tasks": [)";
  for (std::size_t i = 0; i < n; ++i) {
    out << (i ? "," : "") << R"({"name": "task_)" << i << R"(", "node": "local", "step": {"name": "step_)" << i
        << R"(", "nets": ["net_)" << i << R"("]}, "outputs": ["out_)" << i << R"("]})";
  }
  out << R"(], "nets": [)";
  for (std::size_t i = 0; i < n; ++i) {
    out << (i ? "," : "") << R"({"name": "net_)" << i << R"(", "ops": [{"type": "ConstantFill", "inputs": [], )"
        << R"("outputs": ["out_)" << i << R"("], "args": {"value": [1, 2, 3]}}]})";
  }
  out << "]}";
}

}  // namespace tgbench::w7
