// The overlapped step run unit by unit (step_pipeline.hpp), against timelines worked out by hand:
// two units of equal weight, so every compute and transfer of a unit is half its pass or term.
#include <doctest/doctest.h>

#include <vector>

#include "amsp/planner/step_model.hpp"

using namespace amsp;
using namespace amsp::planner;

namespace {
CommTerm term(TrafficTerm t, Window w = Window::every_micro_batch) { return {std::string(name_of(t)), w}; }
const std::vector<double> halves{0.5, 0.5};
}  // namespace

TEST_CASE("pipelined step: DDP's reductions wait for their unit's backward") {
  // Update 0-1; forward 1-2, 2-3; backward unit 1 3-5, its AllReduce (3 s) 5-8; unit 0 5-7, its
  // AllReduce 8-11. The step ends at 11; the AllReduce ran beside compute during 5-7 (2 s).
  const UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, true};
  const std::vector<CommTerm> terms{term(TrafficTerm::grad_replicas, Window::last_backward)};
  CHECK(pipelined_step_seconds(u, 0.0, terms, {6.0}) == doctest::Approx(11.0));
  CHECK(pipelined_step_seconds(u, 0.5, terms, {6.0}) == doctest::Approx(12.0));
  // The phase windows would hide all 6 s behind the 4 s backward but 2: 1 + 2 + 6 = 9.
  StepCompute c{6.0, 1.0 / 3.0, 1, 1.0, 0.0};
  CHECK(step_time(c, 0.0, terms, {6.0}).overlapped == doctest::Approx(9.0));
  c.unit_shares = halves;
  c.wait = 0.25;
  CHECK(step_time(c, 0.0, terms, {6.0}).overlapped == doctest::Approx(11.25));
  CHECK(step_time(c, 0.0, terms, {6.0}).serial == doctest::Approx(6.0 + 6.0 + 1.0 + 0.25));
}

TEST_CASE("pipelined step: ZeRO-3's gathers, prefetched one unit ahead; the norm at the end") {
  // Gathers 8 s a step: 2 s per unit and pass. Forward: gather 0 at 0-2 (nothing to hide it),
  // prefetch 1 at 2-4 beside compute 0 (2-3), compute 1 at 4-5. Backward: gather 1 again at 5-7,
  // compute 1 at 7-9 beside the prefetch of 0 (7-9), its ReduceScatter (1 s) 9-10; compute 0 at
  // 9-11, its ReduceScatter 11-12; the norm (0.5 s) then: 12.5. Communication beside compute:
  // 1 (2-3) + 2 (7-9) + 1 (9-10) = 4 s.
  const UnitSchedule u{halves, 2.0, 4.0, 1, 0.0, true};
  const std::vector<CommTerm> terms{term(TrafficTerm::param_gather), term(TrafficTerm::grad_reduce_p),
                                    term(TrafficTerm::grad_norm, Window::last_backward)};
  CHECK(pipelined_step_seconds(u, 0.0, terms, {8.0, 2.0, 0.5}) == doctest::Approx(12.5));
  CHECK(pipelined_step_seconds(u, 0.25, terms, {8.0, 2.0, 0.5}) == doctest::Approx(13.5));
  // Gathered weights kept: 4 s of gathers, once per unit (2 s each), no backward gathers:
  // gather 0 at 0-2, compute 0 2-3 beside gather 1 (2-4), compute 1 4-5, backward 5-7 and 7-9,
  // ReduceScatters 7-8 and 9-10, norm 10.5.
  const UnitSchedule kept{halves, 2.0, 4.0, 1, 0.0, false};
  CHECK(pipelined_step_seconds(kept, 0.0, terms, {4.0, 2.0, 0.5}) == doctest::Approx(10.5));
}

