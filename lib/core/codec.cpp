#include <taskgroup/codec.hpp>

#include <bit>
#include <cstring>
#include <mutex>

namespace taskgroup {

static_assert(std::endian::native == std::endian::little, "the codec byte format is little-endian");

void byte_writer::put(std::uint64_t v) { raw(&v, sizeof v); }
void byte_writer::put(std::uint32_t v) { raw(&v, sizeof v); }
void byte_writer::f64(double v) { put(std::bit_cast<std::uint64_t>(v)); }

void byte_writer::string(std::string_view s) {
  u64(s.size());
  raw(s.data(), s.size());
}

void byte_writer::raw(const void* data, std::size_t size) {
  if (size != 0) out_->append(static_cast<const char*>(data), size);
}

status byte_reader::need(std::size_t n, const char* what) const {
  if (remaining() < n) {
    return fail(errc::not_serializable, std::string("truncated ") + what + ": needs " + std::to_string(n) +
                                            " bytes at offset " + std::to_string(pos_) + ", " +
                                            std::to_string(remaining()) + " left");
  }
  return ok();
}

status byte_reader::raw(void* out, std::size_t size) {
  TASKGROUP_TRY(need(size, "bytes"));
  if (size != 0) std::memcpy(out, in_.data() + pos_, size);
  pos_ += size;
  return ok();
}

result<std::uint8_t> byte_reader::u8() {
  std::uint8_t v = 0;
  TASKGROUP_TRY(need(1, "u8"));
  TASKGROUP_TRY(raw(&v, 1));
  return v;
}

result<std::uint32_t> byte_reader::u32() {
  std::uint32_t v = 0;
  TASKGROUP_TRY(need(sizeof v, "u32"));
  TASKGROUP_TRY(raw(&v, sizeof v));
  return v;
}

result<std::uint64_t> byte_reader::u64() {
  std::uint64_t v = 0;
  TASKGROUP_TRY(need(sizeof v, "u64"));
  TASKGROUP_TRY(raw(&v, sizeof v));
  return v;
}

result<std::int64_t> byte_reader::i64() {
  TASKGROUP_TRY(auto v, u64());
  return static_cast<std::int64_t>(v);
}

result<double> byte_reader::f64() {
  TASKGROUP_TRY(auto v, u64());
  return std::bit_cast<double>(v);
}

result<bool> byte_reader::boolean() {
  TASKGROUP_TRY(auto v, u8());
  if (v > 1) return fail(errc::not_serializable, "bad bool byte " + std::to_string(v));
  return v == 1;
}

result<std::size_t> byte_reader::count(std::size_t element_size) {
  TASKGROUP_TRY(auto n, u64());
  const std::size_t unit = element_size == 0 ? 1 : element_size;
  if (n > remaining() / unit) {
    return fail(errc::not_serializable, "truncated: a length of " + std::to_string(n) + " at offset " +
                                            std::to_string(pos_ - 8) + " exceeds the " + std::to_string(remaining()) +
                                            " bytes left");
  }
  return static_cast<std::size_t>(n);
}

result<std::string> byte_reader::string() {
  TASKGROUP_TRY(auto n, count(1));
  std::string s(in_.substr(pos_, n));
  pos_ += n;
  return s;
}

namespace {

// The scalar codecs, shared by the scalar and the vector forms.
template <class T>
struct scalar;
template <>
struct scalar<std::int64_t> {
  static constexpr std::size_t min_size = 8;
  static void put(std::int64_t v, byte_writer& w) { w.i64(v); }
  static result<std::int64_t> get(byte_reader& r) { return r.i64(); }
};
template <>
struct scalar<double> {
  static constexpr std::size_t min_size = 8;
  static void put(double v, byte_writer& w) { w.f64(v); }
  static result<double> get(byte_reader& r) { return r.f64(); }
};
template <>
struct scalar<bool> {
  static constexpr std::size_t min_size = 1;
  static void put(bool v, byte_writer& w) { w.boolean(v); }
  static result<bool> get(byte_reader& r) { return r.boolean(); }
};
template <>
struct scalar<std::string> {
  static constexpr std::size_t min_size = 8;
  static void put(const std::string& v, byte_writer& w) { w.string(v); }
  static result<std::string> get(byte_reader& r) { return r.string(); }
};

// The contiguous form of a string or a vector of numbers.
template <class V>
void add_contiguous(codec_registry& reg) {
  auto c = reg.find(typeid(V));
  if (!c) return;
  blob_codec copy = *c;
  using E = typename V::value_type;
  copy.contiguous = [](const blob& b) -> std::string_view {
    const V& v = b.as<V>();
    return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(E)};  // NOLINT: bytes of numbers
  };
  copy.adopt = [](blob& into, std::size_t size) -> char* {
    if (size % sizeof(E) != 0) return nullptr;
    const std::size_t n = size / sizeof(E);
    V* v = into.try_get<V>();
    if (v == nullptr) {
      v = &into.emplace<V>();
    } else if (n > v->capacity()) {
      V().swap(*v);  // growing would copy the old bytes first
    }
    v->resize(n);
    return reinterpret_cast<char*>(v->data());  // NOLINT: bytes of numbers
  };
  reg.replace(std::move(copy));
}

template <class T>
void add_builtin(codec_registry& reg) {
  (void)reg.add<T>(type_name<T>(), &scalar<T>::put, &scalar<T>::get);
  (void)reg.add<std::vector<T>>(
      type_name<std::vector<T>>(),
      [](const std::vector<T>& v, byte_writer& w) {
        w.u64(v.size());
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          w.raw(v.data(), v.size() * sizeof(T));
        } else {
          for (const auto& e : v) scalar<T>::put(e, w);
        }
      },
      [](byte_reader& r) -> result<std::vector<T>> {
        TASKGROUP_TRY(auto n, r.count(scalar<T>::min_size));
        std::vector<T> v;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          v.resize(n);
          TASKGROUP_TRY(r.raw(v.data(), n * sizeof(T)));
        } else {
          v.reserve(n);
          for (std::size_t i = 0; i < n; ++i) {
            TASKGROUP_TRY(auto e, scalar<T>::get(r));
            v.push_back(std::move(e));
          }
        }
        return v;
      });
}

}  // namespace

