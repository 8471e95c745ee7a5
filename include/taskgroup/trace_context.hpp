// taskgroup: W3C trace context (https://www.w3.org/TR/trace-context/):
// the `traceparent` a run takes from the request that caused it, and the
// ids a run hands on to the services it calls (docs/observing.md).
//
// Threading: value types and reentrant functions.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace taskgroup {

/// A trace context: the trace's id, the id of the span that is the parent
/// of what runs under it, and the trace flags (bit 0: sampled).
struct TASKGROUP_API trace_context {
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> parent_id{};
  std::uint8_t flags = 0;

  /// Parses a `traceparent` header value:
  /// `<version>-<trace id>-<parent id>-<flags>`, each field lowercase hex
  /// of 2, 32, 16 and 2 digits, version `00` (exactly 55 characters) or a
  /// later version (the first four fields read as version 00's; more may
  /// follow after a `-`). Errors: `errc::invalid_task` saying what is
  /// wrong and where: a wrong length, a character that is not lowercase
  /// hex (with its offset), version `ff`, an all-zero trace id or parent
  /// id.
  static result<trace_context> parse(std::string_view traceparent);
  /// A fresh context: a random trace id and parent id (never all zero),
  /// flags 0. Thread-safe (a generator per thread).
  static trace_context fresh() noexcept;
  /// A random span id (never all zero), for a span under this context.
  static std::array<std::uint8_t, 8> fresh_span_id() noexcept;

  /// A span under this context: the same trace id and flags, a fresh
  /// parent id (what a run does with the context it is given, and what
  /// an op that makes a span of its own may do). Thread-safe.
  [[nodiscard]] trace_context child() const noexcept;

  /// `00-<trace id>-<parent id>-<flags>` (version 00, lowercase hex).
  [[nodiscard]] std::string traceparent() const;
  /// The trace id as 32 lowercase hex digits.
  [[nodiscard]] std::string trace_id_hex() const;
  /// The parent id as 16 lowercase hex digits.
  [[nodiscard]] std::string parent_id_hex() const;
  /// False for the all-zero context (no trace).
  [[nodiscard]] bool valid() const noexcept;

  friend bool operator==(const trace_context&, const trace_context&) = default;
};

/// A `traceparent` value as a run is given it (`run_options::
/// trace_parent`), its text held inline: up to `capacity` bytes; a longer
/// one keeps only its length and is refused by `parse`. (Not a
/// `std::string`: g++ 12 copies a braced temporary argument of a
/// `co_await` expression into the coroutine frame bit by bit, which
/// breaks a string held in its own small buffer; `run_options` holds
/// nothing of the kind, so `co_await session.async_run(g, {.timeout = ...,
/// .trace_parent = header}, ...)` is safe.)
class TASKGROUP_API trace_parent_text {
 public:
  static constexpr std::size_t capacity = 128;
  constexpr trace_parent_text() noexcept = default;
  /// Holds `text` (implicit: `options.trace_parent = header_value`).
  trace_parent_text(std::string_view text) noexcept;  // NOLINT(google-explicit-constructor)
  trace_parent_text(const char* text) noexcept : trace_parent_text(std::string_view(text)) {}         // NOLINT
  trace_parent_text(const std::string& text) noexcept : trace_parent_text(std::string_view(text)) {}  // NOLINT
  /// No value given.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The length of the value given.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The value (empty when it was longer than `capacity`).
  [[nodiscard]] std::string_view view() const noexcept;
  /// `trace_context::parse` of the value. Errors: those, and
  /// `errc::invalid_task` for a value longer than `capacity` ("trace_parent
  /// is 300 bytes, longer than the 128 read").
  [[nodiscard]] result<trace_context> parse() const;

 private:
  std::array<char, capacity> text_{};
  std::size_t size_ = 0;
};

/// `bytes` as lowercase hex, two digits a byte.
TASKGROUP_API std::string to_hex(const std::uint8_t* bytes, std::size_t n);

}  // namespace taskgroup