TEST_CASE("pipelined step: a unit's compute stalls after a gather inside a node") {
  // As ZeRO-3's above (the terms have no calls: inside a node), each unit's compute 0.25 s after
  // its gather and itself. Forward: gather 0 at 0-2, compute 0 at 2.25-3.25 beside the prefetch
  // of 1 (2.25-4.25), compute 1 at 4.5-5.5. Backward: gather 1 at 5.5-7.5, compute 1 at
  // 7.75-9.75 beside the prefetch of 0 (7.75-9.75), its ReduceScatter 9.75-10.75; compute 0 at
  // 10-12, its ReduceScatter 12-13; the norm: 13.5, 4 x 0.25 after 12.5.
  UnitSchedule u{halves, 2.0, 4.0, 1, 0.0, true, 0.25};
  const std::vector<CommTerm> terms{term(TrafficTerm::param_gather), term(TrafficTerm::grad_reduce_p),
                                    term(TrafficTerm::grad_norm, Window::last_backward)};
  CHECK(pipelined_step_seconds(u, 0.0, terms, {8.0, 2.0, 0.5}) == doctest::Approx(13.5));
  // Gathered weights kept: the forward's two stalls alone (10.5 + 0.5).
  u.gather_in_backward = false;
  CHECK(pipelined_step_seconds(u, 0.0, terms, {4.0, 2.0, 0.5}) == doctest::Approx(11.0));
  // Gathers across nodes do not stall: 12.5 as without it.
  u.gather_in_backward = true;
  std::vector<CommTerm> across = terms;
  across[0].calls.push_back({comm::op_kind::all_gather, 1024.0, 1.0, Factor{2, 2}});
  CHECK(pipelined_step_seconds(u, 0.0, across, {8.0, 2.0, 0.5}) == doctest::Approx(12.5));
  // step_time hands StepCompute::gather_stall on: 1.5 s of compute a step, the forward a third.
  StepCompute c{6.0, 1.0 / 3.0, 1, 0.0, 0.0};
  c.unit_shares = halves;
  c.gather_stall = 0.25;
  CHECK(step_time(c, 0.0, terms, {8.0, 2.0, 0.5}).overlapped == doctest::Approx(13.5));
}

TEST_CASE("pipelined step: the first forward waits for the last rank's entry, which a spread hides") {
  // Update 0-1, the last rank enters at 1.5: forward 0 at 1.5-2.5, 1 at 2.5-3.5; backward 1 at
  // 3.5-5.5, its OS ReduceScatter 5.5-6.5; backward 0 at 5.5-7.5, its ReduceScatter 7.5-8.5
  // (8.0 without the skew: the forward from 1).
  UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, true};
  u.entry_skew = 1.5;
  const std::vector<CommTerm> reduce{term(TrafficTerm::grad_reduce_os, Window::last_backward)};
  StepPhases p;
  CHECK(pipelined_step_seconds(u, 0.0, reduce, {2.0}, nullptr, nullptr, &p) == doctest::Approx(8.5));
  CHECK(p.first_forward_start == doctest::Approx(1.5));
  // A spread at the start runs from the update: unit 0's at 1-3, unit 1's at 3-5. The first
  // forward waits for it anyway, so the skew costs nothing (11 as without it: the case below).
  const std::vector<CommTerm> spread{term(TrafficTerm::grad_reduce_os, Window::last_backward),
                                     term(TrafficTerm::param_spread, Window::first_forward)};
  CHECK(pipelined_step_seconds(u, 0.0, spread, {2.0, 4.0}) == doctest::Approx(11.0));
  // A skew longer than the spread shows through it: from 5.5, forward 0 at 5.5-6.5, 1 at 6.5-7.5
  // (its spread ended at 5), backward 1 at 7.5-9.5 and 0 at 9.5-11.5, the ReduceScatters
  // 9.5-10.5 and 11.5-12.5.
  u.entry_skew = 5.5;
  CHECK(pipelined_step_seconds(u, 0.0, spread, {2.0, 4.0}) == doctest::Approx(12.5));
  // step_time hands StepCompute::entry_skew on: 6 s of compute a step, the forward a third.
  StepCompute c{6.0, 1.0 / 3.0, 1, 1.0, 0.0};
  c.unit_shares = halves;
  c.entry_skew = 1.5;
  CHECK(step_time(c, 0.0, reduce, {2.0}).overlapped == doctest::Approx(8.5));
}

