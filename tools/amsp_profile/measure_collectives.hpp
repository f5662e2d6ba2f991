#pragma once
// amsp-profile's measurement: for every collective a planner prices (op × group shape × message
// size), the mean time of one collective when every group of that shape on the mesh runs it at
// once, as the engine does. Works on any Communicator. The entries and their JSON document are
// the library's (amsp/planner/bandwidth_profile.hpp: the format's one home, reader and writer).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "amsp/comm/communicator.hpp"
#include "amsp/comm/op.hpp"
#include "amsp/core/buffer.hpp"
#include "amsp/planner/bandwidth_profile.hpp"
#include "amsp/sharding/groups.hpp"

namespace amsp_profile {

using namespace amsp;
using planner::ProfileEntry;

/// Every aligned-block group shape of the mesh with at least two ranks (a | R, b | N, b > 1 only
/// if a = R), smallest first.
[[nodiscard]] inline std::vector<Factor> group_shapes(const Mesh& mesh) {
  std::vector<Factor> shapes;
  for (int b = 1; b <= mesh.nodes(); ++b)
    for (int a = 1; a <= mesh.ranks_per_node(); ++a)
      if (mesh.ranks_per_node() % a == 0 && mesh.nodes() % b == 0 && (b == 1 || a == mesh.ranks_per_node()) &&
          a * b >= 2)
        shapes.push_back(Factor{a, b});
  return shapes;
}

/// Collectives per measurement: enough to move about 256 MiB, between 2 and 200. A function of
/// the size alone, so that every rank runs the same number.
[[nodiscard]] inline int iterations_for(std::uint64_t bytes) {
  const std::uint64_t target = std::uint64_t{256} << 20;
  return static_cast<int>(std::clamp<std::uint64_t>(target / std::max<std::uint64_t>(bytes, 1), 2, 200));
}

/// Measures every (op, shape, size) on `world` (collective: every rank calls it with the same
/// arguments; the times are rank 0's, between two world barriers). Sizes are rounded down to a
/// multiple of 4 × group size bytes so that every rank holds a whole number of fp32 elements.
template <comm::communicator C>
[[nodiscard]] std::vector<ProfileEntry> measure(C& world, const Mesh& mesh, const std::vector<comm::op_kind>& ops,
                                         const std::vector<Factor>& shapes, const std::vector<std::uint64_t>& sizes) {
  mesh.check_world_size(world.size());
  using Clock = std::chrono::steady_clock;
  std::vector<ProfileEntry> entries;
  for (const Factor& shape : shapes) {
    C group = world.split(factor_groups(mesh, shape));
    const auto g = static_cast<std::uint64_t>(shape.size());
    for (comm::op_kind op : ops)
      for (std::uint64_t requested : sizes) {
        const std::uint64_t bytes = requested / (4 * g) * (4 * g);
        check(bytes > 0, "profile.size", "message size ", requested, " is smaller than one fp32 element per rank of a ",
              to_string(shape), " group");
        const std::size_t elements = bytes / 4;
        const std::size_t block = elements / g;
        host_buffer<float> send(elements), recv(elements);
        const auto once = [&] {
          switch (op) {
            case comm::op_kind::all_gather: group.all_gather(send.data(), recv.data(), block); break;
            case comm::op_kind::reduce_scatter: group.reduce_scatter(send.data(), recv.data(), block); break;
            case comm::op_kind::all_reduce: group.all_reduce(send.data(), recv.data(), elements); break;
            case comm::op_kind::broadcast: group.broadcast(send.data(), recv.data(), elements, 0); break;
            case comm::op_kind::reduce: group.reduce(send.data(), recv.data(), elements, comm::reduce_op::sum, 0); break;
          }
        };
        once();  // warm-up: first touch, connection setup
        const int iterations = iterations_for(bytes);
        world.barrier();
        const auto t0 = Clock::now();
        for (int i = 0; i < iterations; ++i) once();
        world.barrier();
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / iterations;
        entries.push_back(ProfileEntry{op, shape, bytes, seconds});
      }
  }
  return entries;
}

}  // namespace amsp_profile
