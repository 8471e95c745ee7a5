#include <taskgroup/trace_context.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <random>
#include <string>

namespace taskgroup {

namespace {

constexpr char digits[] = "0123456789abcdef";

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

error bad(const std::string& what) { return error(errc::invalid_task, "trace_parent " + what); }

// Reads `out.size()` bytes of hex at `text[at..]`; an error names the
// field and the offset of the first character that is not lowercase hex.
template <std::size_t N>
std::optional<error> read_hex(std::string_view text, std::size_t at, const char* field,
                              std::array<std::uint8_t, N>& out) {
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hex_value(text[at + 2 * i]);
    const int lo = hex_value(text[at + 2 * i + 1]);
    if (hi < 0 || lo < 0) {
      const std::size_t where = at + 2 * i + (hi < 0 ? 0 : 1);
      return bad(std::string("has a character that is not lowercase hex in its ") + field + " at offset " +
                 std::to_string(where));
    }
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return std::nullopt;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& a) noexcept {
  return std::all_of(a.begin(), a.end(), [](std::uint8_t b) { return b == 0; });
}

// A generator per thread (splitmix64: a run draws 3 words), seeded from
// the system on a thread's first draw. Constant-initialized, so that a
// draw reads the state without a thread-local guard.
std::uint64_t random_bits() noexcept {
  constinit thread_local std::uint64_t state [[gnu::tls_model("initial-exec")]] = 0;
  constinit thread_local bool seeded [[gnu::tls_model("initial-exec")]] = false;
  if (!seeded) [[unlikely]] {
    std::random_device rd;
    state = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    seeded = true;
  }
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Whole words, least significant byte first; never all zero (an invalid
// id).
template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& out) noexcept {
  static_assert(N % 8 == 0);
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      const std::uint64_t bits = random_bits();
      for (std::size_t j = 0; j < 8; ++j) out[i + j] = static_cast<std::uint8_t>(bits >> (8 * j));
    }
  } while (all_zero(out));
}

// Each byte's two hex digits, made once.
constexpr std::array<std::array<char, 2>, 256> byte_digits = [] {
  std::array<std::array<char, 2>, 256> t{};
  for (std::size_t b = 0; b < 256; ++b) t[b] = {digits[b >> 4], digits[b & 0xf]};
  return t;
}();

}  // namespace

std::string to_hex(const std::uint8_t* bytes, std::size_t n) {
  std::string out(2 * n, '0');
  char* p = out.data();
  for (std::size_t i = 0; i < n; ++i, p += 2) std::memcpy(p, byte_digits[bytes[i]].data(), 2);
  return out;
}

trace_parent_text::trace_parent_text(std::string_view text) noexcept : size_(text.size()) {
  if (text.size() <= capacity) std::copy(text.begin(), text.end(), text_.begin());
}

std::string_view trace_parent_text::view() const noexcept {
  return size_ <= capacity ? std::string_view(text_.data(), size_) : std::string_view();
}

result<trace_context> trace_parent_text::parse() const {
  if (size_ > capacity) {
    return bad("is " + std::to_string(size_) + " bytes, longer than the " + std::to_string(capacity) + " read");
  }
  return trace_context::parse(view());
}

result<trace_context> trace_context::parse(std::string_view t) {
  constexpr std::size_t length = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
  if (t.size() < 2) return bad("must be 55 characters (00-<32 hex>-<16 hex>-<2 hex>), got " + std::to_string(t.size()));
  std::array<std::uint8_t, 1> version{};
  if (auto e = read_hex(t, 0, "version", version)) return *e;
  if (version[0] == 0xff) return bad("has version ff, which is invalid");
  if (version[0] == 0 ? t.size() != length : t.size() < length || (t.size() > length && t[length] != '-')) {
    return bad("must be 55 characters (00-<32 hex>-<16 hex>-<2 hex>), got " + std::to_string(t.size()));
  }
  for (std::size_t dash : {std::size_t{2}, std::size_t{35}, std::size_t{52}}) {
    if (t[dash] != '-') return bad("must have a '-' at offset " + std::to_string(dash));
  }
  trace_context c;
  std::array<std::uint8_t, 1> flags{};
  if (auto e = read_hex(t, 3, "trace id", c.trace_id)) return *e;
  if (auto e = read_hex(t, 36, "parent id", c.parent_id)) return *e;
  if (auto e = read_hex(t, 53, "flags", flags)) return *e;
  if (all_zero(c.trace_id)) return bad("has an all-zero trace id, which is invalid");
  if (all_zero(c.parent_id)) return bad("has an all-zero parent id, which is invalid");
  c.flags = flags[0];
  return c;
}

trace_context trace_context::fresh() noexcept {
  trace_context c;
  fill_random(c.trace_id);
  fill_random(c.parent_id);
  return c;
}

std::array<std::uint8_t, 8> trace_context::fresh_span_id() noexcept {
  std::array<std::uint8_t, 8> id{};
  fill_random(id);
  return id;
}

trace_context trace_context::child() const noexcept {
  trace_context c = *this;
  c.parent_id = fresh_span_id();
  return c;
}

std::string trace_context::traceparent() const {
  return "00-" + to_hex(trace_id.data(), trace_id.size()) + "-" + to_hex(parent_id.data(), parent_id.size()) + "-" +
         to_hex(&flags, 1);
}

std::string trace_context::trace_id_hex() const { return to_hex(trace_id.data(), trace_id.size()); }

std::string trace_context::parent_id_hex() const { return to_hex(parent_id.data(), parent_id.size()); }

bool trace_context::valid() const noexcept { return !all_zero(trace_id); }

}  // namespace taskgroup