TEST_CASE("pipelined step: a unit's forward waits for its spread; micro-batches") {
  // Update 0-1, spread of unit 0 at 1-3 and of unit 1 at 3-5 (4 s); forward 0 at 3-4, 1 at 5-6;
  // backward 1 at 6-8, its OS ReduceScatter 8-9; backward 0 at 8-10, its ReduceScatter 10-11.
  const UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, true};
  const std::vector<CommTerm> terms{term(TrafficTerm::grad_reduce_os, Window::last_backward),
                                    term(TrafficTerm::param_spread, Window::first_forward)};
  CHECK(pipelined_step_seconds(u, 0.0, terms, {2.0, 4.0}) == doctest::Approx(11.0));
  // The same timeline's phases: the first forward starts at 3, the forward ends at 6, the
  // backward at 10, the step at 11; κ = 0.5 slows the end alone, by half of the 2 s of
  // communication beside compute (unit 1's spread beside forward 0 at 3-4, the ReduceScatter
  // beside backward 0 at 8-9).
  StepPhases p;
  CHECK(pipelined_step_seconds(u, 0.5, terms, {2.0, 4.0}, nullptr, nullptr, &p) == doctest::Approx(12.0));
  CHECK(p.first_forward_start == doctest::Approx(3.0));
  CHECK(p.forward_end == doctest::Approx(6.0));
  CHECK(p.backward_end == doctest::Approx(10.0));
  CHECK(p.end == doctest::Approx(12.0));
  // Two micro-batches of forward 1 s and backward 2 s, the replica AllReduce (2 s) in the last
  // only: 0-1 forward, 1-3 backward; 3-4 forward, backward 1 at 4-5 then its AllReduce 5-6,
  // backward 0 at 5-6, its AllReduce 6-7.
  const UnitSchedule two{halves, 1.0, 2.0, 2, 0.0, true};
  const std::vector<CommTerm> replicas{term(TrafficTerm::grad_replicas, Window::last_backward)};
  CHECK(pipelined_step_seconds(two, 0.0, replicas, {2.0}) == doctest::Approx(7.0));
  // The phases of the last micro-batch: its forward ends at 4, its backward at 6; step_time
  // hands them on (the step's wait after them, in .overlapped alone).
  StepCompute c{3.0, 1.0 / 3.0, 2, 0.0, 0.25};
  c.unit_shares = halves;
  const StepTime s = step_time(c, 0.0, replicas, {2.0});
  CHECK(s.overlapped == doctest::Approx(7.25));
  CHECK(s.phases.first_forward_start == doctest::Approx(0.0));
  CHECK(s.phases.forward_end == doctest::Approx(4.0));
  CHECK(s.phases.backward_end == doctest::Approx(6.0));
  CHECK(s.phases.end == doctest::Approx(7.0));
}

TEST_CASE("pipelined step: a call queued behind another is priced back to back") {
  // DDP, AllReduce 3 s per unit after compute but 4 s back to back. Update 0-1; forward 1-3;
  // backward unit 1 3-5, its AllReduce finds the stream idle: 5-8; unit 0 5-7, its AllReduce
  // queues behind: 8-12.
  const UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, true};
  const std::vector<CommTerm> ddp{term(TrafficTerm::grad_replicas, Window::last_backward)};
  const std::vector<double> queued{8.0};
  CHECK(pipelined_step_seconds(u, 0.0, ddp, {6.0}, &queued) == doctest::Approx(12.0));
  // A fast AllReduce (0.5 s) never queues: 5-5.5 and 7-7.5, the back-to-back price unused.
  const std::vector<double> slow_if_queued{100.0};
  CHECK(pipelined_step_seconds(u, 0.0, ddp, {1.0}, &slow_if_queued) == doctest::Approx(7.5));
  // ZeRO-3, gathers 2 s per unit and pass after compute, 3 s back to back: gather 0 at 0-2; the
  // prefetch of 1, issued as gather 0 ends (2), is back to back: 2-5; compute 0 2-3, 1 5-6;
  // backward: gather 1 again at 6 on an idle stream 6-8; compute 1 8-10 beside the prefetch of 0,
  // back to back 8-11; its ReduceScatter 10-11 (idle stream); compute 0 11-13, ReduceScatter
  // 13-14; the norm: 14.5.
  const UnitSchedule z{halves, 2.0, 4.0, 1, 0.0, true};
  const std::vector<CommTerm> zero3{term(TrafficTerm::param_gather), term(TrafficTerm::grad_reduce_p),
                                    term(TrafficTerm::grad_norm, Window::last_backward)};
  const std::vector<double> zero3_queued{12.0, 2.0, 0.5};
  CHECK(pipelined_step_seconds(z, 0.0, zero3, {8.0, 2.0, 0.5}, &zero3_queued) == doctest::Approx(14.5));
  // step_time and contended_step_time hand the prices on.
  StepCompute c{6.0, 1.0 / 3.0, 1, 1.0, 0.0};
  c.unit_shares = halves;
  CHECK(step_time(c, 0.0, ddp, {6.0}, &queued).overlapped == doctest::Approx(12.0));
  CHECK(step_time(c, 0.0, ddp, {6.0}, &queued).serial == doctest::Approx(6.0 + 6.0 + 1.0));
  CHECK(contended_step_time(c, 1.0, CpuContention{}, 0.0, ddp, {6.0}, &queued).overlapped.overlapped ==
        doctest::Approx(12.0));
  const std::vector<double> wrong_size{8.0, 1.0};
  CHECK_THROWS_WITH_AS((void)pipelined_step_seconds(u, 0.0, ddp, {6.0}, &wrong_size),
                       doctest::Contains("planner.pipeline"), amsp::error);
}

