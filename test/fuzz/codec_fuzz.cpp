// libFuzzer target: decoding arbitrary bytes with the built-in codecs must
// never crash, over-allocate or invoke undefined behaviour, and a value
// that decodes must encode again, and that encoding decode and encode to
// the same bytes.
#include <taskgroup/codec.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "codec round trip: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto& codecs = taskgroup::codec_registry::global();
  taskgroup::byte_reader in(std::string_view(reinterpret_cast<const char*>(data), size));
  auto value = codecs.decode(in);
  if (!value) return 0;
  std::string once;
  taskgroup::byte_writer w1(once);
  if (auto st = codecs.encode(value.value(), w1); !st) broken("a decoded value cannot be encoded", st.error().message);
  taskgroup::byte_reader back(once);
  auto again = codecs.decode(back);
  if (!again) broken("an encoded value does not decode", again.error().message);
  if (!back.at_end()) broken("decoding an encoded value leaves bytes", std::to_string(back.remaining()));
  std::string twice;
  taskgroup::byte_writer w2(twice);
  if (auto st = codecs.encode(again.value(), w2); !st) broken("a decoded value cannot be encoded", st.error().message);
  if (twice != once)
    broken("encoding is not stable", std::to_string(once.size()) + " vs " + std::to_string(twice.size()));
  return 0;
}
