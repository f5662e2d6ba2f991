// amsp-profile times each collective in the form the engine issues it (asynchronous or blocking:
// amsp_profile::issued_nonblocking with CallForms::engine), because Open MPI runs the two forms in
// different components that pace large calls differently on the emulated cluster (docs/cluster.md).
// This runs the engine on every plan of two meshes, in both host spaces, through a communicator
// that records which form each collective came in, and checks the profile's rule against it.
#include <doctest/doctest.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "amsp/comm/threads.hpp"
#include "amsp/optim/adam.hpp"
#include "amsp/sharding.hpp"
#include "engine_runner.hpp"
#include "measure_collectives.hpp"

namespace {

using amsp::comm::Handle;
using amsp::comm::op_kind;
using amsp::comm::reduce_op;

/// (op, issued asynchronously) pairs seen on any rank.
struct FormLog {
  std::mutex mutex;
  std::set<std::pair<op_kind, bool>> seen;
  void add(op_kind op, bool async) {
    const std::lock_guard lock(mutex);
    seen.emplace(op, async);
  }
};

/// Forwards every call to the threads backend and logs its form.
class FormRecorder {
public:
  FormRecorder(amsp::comm::ThreadsCommunicator inner, std::shared_ptr<FormLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  [[nodiscard]] int rank() const { return inner_.rank(); }
  [[nodiscard]] int size() const { return inner_.size(); }
  void barrier() { inner_.barrier(); }
  [[nodiscard]] FormRecorder split(const amsp::GroupSet& groups) { return {inner_.split(groups), log_}; }

  template <class T>
  void all_gather(const T* s, T* r, std::size_t n) {
    log_->add(op_kind::all_gather, false);
    inner_.all_gather(s, r, n);
  }
  template <class T>
  void reduce_scatter(const T* s, T* r, std::size_t n, reduce_op op = reduce_op::sum) {
    log_->add(op_kind::reduce_scatter, false);
    inner_.reduce_scatter(s, r, n, op);
  }
  template <class T>
  void all_reduce(const T* s, T* r, std::size_t n, reduce_op op = reduce_op::sum) {
    log_->add(op_kind::all_reduce, false);
    inner_.all_reduce(s, r, n, op);
  }
  template <class T>
  void broadcast(const T* s, T* r, std::size_t n, int root) {
    log_->add(op_kind::broadcast, false);
    inner_.broadcast(s, r, n, root);
  }
  template <class T>
  void reduce(const T* s, T* r, std::size_t n, reduce_op op, int root) {
    log_->add(op_kind::reduce, false);
    inner_.reduce(s, r, n, op, root);
  }
  template <class T>
  [[nodiscard]] Handle all_gather_async(const T* s, T* r, std::size_t n) {
    log_->add(op_kind::all_gather, true);
    return inner_.all_gather_async(s, r, n);
  }
  template <class T>
  [[nodiscard]] Handle reduce_scatter_async(const T* s, T* r, std::size_t n, reduce_op op = reduce_op::sum) {
    log_->add(op_kind::reduce_scatter, true);
    return inner_.reduce_scatter_async(s, r, n, op);
  }
  template <class T>
  [[nodiscard]] Handle all_reduce_async(const T* s, T* r, std::size_t n, reduce_op op = reduce_op::sum) {
    log_->add(op_kind::all_reduce, true);
    return inner_.all_reduce_async(s, r, n, op);
  }
  template <class T>
  [[nodiscard]] Handle broadcast_async(const T* s, T* r, std::size_t n, int root) {
    log_->add(op_kind::broadcast, true);
    return inner_.broadcast_async(s, r, n, root);
  }
  template <class T>
  [[nodiscard]] Handle reduce_async(const T* s, T* r, std::size_t n, reduce_op op, int root) {
    log_->add(op_kind::reduce, true);
    return inner_.reduce_async(s, r, n, op, root);
  }

private:
  amsp::comm::ThreadsCommunicator inner_;
  std::shared_ptr<FormLog> log_;
};
static_assert(amsp::comm::communicator<FormRecorder>);

template <class Space>
std::set<std::pair<op_kind, bool>> forms_the_engine_issues(const amsp::Mesh& mesh, amsp::OsLayout layout) {
  auto log = std::make_shared<FormLog>();
  amsp::test::JobConfig job;
  job.steps = 1;
  job.micro_batches = 2;
  job.max_grad_norm = 1.0f;  // the norm's AllReduce too
  job.os_layout = layout;
  for (const amsp::Plan& plan : amsp::enumerate_plans(mesh)) {
    if (!amsp::layout_supports(layout, plan)) continue;
    amsp::comm::run_on_threads(mesh.world_size(), [&](amsp::comm::ThreadsCommunicator& threads) {
      FormRecorder comm(std::move(threads), log);
      (void)amsp::test::run_job<FormRecorder, amsp::optim::AdamW, float, Space>(comm, mesh, plan, amsp::optim::AdamW{},
                                                                               job);
    });
  }
  return log->seen;
}

}  // namespace

TEST_CASE_TEMPLATE("profile: the engine issues each collective in the form amsp-profile times", Space, amsp::HostSerial,
                   amsp::HostAsync) {
  std::set<std::pair<op_kind, bool>> seen;
  for (const amsp::Mesh& mesh : {amsp::Mesh(2, 2), amsp::Mesh(2, 4)})
    for (amsp::OsLayout layout : {amsp::OsLayout::even_split, amsp::OsLayout::whole_tensor}) {
      const auto mine = forms_the_engine_issues<Space>(mesh, layout);
      seen.insert(mine.begin(), mine.end());
    }
  // The engine's collectives, each in one form only, and the one the profile times.
  std::set<op_kind> ops;
  for (const auto& [op, async] : seen) {
    CAPTURE(amsp::comm::name_of(op));
    CAPTURE(async);
    CHECK(ops.insert(op).second);
    CHECK(async == amsp_profile::issued_nonblocking(amsp_profile::CallForms::engine, op));
  }
  // The sweep reached every kind of collective (whole-tensor layouts broadcast and reduce).
  std::string reached;
  for (op_kind op : ops) reached += std::string(amsp::comm::name_of(op)) + " ";
  CAPTURE(reached);
  CHECK(ops == std::set<op_kind>{op_kind::all_gather, op_kind::reduce_scatter, op_kind::all_reduce, op_kind::broadcast,
                                 op_kind::reduce});
}

TEST_CASE("profile: the other call forms") {
  for (op_kind op : {op_kind::all_gather, op_kind::reduce_scatter, op_kind::all_reduce, op_kind::broadcast, op_kind::reduce}) {
    CHECK_FALSE(amsp_profile::issued_nonblocking(amsp_profile::CallForms::blocking, op));
    CHECK(amsp_profile::issued_nonblocking(amsp_profile::CallForms::nonblocking, op));
  }
}