TEST_CASE("pipelined step: the spread's first piece, on idle links, is priced after a gap") {
  // As "a unit's forward waits for its spread", the spread 1 s after a gap (0.5 per unit) and 4 s
  // back to back: update 0-1, spread 0 on the idle stream 1-1.5, spread 1 queued behind it 1.5-3.5;
  // forward 0 at 1.5-2.5, forward 1 waits for its spread: 3.5-4.5; backward 1 at 4.5-6.5, its
  // ReduceScatter 6.5-7.5; backward 0 at 6.5-8.5, its ReduceScatter 8.5-9.5.
  const UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, true};
  const std::vector<CommTerm> terms{term(TrafficTerm::grad_reduce_os, Window::last_backward),
                                    term(TrafficTerm::param_spread, Window::first_forward)};
  const std::vector<double> gapped{100.0, 1.0};  // the ReduceScatters find the stream idle: their term price
  CHECK(pipelined_step_seconds(u, 0.0, terms, {2.0, 4.0}, nullptr, &gapped) == doctest::Approx(9.5));
  CHECK(pipelined_step_seconds(u, 0.0, terms, {2.0, 4.0}) == doctest::Approx(11.0));  // without: back to back
  StepCompute c{6.0, 1.0 / 3.0, 1, 1.0, 0.0};
  c.unit_shares = halves;
  CHECK(step_time(c, 0.0, terms, {2.0, 4.0}, nullptr, &gapped).overlapped == doctest::Approx(9.5));
  CHECK(contended_step_time(c, 1.0, CpuContention{}, 0.0, terms, {2.0, 4.0}, nullptr, &gapped).overlapped.overlapped ==
        doctest::Approx(9.5));
  // The schedule without overlap is not the pipeline's: the spread stays back to back there.
  CHECK(step_time(c, 0.0, terms, {2.0, 4.0}, nullptr, &gapped).serial == doctest::Approx(6.0 + 6.0 + 1.0));
  const std::vector<double> wrong_size{1.0};
  CHECK_THROWS_WITH_AS((void)pipelined_step_seconds(u, 0.0, terms, {2.0, 4.0}, nullptr, &wrong_size),
                       doctest::Contains("gapped"), amsp::error);
}

TEST_CASE("pipelined step: a call queued behind a smaller one keeps its idle price") {
  // Units of a quarter and three quarters; the spread 4 s after a gap (1 and 3 s), 8 s back to
  // back (2 and 6 s); forward 2 s, backward 4 s, update 1 s. Small unit first: spread 0 on the
  // idle stream 1-2; spread 1 queued behind the smaller piece keeps its gapped 3 s: 2-5 (not 2-8);
  // forward 0 at 2-2.5, forward 1 waits for its spread: 5-6.5; backward 6.5-9.5, 9.5-10.5.
  const std::vector<CommTerm> spread{term(TrafficTerm::param_spread, Window::first_forward)};
  const std::vector<double> gapped{4.0};
  const UnitSchedule small_first{{0.25, 0.75}, 2.0, 4.0, 1, 1.0, true};
  CHECK(pipelined_step_seconds(small_first, 0.0, spread, {8.0}, nullptr, &gapped) == doctest::Approx(10.5));
  // Large unit first: spread 0 at 1-4; spread 1 queued behind a larger piece pays back to back,
  // 2 s: 4-6; forward 0 at 4-5.5, forward 1 at 6-6.5; backward 6.5-7.5, 7.5-10.5 (10 had it kept
  // its gapped 1 s).
  const UnitSchedule large_first{{0.75, 0.25}, 2.0, 4.0, 1, 1.0, true};
  CHECK(pipelined_step_seconds(large_first, 0.0, spread, {8.0}, nullptr, &gapped) == doctest::Approx(10.5));
}

