// libFuzzer target: read_plan on arbitrary bytes must never crash, hang or
// invoke undefined behaviour, and every plan that reads must round-trip
// (plan_round_trip.hpp). A broken property aborts, which libFuzzer reports
// as a finding with the input that caused it.
#include "plan_round_trip.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto fault = taskgroup::test::plan_round_trip_fault(text); !fault.empty()) {
    std::fprintf(stderr, "plan round trip: %s\n", fault.c_str());
    std::abort();
  }
  return 0;
}