codec_registry::codec_registry() {
  add_builtin<std::int64_t>(*this);
  add_builtin<double>(*this);
  add_builtin<bool>(*this);
  add_builtin<std::string>(*this);
  add_contiguous<std::string>(*this);
  add_contiguous<std::vector<std::int64_t>>(*this);
  add_contiguous<std::vector<double>>(*this);
}

void codec_registry::replace(blob_codec codec) {
  std::unique_lock lock(mutex_);
  auto c = std::make_shared<const blob_codec>(std::move(codec));
  by_type_[c->type] = c;
  by_tag_[c->tag] = c;
}

codec_registry& codec_registry::global() {
  static codec_registry r;
  return r;
}

status codec_registry::add(blob_codec codec) {
  if (codec.tag.empty()) return fail(errc::bad_argument, "a codec needs a tag");
  if (!codec.encode || !codec.decode)
    return fail(errc::bad_argument, "codec " + quote(codec.tag) + " lacks a function");
  std::unique_lock lock(mutex_);
  if (auto it = by_type_.find(codec.type); it != by_type_.end()) {
    return fail(errc::bad_argument,
                "type " + detail::demangle(codec.type.name()) + " already has codec " + quote(it->second->tag));
  }
  if (by_tag_.count(codec.tag) != 0) return fail(errc::bad_argument, "codec tag " + quote(codec.tag) + " is taken");
  auto c = std::make_shared<const blob_codec>(std::move(codec));
  by_type_.emplace(c->type, c);
  by_tag_.emplace(c->tag, c);
  return ok();
}

std::shared_ptr<const blob_codec> codec_registry::find(const std::type_info& type) const {
  std::shared_lock lock(mutex_);
  auto it = by_type_.find(std::type_index(type));
  return it == by_type_.end() ? nullptr : it->second;
}

std::shared_ptr<const blob_codec> codec_registry::find(std::string_view tag) const {
  std::shared_lock lock(mutex_);
  auto it = by_tag_.find(tag);
  return it == by_tag_.end() ? nullptr : it->second;
}

std::vector<std::string> codec_registry::tags() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  out.reserve(by_tag_.size());
  for (const auto& kv : by_tag_) out.push_back(kv.first);
  return out;
}

status codec_registry::encode(const blob& b, byte_writer& w) const {
  if (!b.has_value()) return fail(errc::not_serializable, "an empty blob has no value to encode");
  auto c = find(b.type());
  if (!c) {
    return fail(errc::not_serializable,
                "no codec for type " + b.type_name() + " (register one with codec_registry::add)");
  }
  w.string(c->tag);
  return c->encode(b, w);
}

result<blob> codec_registry::decode(byte_reader& r) const {
  TASKGROUP_TRY(auto tag, r.string());
  auto c = find(tag);
  if (!c) return fail(errc::not_serializable, "no codec tagged " + quote(tag) + " in this process");
  auto b = c->decode(r);
  if (!b) return b.error().with_context("decoding " + quote(tag));
  return b;
}

result<blob> codec_registry::round_trip(const blob& b) const {
  std::string bytes;
  byte_writer w(bytes);
  TASKGROUP_TRY(encode(b, w));
  byte_reader r(bytes);
  TASKGROUP_TRY(auto out, decode(r));
  if (!r.at_end()) {
    return fail(errc::not_serializable,
                "codec of " + b.type_name() + " left " + std::to_string(r.remaining()) + " bytes unread");
  }
  return out;
}

}  // namespace taskgroup