TEST_CASE("pipelined step: a spread whose groups share the node links queues at its back-to-back price") {
  // As "a call queued behind a smaller one keeps its idle price", small unit first, the spread
  // crossing nodes. With one group per link it keeps that rule: 10.5. With four groups on each link
  // (amsp-30b's pairs on 4 x 2) the first piece keeps the links busy: spread 0 on the idle stream
  // 1-2, spread 1 queued behind it back to back, 6 s: 2-8; forward 0 at 2-2.5, forward 1 waits for
  // its spread: 8-9.5; backward 9.5-12.5, 12.5-13.5.
  CommTerm spread = term(TrafficTerm::param_spread, Window::first_forward);
  spread.calls.push_back({comm::op_kind::all_gather, 1000.0, 1.0, Factor{1, 2}});
  const std::vector<double> gapped{4.0};
  const UnitSchedule small_first{{0.25, 0.75}, 2.0, 4.0, 1, 1.0, true};
  CHECK(pipelined_step_seconds(small_first, 0.0, {spread}, {8.0}, nullptr, &gapped) == doctest::Approx(10.5));
  spread.groups_per_link = 4;
  CHECK(pipelined_step_seconds(small_first, 0.0, {spread}, {8.0}, nullptr, &gapped) == doctest::Approx(13.5));
  // Its first piece still finds the links idle: large unit first, spread 0 at 1-4 (gapped 3 s),
  // spread 1 back to back 4-6 as before: 10.5.
  const UnitSchedule large_first{{0.75, 0.25}, 2.0, 4.0, 1, 1.0, true};
  CHECK(pipelined_step_seconds(large_first, 0.0, {spread}, {8.0}, nullptr, &gapped) == doctest::Approx(10.5));
  // A spread inside a node has no link to keep busy: the rule of a smaller piece holds.
  CommTerm inside = term(TrafficTerm::param_spread, Window::first_forward);
  inside.calls.push_back({comm::op_kind::all_gather, 1000.0, 1.0, Factor{2, 1}});
  inside.groups_per_link = 4;
  CHECK(pipelined_step_seconds(small_first, 0.0, {inside}, {8.0}, nullptr, &gapped) == doctest::Approx(10.5));
}

TEST_CASE("pipelined step: two streams crossing nodes share the links") {
  // Update 0-1; spreads (2 s per unit alone) and forward gathers (2 s per unit alone) on the
  // two streams, all across nodes; weights kept, no reductions. Spread 0 alone at 1-3; at 3
  // spread 1 and gather 0 start together, each at half the rate: both end at 7; compute 0 at
  // 7-8; gather 1 (after spread 1) alone at 7-9; compute 1 9-10; backward 10-12 and 12-14.
  const UnitSchedule u{halves, 2.0, 4.0, 1, 1.0, false};
  const std::vector<CollectiveCall> across{{comm::op_kind::all_gather, 1.0, 1.0, {4, 2}}};
  const std::vector<CommTerm> shared{{"param_gather", Window::every_micro_batch, across},
                                     {"param_spread", Window::first_forward, across}};
  CHECK(pipelined_step_seconds(u, 0.0, shared, {4.0, 4.0}) == doctest::Approx(14.0));
  // Gathers inside the node share nothing with the spread: gather 0 at 3-5 beside spread 1,
  // gather 1 at 5-7, compute 5-6 and 7-8, backward 8-12.
  const std::vector<CollectiveCall> inside{{comm::op_kind::all_gather, 1.0, 1.0, {4, 1}}};
  const std::vector<CommTerm> apart{{"param_gather", Window::every_micro_batch, inside},
                                    {"param_spread", Window::first_forward, across}};
  CHECK(pipelined_step_seconds(u, 0.0, apart, {4.0, 4.0}) == doctest::Approx(12.0));
}

TEST_CASE("pipelined step: the paper's terms are not the engine's; bad input") {
  const UnitSchedule u{halves, 2.0, 4.0, 1, 0.0, true};
  const std::vector<CommTerm> paper{{"T_p", Window::every_micro_batch}};
  CHECK(pipelined_step_seconds(u, 0.0, paper, {1.0}) < 0);
  CHECK_THROWS_WITH_AS((void)pipelined_step_seconds(u, 0.0, paper, {}), doctest::Contains("planner.pipeline"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)parameter_shares(std::vector<Module>{}), doctest::Contains("planner.units"), amsp::error);
  const std::vector<Module> units{{"a", 0, 100}, {"b", 1, 300}};
  CHECK(parameter_shares(units) == std::vector<double>{0.25, 0.75});
}
