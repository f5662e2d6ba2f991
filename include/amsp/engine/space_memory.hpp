#pragma once
// What the step schedule asks of an execution space beyond submit / launch / order_after
// (amsp/engine/space.hpp): its memory operations, how it is configured at construction, and the
// points where the caller's own compute must be ordered against the space's stream. The host
// spaces get the host defaults below without declaring anything; a device space declares
//
//   typename S::memory_type     its memory operations (the interface of amsp::HostMemory),
//                               constructed from the space
//   typename S::config          what the engine's constructor takes to build the space
//                               (amsp::CudaAsync: the user's compute stream)
//   s.last_ticket()             the ticket of the last task submitted, on either stream (its
//                               stream and FIFO position: amsp::StreamTicket), for user_after
//   s.user_after(ticket)        the user's later compute waits for that task, the host does not
//   s.comm_after_user()         the stream's later work waits for the user's compute so far
//   s.user_after_comm()         the user's later compute waits for the stream's work so far
//   s.before_collective(comm)   on the stream, right before a collective is issued on `comm`
//                               (its inputs are the stream's work so far: the threads backend over
//                               device memory needs them complete, NCCL an event wait)
//   s.wait_for_user()           the host waits for the user's compute so far (before the engine
//                               frees scratch that compute may still read: trim_scratch)
//
// and the engine calls these hooks, which do what the host needs on a host space: user_after
// waits the event on the host (the caller is the user's compute), the others do nothing.

#include <cstdint>
#include <utility>

#include "amsp/comm/handle.hpp"
#include "amsp/engine/host_memory.hpp"

namespace amsp {

/// The constructor argument of a host space: nothing to say.
struct HostSpaceConfig {};

namespace detail {

template <class Space>
inline constexpr bool device_space = requires { typename Space::memory_type; };

template <class Space>
struct space_traits {
  using memory = HostMemory;
  using config = HostSpaceConfig;
  static Space make(const config&) { return Space{}; }  // a prvalue: non-movable spaces are fine
  static memory make_memory(Space&) { return {}; }
};

template <class Space>
  requires device_space<Space>
struct space_traits<Space> {
  using memory = typename Space::memory_type;
  using config = typename Space::config;
  static Space make(const config& c) { return Space(c); }
  static memory make_memory(Space& s) { return memory(s); }
};

template <class Space>
[[nodiscard]] std::uint64_t last_ticket(Space& space) {
  if constexpr (device_space<Space>) return space.last_ticket();
  else return 0;
}

/// The user's compute that follows reads what `event`'s task (at `ticket`) wrote.
template <class Space>
void user_after(Space& space, comm::Handle& event, std::uint64_t ticket) {
  if constexpr (device_space<Space>) space.user_after(ticket);
  else event.wait();
}

template <class Space>
void comm_after_user(Space& space) {
  if constexpr (device_space<Space>) space.comm_after_user();
}

template <class Space>
void user_after_comm(Space& space) {
  if constexpr (device_space<Space>) space.user_after_comm();
}

template <class Space>
void wait_for_user(Space& space) {
  if constexpr (device_space<Space>) space.wait_for_user();
}

template <class Space, class Comm>
void before_collective(Space& space, Comm& comm) {
  if constexpr (device_space<Space>) space.before_collective(comm);
}

}  // namespace detail

/// What the engine's constructor takes to build its execution space (HostSpaceConfig for the
/// host spaces, amsp::CudaStreams for amsp::CudaAsync).
template <class Space>
using space_config_t = typename detail::space_traits<Space>::config;

}  // namespace amsp
