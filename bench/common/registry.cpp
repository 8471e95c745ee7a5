#include "common/registry.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

extern char** environ;

namespace tgbench {

registry& registry::get() {
  static registry r;
  return r;
}

void registry::add(workload w) { workloads_.push_back(std::move(w)); }
void registry::add(contender c) { contenders_.push_back(std::move(c)); }
void registry::add(probe p) { probes_.push_back(std::move(p)); }

const probe* registry::find_probe(const std::string& name) const noexcept {
  for (const probe& p : probes_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double run_probe(const std::string& name, std::string& error) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  int fds[2];
  if (pipe(fds) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return nan;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::string exe = "/proc/self/exe";
  std::string flag = "--probe";
  std::string arg = name;
  char* argv[] = {exe.data(), flag.data(), arg.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    error = std::string("posix_spawn: ") + std::strerror(rc);
    return nan;
  }
  std::string out;
  char buf[256];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    error = "probe " + name + " failed: " + out;
    return nan;
  }
  char* end = nullptr;
  const double v = std::strtod(out.c_str(), &end);
  if (end == out.c_str()) {
    error = "probe " + name + " printed no number: " + out;
    return nan;
  }
  return v;
}

}  // namespace tgbench
