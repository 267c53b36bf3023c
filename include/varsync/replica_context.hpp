#pragma once
// What a replica step sees: its replica id, the replica count, its device, a
// zero-copy view of its local components, and updates that follow each
// variable's policy (ON_WRITE: recorded and applied collectively when the step
// completes; ON_READ and NONE: applied to the local component at once).

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/tensor.hpp"
#include "varsync/device_id.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/variable.hpp"
#include "varsync/step_task.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/dtype.hpp"

// -- device view -------------------------------------------------------------
// What a replica step gets to work on its local components where they live:
// a view of component memory on the replica's device (host memory for cpu:K,
// GPU memory for cuda:K) and the replica's stream, both without CUDA types so
// that this header compiles everywhere. CUDA code casts the stream with
// varsync/ext/cuda_stream.hpp.
namespace varsync {

/// A replica's local component in its device's memory. Valid until the step
/// returns. `data` is a device pointer on a cuda:K replica: dereference it
/// only in kernels launched on the replica's stream (replica_context::stream)
/// or ordered after it.
///
/// Writing through `data` is allowed for ON_READ and NONE variables (their
/// components are local, R1 / N1). ON_WRITE components must change only
/// through replica_context::update, or the replicas drift apart (W7).
struct device_view {
  dtype type = dtype::float32;
  const tensor_shape* shape = nullptr;
  void* data = nullptr;
  int64_t size = 0;
  device_id device;

  /// The data as T (T must have the dtype's width: uint16_t for float16 and
  /// bfloat16, float, double, int32_t, int64_t); nullptr if it has not.
  template <class T>
  T* as() const {
    return sizeof(T) == size_of(type) ? static_cast<T*>(data) : nullptr;
  }
  size_t nbytes() const { return static_cast<size_t>(size) * size_of(type); }
  /// True if host code may dereference `data` (cpu:K replicas).
  bool host_accessible() const { return device.kind == device_kind::host; }
};

/// A replica's stream as an opaque handle: a cudaStream_t on cuda:K
/// replicas, null on host replicas (their steps run synchronously).
struct stream_handle {
  void* native = nullptr;
  explicit operator bool() const { return native != nullptr; }
};

} // namespace varsync

namespace varsync {

namespace detail {

/// Implemented by the replica actor that runs the step.
class replica_access {
public:
  virtual ~replica_access() = default;
  virtual int replica_id() const = 0;
  virtual int num_replicas() const = 0;
  virtual device_id device() const = 0;
  virtual caf::expected<tensor_view> read(const variable_info& v) = 0;
  virtual caf::error update(const variable_info& v, update_op op,
                            const tensor& value) = 0;
  /// An ON_WRITE update whose value every replica computes alike.
  virtual caf::error update_mirrored(const variable_info& v, update_op op,
                                     const tensor& value) = 0;
  /// A scalar update without building a tensor where the policy allows.
  virtual caf::error update_scalar(const variable_info& v, update_op op,
                                   double value) = 0;
  virtual caf::error scatter(const variable_info& v, scatter_op op,
                             const std::vector<int64_t>& indices,
                             const tensor& values) = 0;
  virtual caf::expected<device_view> device_pointer(const variable_info& v) = 0;
  virtual stream_handle stream() const = 0;
  virtual caf::error update_from_device(const variable_info& v, update_op op,
                                        const void* data) = 0;
  virtual caf::expected<device_view>
  contribution_buffer(const variable_info& v) = 0;
  /// Coroutine steps (X2): the root task of this replica's step, run until
  /// it suspends or ends.
  virtual void start_coroutine(step_task<void> root) = 0;
  /// The step suspends at `request`; the replica resumes `at` once the
  /// collective's result is in.
  virtual void suspend_at(step_collective request,
                          std::coroutine_handle<> at) = 0;
  /// The result of the collective the step was resumed from.
  virtual std::vector<tensor> take_collective_result() = 0;
};

/// What `co_await ctx.all_reduce(...)` and the other in-step collectives
/// wait on: T is tensor (one value) or std::vector<tensor> (several, fused
/// into one collective).
template <class T>
class [[nodiscard]] collective_awaiter : public step_awaitable {
public:
  collective_awaiter(replica_access& impl, step_collective request)
    : impl_(&impl), request_(std::move(request)) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> at) {
    impl_->suspend_at(std::move(request_), at);
  }
  T await_resume() {
    auto out = impl_->take_collective_result();
    if constexpr (std::is_same_v<T, tensor>)
      return out.empty() ? tensor{} : std::move(out.front());
    else
      return out;
  }

private:
  replica_access* impl_;
  step_collective request_;
};

} // namespace detail

class replica_context {
public:
  explicit replica_context(detail::replica_access& impl) : impl_(&impl) {}

  int replica_id() const { return impl_->replica_id(); }
  int num_replicas() const { return impl_->num_replicas(); }
  device_id device() const { return impl_->device(); }

  /// The local component as host memory; valid until the step returns.
  /// Zero-copy on cpu:K replicas; on cuda:K replicas a host copy made for
  /// this call (one device-to-host transfer: use device_pointer to stay on
  /// the GPU).
  caf::expected<tensor_view> read(const variable& v) const;
  /// A copy of the local component.
  caf::expected<tensor> read_copy(const variable& v) const;

