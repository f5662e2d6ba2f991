// libFuzzer harness: the bandwidth-profile reader (amsp/planner/bandwidth_profile.hpp). Any input
// either fails with an amsp::error or gives a profile whose interpolated times are finite and
// non-negative for every op and group it has.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "amsp/planner/bandwidth_profile.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  amsp::fuzz::expect_only_amsp_errors([&] {
    const auto profile = amsp::planner::BandwidthProfile::from_json(amsp::parse_json(amsp::fuzz::text_of(data, size)));
    for (amsp::comm::op_kind op : amsp::comm::all_op_kinds)
      for (int a : {1, 2, 4, 8})
        for (int b : {1, 2})
          for (double bytes : {0.0, 1.0, 4096.0, 1e6, 1e9, 1e15})
            if (const auto t = profile.seconds(op, amsp::Factor{a, b}, bytes))
              if (!(*t >= 0) || std::isinf(*t)) __builtin_trap();
  });
  return 0;
}
