// taskgroup_bench: resident memory of this process, for the memory probes.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace tgbench {

/// A "VmRSS:"-style field of /proc/self/status in bytes (0 if missing).
inline std::size_t proc_status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t len = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, len, field) == 0) return std::stoull(line.substr(len)) * 1024;  // "kB"
  }
  return 0;
}

/// Resets the peak RSS (VmHWM) to the current RSS; false when the kernel
/// refuses (then the caller falls back to VmRSS).
inline bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

/// Measures the peak RSS growth of a phase: construct right before it,
/// call `growth()` at its end.
class rss_meter {
 public:
  rss_meter() : peak_reset_(reset_peak_rss()), base_(proc_status_bytes("VmRSS:")) {}
  [[nodiscard]] double growth() const {
    const std::size_t end = peak_reset_ ? proc_status_bytes("VmHWM:") : proc_status_bytes("VmRSS:");
    return end > base_ ? static_cast<double>(end - base_) : 0.0;
  }

 private:
  bool peak_reset_;
  std::size_t base_;
};

}  // namespace tgbench