  /// The local component where it lives (GPU memory on cuda:K replicas, host
  /// memory on cpu:K), without copying; valid until the step returns. See
  /// device_view for what may be written through it.
  caf::expected<device_view> device_pointer(const variable& v) const;
  /// The replica's stream (a cudaStream_t on cuda:K replicas, null on host
  /// replicas; varsync/ext/cuda_stream.hpp casts it). Work the step launches on
  /// it is complete before the step's ON_WRITE collective reads or writes
  /// any component, and before any later operation on this replica.
  stream_handle stream() const;
  /// update(v, op, value) with the value in the replica's device memory:
  /// `data` holds as many elements of v's dtype as v has, on the replica's
  /// device, written by work on stream() (or earlier); it may be reused as
  /// soon as the call returns (by work on stream()). ON_READ and NONE: an
  /// update kernel on the stream, no copy. ON_WRITE: the contribution joins
  /// the step's collective and stays on the device: no copy for a buffer
  /// from contribution_buffer(v), else one device-to-device copy on the
  /// stream. Exceptions, staged through host memory (docs/cuda.md): integer
  /// variables (the overflow check of V4 runs on the host) and aggregation
  /// NONE (the equality check of W4), and every value on host replicas.
  caf::error update_from_device(const variable& v, update_op op,
                                const void* data);

  /// A buffer for one ON_WRITE contribution to v, on the replica's device,
  /// sized and typed like v's component, uninitialized: fill it (kernels on
  /// stream()) and pass it to update_from_device(v, op, view.data), which
  /// then takes it without a copy. Valid until the step returns; each call
  /// gives a new buffer. invalid_argument for variables that are not
  /// ON_WRITE (their updates apply in place: pass any buffer).
  caf::expected<device_view> contribution_buffer(const variable& v);

  caf::error assign(const variable& v, const tensor& value);
  caf::error assign_add(const variable& v, const tensor& value);
  caf::error assign_sub(const variable& v, const tensor& value);
  /// Scalar overloads: `value` converted to the variable's dtype.
  caf::error assign(const variable& v, double value);
  caf::error assign_add(const variable& v, double value);
  caf::error assign_sub(const variable& v, double value);

  caf::error update(const variable& v, update_op op, const tensor& value);

  /// An ON_WRITE update whose value is the same on every replica by
  /// construction (computed from all-reduced values, as an optimizer does):
  /// replica 0's value is applied to every component whatever the
  /// variable's aggregation (TensorFlow's `extended.update`), so a mean or
  /// sum of N equal values never rounds or multiplies it. Recorded and
  /// applied with the step's other updates (W6 compares this form too);
  /// invalid_argument for variables that are not ON_WRITE.
  caf::error update_mirrored(const variable& v, update_op op,
                             const tensor& value);

  /// Sparse updates (S1-S5): `op` on the rows `indices` (along the first
  /// axis) with one row of `values` each ([k, d1, ...] for a variable of
  /// shape [d0, d1, ...]). ON_WRITE: recorded, combined with the other
  /// replicas' row by row (W4) and applied with the step's other updates,
  /// in issue order, moving only the rows named. ON_READ and NONE: applied
  /// to the local component at once (TensorFlow refuses these). Duplicate
  /// indices combine first (add/sub: summed, mul/div: multiplied, min/max:
  /// the extreme, update: the last). Host replicas only for now
  /// (invalid_argument on CUDA replicas).
  caf::error scatter(const variable& v, scatter_op op,
                     const std::vector<int64_t>& indices,
                     const tensor& values);
  caf::error scatter_update(const variable& v,
                            const std::vector<int64_t>& indices,
                            const tensor& values) {
    return scatter(v, scatter_op::update, indices, values);
  }
  caf::error scatter_add(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::add, indices, values);
  }
  caf::error scatter_sub(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::sub, indices, values);
  }
  caf::error scatter_mul(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::mul, indices, values);
  }
  caf::error scatter_div(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::div, indices, values);
  }
  caf::error scatter_min(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::min, indices, values);
  }
  caf::error scatter_max(const variable& v, const std::vector<int64_t>& indices,
                         const tensor& values) {
    return scatter(v, scatter_op::max, indices, values);
  }

  /// Collectives inside a step (X1-X5), for coroutine steps (step_task):
  /// every replica's step must reach the same collective with values of
  /// the same dtypes and shapes; the step suspends (its replica serves no
  /// other operation of the strategy meanwhile, and holds no thread) and
  /// resumes with the result. Replicas that reach different collectives,
  /// or one that ends its step while another waits, fail the step with
  /// mismatched_replica_updates; a failed collective fails the step. A
  /// failed step applies none of its ON_WRITE updates.
  ///
  /// all_reduce: `op` over the replicas' values, element by element; every
  /// replica gets the same result (mean of integers is refused).
  detail::collective_awaiter<tensor> all_reduce(reduce_op op, tensor value);
  /// Several values reduced in one collective (one round, not one each).
  detail::collective_awaiter<std::vector<tensor>>
  all_reduce(reduce_op op, std::vector<tensor> values);
  /// The replicas' values joined along `axis` (negative: from the end) in
  /// replica order: shape [d0, ..., N * d_axis, ...]; rank >= 1.
  detail::collective_awaiter<tensor> all_gather(tensor value, int64_t axis = 0);
  detail::collective_awaiter<std::vector<tensor>>
  all_gather(std::vector<tensor> values, int64_t axis = 0);
  /// Replica `root`'s value, on every replica (the others' values give only
  /// the dtype and shape, which must match root's).
  detail::collective_awaiter<tensor> broadcast(tensor value, int root = 0);
  detail::collective_awaiter<std::vector<tensor>>
  broadcast(std::vector<tensor> values, int root = 0);

private:
  template <class R, class F>
  friend class coroutine_step;

  detail::replica_access* impl_;
};

} // namespace varsync
