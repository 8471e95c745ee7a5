// Reading a plan or inputs file into memory, bounded by max_plan_size
// whatever the file is.
#include "plan/internal.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

struct file_closer {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

}  // namespace

result<std::string> read_file_text(const std::filesystem::path& path, std::string_view what) {
  const std::string named = std::string(what) + " " + quote(path.string());
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(st))
    return fail(errc::invalid_plan, "cannot read " + named + ": it is a directory");
  // A regular file's size is known: refused before it is read.
  std::optional<std::uintmax_t> size;
  if (!ec && std::filesystem::is_regular_file(st)) {
    const auto n = std::filesystem::file_size(path, ec);
    if (!ec) size = n;
  }
  if (size && *size > max_plan_size) {
    return fail(errc::invalid_plan, named + " is " + std::to_string(*size) + " bytes, more than " +
                                        std::to_string(max_plan_size) + std::string(max_plan_size_named));
  }
  errno = 0;
  std::unique_ptr<std::FILE, file_closer> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    const int e = errno;
    return fail(errc::invalid_plan, "cannot open " + named + (e != 0 ? ": " + std::string(std::strerror(e)) : ""));
  }
  // Reads up to one byte past the limit: a file that gives it (one that
  // grew, or whose size is not known: a pipe, a device) is too large. A
  // regular file is read in one call into a buffer of its size; any other
  // in blocks that are joined once at the end (no buffer grown by copying,
  // nothing zero-filled first: a device that never ends costs one read of
  // the limit).
  const std::size_t block = size ? static_cast<std::size_t>(*size) + 1 : std::size_t{1} << 20;
  std::vector<std::unique_ptr<char[]>> blocks;
  std::size_t total = 0;
  std::size_t last = 0;  // bytes in the last block
  for (;;) {
    const std::size_t want = std::min(block, max_plan_size + 1 - total);
    blocks.push_back(std::make_unique_for_overwrite<char[]>(want));
    last = std::fread(blocks.back().get(), 1, want, f.get());
    total += last;
    if (total > max_plan_size) {
      return fail(errc::invalid_plan, named + " holds more than " + std::to_string(max_plan_size) + " bytes" +
                                          std::string(max_plan_size_named));
    }
    if (last < want) break;  // the end, or an error
  }
  std::string text;
  text.reserve(total);
  for (std::size_t i = 0; i < blocks.size(); ++i) text.append(blocks[i].get(), i + 1 == blocks.size() ? last : block);
  if (std::ferror(f.get())) {
    const int e = errno;
    if (e == EISDIR) return fail(errc::invalid_plan, "cannot read " + named + ": it is a directory");
    return fail(errc::invalid_plan, "cannot read " + named + (e != 0 ? ": " + std::string(std::strerror(e)) : ""));
  }
  return text;
}

}  // namespace taskgroup::plan_detail
