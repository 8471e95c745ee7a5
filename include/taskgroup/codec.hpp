// taskgroup: blob codecs, which turn blob values into bytes and back.
//
// A task's declared outputs cross process boundaries (the MPI session sends
// them to rank 0) as bytes: a codec per C++ type encodes a value and decodes
// it again. A registry maps types to codecs; the global one knows the
// built-in types, `int64`, `double`, `bool`, `string` and `vector<...>` of
// each, and programs add their own types:
//
//   taskgroup::codec_registry::global().add<point>(
//       "point",
//       [](const point& p, taskgroup::byte_writer& w) { w.f64(p.x); w.f64(p.y); },
//       [](taskgroup::byte_reader& r) -> taskgroup::result<point> {
//         TASKGROUP_TRY(auto x, r.f64());
//         TASKGROUP_TRY(auto y, r.f64());
//         return point{x, y};
//       });
//
// A local session can run the same codecs in strict mode
// (`run_options::strict_codecs`), so that a group whose outputs could not
// travel fails in a local test too.
//
// The byte format is fixed-width little-endian: ranks must share one byte
// order (as every MPI job on one kind of machine does).
//
// Threading: byte_writer and byte_reader are value types (reentrant).
// codec_registry is thread-safe: `add` takes a lock that lookups share.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

namespace taskgroup {

/// Appends fixed-width little-endian values to a byte string.
class TASKGROUP_API byte_writer {
 public:
  /// Writes to the end of `out`, which must outlive the writer.
  explicit byte_writer(std::string& out) noexcept : out_(&out) {}

  void u8(std::uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v)); }
  void f64(double v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  /// A length (u64) followed by the bytes.
  void string(std::string_view s);
  /// The bytes as they are, without a length.
  void raw(const void* data, std::size_t size);

  /// The bytes written so far (the whole string, including what was there).
  [[nodiscard]] const std::string& bytes() const noexcept { return *out_; }

 private:
  void put(std::uint64_t v);
  void put(std::uint32_t v);
  std::string* out_;
};

/// Reads what a byte_writer wrote. Every read checks the bytes left and
/// fails with `errc::not_serializable` ("truncated ...") rather than read
/// past the end.
class TASKGROUP_API byte_reader {
 public:
  /// Reads `in`, which must outlive the reader.
  explicit byte_reader(std::string_view in) noexcept : in_(in) {}

  result<std::uint8_t> u8();
  result<std::uint32_t> u32();
  result<std::uint64_t> u64();
  result<std::int64_t> i64();
  result<double> f64();
  result<bool> boolean();
  result<std::string> string();
  /// `size` bytes as they are, copied to `out`.
  status raw(void* out, std::size_t size);
  /// A length no larger than the bytes left divided by `element_size`, so
  /// that a corrupt length cannot make a decoder allocate wildly.
  result<std::size_t> count(std::size_t element_size);

  [[nodiscard]] std::size_t remaining() const noexcept { return in_.size() - pos_; }
  [[nodiscard]] bool at_end() const noexcept { return pos_ == in_.size(); }

 private:
  status need(std::size_t n, const char* what) const;
  std::string_view in_;
  std::size_t pos_ = 0;
};

/// One type's codec: a tag (its name on the wire) and the two functions.
struct TASKGROUP_API blob_codec {
  /// The wire name, unique in a registry: `int64`, `vector<double>`, ...
  std::string tag;
  /// The C++ type encoded.
  std::type_index type = typeid(void);
  /// Writes the blob's value (which holds `type`).
  std::function<status(const blob&, byte_writer&)> encode;
  /// Reads a value written by `encode` into a new blob.
  std::function<result<blob>(byte_reader&)> decode;
  /// Optional, for values stored as one run of bytes (the built-in string
  /// and numeric vector codecs set it): the bytes of a value as they are.
  /// With `adopt`, a session sends such a value without copying it into a
  /// message and receives it straight into its value.
  std::function<std::string_view(const blob&)> contiguous;
  /// Makes `into` hold a value of `size` bytes (as `contiguous` would show
  /// them) and returns where to write those bytes. When `into` already
  /// holds this codec's type its storage is reused (no allocation when it
  /// is large enough; its old bytes are overwritten, not preserved).
  /// Returns null, leaving `into` alone, when `size` cannot be such a
  /// value (not a multiple of the element size).
  std::function<char*(blob& into, std::size_t size)> adopt;
};

/// Codecs by C++ type and by tag.
class TASKGROUP_API codec_registry {
 public:
  /// A registry with the built-in codecs: int64, double, bool, string and
  /// vector<> of each.
  codec_registry();
  /// The process-wide registry used when none is given.
  static codec_registry& global();

  /// Adds a codec for `T`. `encode` is `void(const T&, byte_writer&)`,
  /// `decode` is `result<T>(byte_reader&)`. Errors: `errc::bad_argument`
  /// when the type or the tag already has a codec.
  template <class T, class Encode, class Decode>
  status add(std::string tag, Encode encode_fn, Decode decode_fn) {
    static_assert(std::is_move_constructible_v<T>, "a blob value must be movable");
    blob_codec c;
    c.tag = std::move(tag);
    c.type = typeid(T);
    c.encode = [enc = std::move(encode_fn)](const blob& b, byte_writer& w) -> status {
      const T* v = b.try_get<T>();
      if (v == nullptr) return b.get<T>().error();
      enc(*v, w);
      return ok();
    };
    c.decode = [dec = std::move(decode_fn)](byte_reader& r) -> result<blob> {
      result<T> v = dec(r);
      if (!v) return v.error();
      blob out;
      out.emplace<T>(std::move(v).value());
      return out;
    };
    return add(std::move(c));
  }
  /// Adds a prepared codec. Errors: as the template form.
  status add(blob_codec codec);
  /// Adds or replaces the codec of `codec.type` (and its tag). For
  /// registration before any run: a run in flight may use either.
  void replace(blob_codec codec);

  /// The codec of `type`, or null.
  [[nodiscard]] std::shared_ptr<const blob_codec> find(const std::type_info& type) const;
  /// The codec tagged `tag`, or null.
  [[nodiscard]] std::shared_ptr<const blob_codec> find(std::string_view tag) const;
  /// Tags of every codec, sorted.
  [[nodiscard]] std::vector<std::string> tags() const;

  /// Writes `b` as its tag and its encoded value. Errors:
  /// `errc::not_serializable` naming the type when it has no codec, or
  /// when the blob is empty.
  status encode(const blob& b, byte_writer& w) const;
  /// Reads what `encode` wrote. Errors: `errc::not_serializable` for an
  /// unknown tag or malformed bytes.
  [[nodiscard]] result<blob> decode(byte_reader& r) const;
  /// `decode(encode(b))`: what a receiving process would see.
  [[nodiscard]] result<blob> round_trip(const blob& b) const;

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::type_index, std::shared_ptr<const blob_codec>> by_type_;
  std::map<std::string, std::shared_ptr<const blob_codec>, std::less<>> by_tag_;
};

}  // namespace taskgroup
