// Bad input to the engine fails with an amsp::error naming the rule, on every rank, never a hang.
#include <doctest/doctest.h>

#include <string>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "rule_of_error.hpp"

namespace {

using Threads = amsp::comm::ThreadsCommunicator;
using Engine = amsp::ShardedOptimizer<Threads, amsp::optim::AdamW>;

using amsp::test::rule_of_error;

}  // namespace

TEST_CASE("a world that does not fill the mesh is rejected") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model());
        }, amsp::Mesh(2, 2), 3) == "mesh.world_size");
}

TEST_CASE("an invalid plan names its rule") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::Plan{{2, 1}, {1, 1}, {2, 1}}, {}, amsp::test::odd_model());
        }) == "plan.ordering");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          amsp::EngineOptions o;
          o.os_layout = amsp::OsLayout::whole_tensor;
          Engine opt(comm, mesh, amsp::preset("zero2", mesh), {}, amsp::test::odd_model(), o);
        }) == "engine.whole_tensor_layout");
}

TEST_CASE("buckets: none, empty, duplicate names") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) { Engine opt(comm, mesh, amsp::preset("ddp", mesh), {}, {}); }) ==
        "engine.buckets");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("ddp", mesh), {}, {{"a", {}}});
        }) == "engine.buckets");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("ddp", mesh), {},
                     {{"a", {{"w", {3}, amsp::dtype::fp32}}}, {"b", {{"w", {4}, amsp::dtype::fp32}}}});
        }) == "engine.buckets");
}

TEST_CASE("gradients for an unknown bucket") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero2", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(true);
          opt.reduce_gradients(7);
        }) == "engine.unknown_bucket");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero2", mesh), {}, amsp::test::odd_model());
          (void)opt.bucket_index("no-such-layer");
        }) == "engine.unknown_bucket");
}

TEST_CASE("step without gradients, or with some buckets missing") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          opt.step();
        }) == "engine.step_without_gradients");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(true);
          (void)opt.grad_buffer(0);
          opt.reduce_gradients(0);
          opt.step();
        }) == "engine.step_without_gradients");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          (void)opt.grad_buffer(0);
        }) == "engine.no_micro_batch");
}

TEST_CASE("gradients handed twice in one micro-batch, or a micro-batch left incomplete") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(false);
          (void)opt.grad_buffer(1);
          opt.reduce_gradients(1);
          (void)opt.grad_buffer(1);
        }) == "engine.gradient_twice");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("ddp", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(false);
          opt.start_micro_batch(true);
        }) == "engine.incomplete_micro_batch");
}

TEST_CASE("tensors whose sizes change between steps") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {}, {{"a", {{"w", {5}, amsp::dtype::fp32}}}});
          std::vector<float> g(5, 1.0f);
          for (int step = 0; step < 2; ++step) {
            if (step == 1) g.resize(6, 1.0f);  // the user's tensor grew
            opt.start_micro_batch(true);
            const amsp::tensor_view v = amsp::view_of(std::span<const float>(g));
            opt.reduce_gradients(0, std::span<const amsp::tensor_view>(&v, 1));
            opt.step();
          }
        }) == "engine.tensor_size");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {}, {{"a", {{"w", {5}, amsp::dtype::fp32}}}});
          std::vector<float> init(4, 1.0f);
          opt.set_tensor("w", std::span<const float>(init));
        }) == "engine.tensor_size");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {}, {{"a", {{"w", {5}, amsp::dtype::fp32}}}});
          std::vector<float> init(5, 1.0f);
          opt.set_tensor("v", std::span<const float>(init));
        }) == "engine.unknown_tensor");
}

TEST_CASE("a bucket gathered twice without release") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {}, amsp::test::odd_model());
          (void)opt.gather(0);
          (void)opt.gather(0);
        }) == "engine.gather_twice");
}

TEST_CASE("gradients or parameters handed with the wrong number of tensors") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {},
                     {{"a", {{"w", {5}, amsp::dtype::fp32}, {"b", {3}, amsp::dtype::fp32}}}});
          std::vector<float> g(5, 1.0f);  // "w" only: "b" is missing
          opt.start_micro_batch(true);
          const amsp::tensor_view v = amsp::view_of(std::span<const float>(g));
          opt.reduce_gradients(0, std::span<const amsp::tensor_view>(&v, 1));
        }) == "engine.tensor_count");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {},
                     {{"a", {{"w", {5}, amsp::dtype::fp32}, {"b", {3}, amsp::dtype::fp32}}}});
          std::vector<float> p(5, 0.0f);
          const amsp::tensor_view v = amsp::view_of(std::span<float>(p));
          opt.gather_into(0, std::span<const amsp::tensor_view>(&v, 1));
        }) == "engine.tensor_count");
}

TEST_CASE("a micro-batch started, or the parameters refreshed, while a step is pending") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(true);
          for (int b = 0; b < opt.bucket_count(); ++b) {
            (void)opt.grad_buffer(b);
            opt.reduce_gradients(b);
          }
          opt.start_micro_batch(false);  // step() was not called
        }) == "engine.step_pending");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(false);
          opt.refresh_params_from_master();
        }) == "engine.step_pending");
}

TEST_CASE("reduce_gradients(b) without grad_buffer(b)") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero2", mesh), {}, amsp::test::odd_model());
          opt.start_micro_batch(true);
          opt.reduce_gradients(0);
        }) == "engine.no_gradients");
}

TEST_CASE("a state index outside the rule's states") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          (void)opt.state_shard(0, amsp::optim::AdamW::state_count);
        }) == "engine.unknown_state");
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          (void)opt.state_shard(0, -1);
        }) == "engine.unknown_state");
}

TEST_CASE("a negative step count restored") {
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero1", mesh), {}, amsp::test::odd_model());
          opt.set_steps(-1);
        }) == "engine.step_count");
}

TEST_CASE("a host engine handed device tensors") {
  // The views claim CUDA memory (their bytes are host memory, never read: the check comes first).
  CHECK(rule_of_error([](Threads& comm, const amsp::Mesh& mesh) {
          Engine opt(comm, mesh, amsp::preset("zero3", mesh), {}, {{"a", {{"w", {5}, amsp::dtype::fp32}}}});
          std::vector<float> g(5, 1.0f);
          amsp::tensor_view v = amsp::view_of(std::span<const float>(g));
          v.space = amsp::memory_kind::cuda;
          opt.start_micro_batch(true);
          opt.reduce_gradients(0, std::span<const amsp::tensor_view>(&v, 1));
        }) == "engine.memory_space");
}

TEST_CASE("an unknown optimizer-state layout name") {
  CHECK(amsp::parse_os_layout("even_split") == amsp::OsLayout::even_split);
  CHECK(amsp::parse_os_layout("whole_tensor") == amsp::OsLayout::whole_tensor);
  CHECK(amsp::parse_os_layout(amsp::name_of(amsp::OsLayout::whole_tensor)) == amsp::OsLayout::whole_tensor);
  CHECK_THROWS_WITH_AS((void)amsp::parse_os_layout("evensplit"), doctest::Contains("[rule engine.os_layout]"),
                       amsp::error);
  CHECK_THROWS_WITH_AS((void)amsp::parse_os_layout("evensplit"), doctest::Contains("'evensplit'"), amsp::error);
}
