#pragma once
// A strategy: N replicas (one per device) and their coordinator, as in
// tf.distribute.MirroredStrategy. This handle is the blocking convenience API
// for main, scripts and tests; async() gives the callback API for callers that
// are not actors; callers that are actors talk to the coordinator directly
// (varsync/actor_api.hpp). Copies of a handle share one strategy, which shuts
// down when the last handle goes away, on whatever thread (or at shutdown()).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/internal/by_value.hpp"
#include "varsync/cluster_spec.hpp"
#include "varsync/error.hpp"
#include "varsync/function_step.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/tensor.hpp"
#include "varsync/step_task.hpp"
#include "varsync/strategy_description.hpp"
#include "varsync/variable.hpp"
#include "varsync/distributed_values.hpp"
#include "varsync/replica_context.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace varsync {

struct strategy_options {
  /// One replica per device: "cpu:0", "cpu:1", ... (host memory).
  std::vector<std::string> devices{"cpu:0", "cpu:1"};
  /// Deadline of every call made through this handle (V3). Zero: the actor
  /// system config's "varsync.timeout-ms" if set, else 30 s.
  std::chrono::milliseconds timeout{0};
  /// A replica step that throws stops its replica (fail-stop, default) or
  /// only fails the step (varsync/step_task.hpp).
  on_step_exception step_exception = on_step_exception::stop_replica;
  /// Scheduler threads of an actor system the strategy creates itself
  /// (0: the number of cores). Ignored when embedding into a user's system.
  size_t scheduler_threads = 0;
  /// The most host memory varsync may hold in this process (components,
  /// creations in progress, cached buffers), checked before every request
  /// sized by the caller: one that does not fit fails with out_of_memory
  /// and changes nothing. Unset or 0: the actor system config's
  /// "varsync.memory-budget-mb" if set, else automatic (what the machine
  /// and the process's cgroup have available; docs/memory.md).
  std::optional<size_t> memory_budget_bytes;
  /// Overload bounds (V3): how many operations, and how many bytes of their
  /// tensor arguments, may wait in each queue of the strategy (calls of the
  /// blocking and async APIs outstanding, actor requests waiting for the
  /// coordinator, local requests deferred by a replica). Beyond them a
  /// request is refused at once with `overloaded` and changes nothing.
  /// Unset: the actor system config's "varsync.max-queued-operations" /
  /// "varsync.max-queued-mb" if set, else 4096 operations and 256 MiB.
  /// Zero is invalid_argument: there is no unbounded queue.
  std::optional<size_t> max_queued_operations;
  std::optional<size_t> max_queued_bytes;
  /// Steps on host replicas whose ON_WRITE contributions total at most this
  /// many bytes per replica take the small path: the coordinator combines
  /// the contributions it got with the step reports and every replica
  /// applies the results, one round instead of a collective's two. Its
  /// commit point comes once every replica has reported the step (V2): a
  /// replica that fails afterwards fails the step, and the survivors hold
  /// the update. 0: every step runs a collective. Default: the by-value
  /// rule, 4096 (varsync/internal/by_value.hpp).
  size_t small_step_bytes = by_value_bytes;
  /// Several processes (docs/multiprocess.md): each process creates the
  /// strategy with its own devices and the same cluster (ranks differ); the
  /// call returns once every process has joined. Replica ids run over the
  /// processes in rank order. Unset: this process only. Needs the
  /// cross-process transport (varsync::distributed).
  std::optional<cluster_spec> cluster;
  /// Metrics (docs/metrics.md): counts are always kept; false also skips
  /// the timing (a clock read per collective and per step reply).
  bool collect_metrics = true;
  /// A replica (or process) that keeps the others waiting longer than this
  /// in a step round (or collective round) is named in a warning in the
  /// log, at most once per replica every 10 s, and counted as a stall.
  /// Zero: no warnings; negative: invalid_argument.
  std::chrono::milliseconds stall_warning{1000};
  /// The flight recorder (M7): a strategy across processes always keeps
  /// its last operations; one in one process does where this is set (it
  /// costs about 0.15 us per operation, a few % of a local read).
  bool flight_recorder = false;
  /// M8: a directory where each process writes its flight recorder when an
  /// operation misses its deadline, a replica or process fails, or the
  /// processes fall out of step, and on SIGUSR1 (the recorder is then on):
  /// one file per process rank and reason, flight.RANK.REASON.json. Empty:
  /// the environment's `VARSYNC_FLIGHT_DIR`, or no dumps. It must be a
  /// writable directory.
  std::string flight_dump_dir;
};

namespace detail {
class strategy_core;
struct strategy_access;
} // namespace detail

class async_strategy;

template <class T>
using callback = std::function<void(caf::expected<T>)>;
using done_callback = std::function<void(caf::error)>;

/// What async_strategy::run(fn, done) calls back with: the error of the step
/// for a void fn, the per-replica results otherwise.
template <class R>
using run_callback = std::conditional_t<std::is_void_v<R>, done_callback,
                                        callback<per_replica<R>>>;

class strategy {
public:
  /// A strategy with its own actor system.
  static caf::expected<strategy> create(strategy_options options = {});
  /// A strategy inside an existing actor system, whose config went through
  /// varsync::register_types.
  static caf::expected<strategy> create(caf::actor_system& sys,
                                        strategy_options options = {});

  strategy(const strategy&) = default;
  strategy& operator=(const strategy&) = default;
  strategy(strategy&&) noexcept = default;
  strategy& operator=(strategy&&) noexcept = default;
  ~strategy();

  /// A handle to the same strategy whose calls use `timeout`.
  strategy with_timeout(std::chrono::milliseconds timeout) const;

  /// Every replica of the strategy, in all its processes.
  int num_replicas() const;
  /// The replicas in this process (one per device of `devices()`): ids
  /// first_local_replica() .. first_local_replica() + num_local_replicas() - 1.
  /// run() returns their results. Equal to num_replicas() in one process.
  int num_local_replicas() const;
  int first_local_replica() const;
  /// This process's rank among the strategy's processes, and their number
  /// (0 and 1 unless strategy_options::cluster spans several).
  int process_rank() const;
  int num_processes() const;
  /// Several processes in cluster_mode::services: any process issues
  /// cross-replica operations on its own, and process 0 orders them.
  bool services_mode() const;
  /// P14: returns once every process of the strategy has called barrier()
  /// as many times as this one; at once in one process.
  caf::error barrier() const;
  /// P15: the processes agree on an outcome. Each passes its own (`local`:
  /// none, or its error) and `what`, the same words in every process; each
  /// returns `local` where it failed, else the error of the first process
  /// that failed (its code; "process r failed <what>: <its message>"),
  /// none if all succeeded. In one process, and in services mode (where a
  /// process acts alone), it returns `local` at once.
  caf::error agree(caf::error local, std::string what) const;
  /// This process's devices.
  const std::vector<std::string>& devices() const;
  /// Devices and the collective that moves bulk data.
  std::string description() const;
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The memory budget (memory_budget_bytes; docs/memory.md): out_of_memory,
  /// naming `what`, the bytes and the budget, unless `bytes` more host
  /// memory fit in what varsync may hold in this process (cached buffers
  /// are handed back to the system first). Reserves nothing: for work of
  /// your own sized by its input (a file to load), checked before it
  /// allocates.
  caf::error check_host_memory(uint64_t bytes, const std::string& what) const;
  /// What the coordinator reports now: devices, collective, counters.
  caf::expected<strategy_description> stats() const;
  /// A metrics snapshot (M1-M4, varsync/ext/metrics.hpp): never queued behind
  /// operations nor refused as overloaded. varsync::advise(snapshot) gives
  /// the synchronization advisor's suggestions (varsync/ext/sync_advice.hpp);
  /// varsync::metrics_endpoint serves both over HTTP
  /// (varsync/ext/metrics_endpoint.hpp).
  caf::expected<strategy_metrics> metrics() const;
  /// M9: every process's snapshot, in rank order (one in one process):
  /// across processes a collective every process must issue in training
  /// mode (P4), ordered like any operation in services mode.
  caf::expected<std::vector<strategy_metrics>> metrics_of_processes() const;

  /// The callback API (callbacks run on the coordinator's thread: keep them
  /// short and never block in them). The blocking calls of this class fail
  /// at once with would_block when made from a callback, a replica step or an
  /// actor of the strategy's actor system. A call refused as `overloaded`
  /// (or made after shutdown) is called back at once, on the calling thread.
  async_strategy async() const;

  // -- variables -------------------------------------------------------------

  caf::expected<variable> create_variable(variable_spec spec) const;
  caf::expected<variable>
  create_variable(std::string name, tensor initial_value,
                  synchronization sync = synchronization::auto_,
                  aggregation agg = aggregation::none,
                  std::optional<bool> trainable = std::nullopt) const;
  caf::expected<variable> lookup(const std::string& name) const;
  /// C10: the variable named `name`, waiting until it exists here (created
  /// by this process or, across processes, by any) instead of failing as
  /// lookup does; `timeout` once the strategy's timeout passes (with_timeout
  /// for a longer wait).
  caf::expected<variable> wait_for_variable(const std::string& name) const;
  /// All variables, sorted by name.
  caf::expected<std::vector<variable>> variables() const;
  caf::error destroy(const variable& v) const;

  // -- cross-replica context --------------------------------------------------

  caf::expected<tensor> read(const variable& v) const;
  /// The cross-replica read of a one-element variable as T: exact for T's
  /// dtype, converted from another dtype only when the value is exactly
  /// representable as T (dtype_mismatch otherwise); shape_mismatch unless
  /// the variable holds exactly one element. T: float, double, int32_t or
  /// int64_t.
  template <class T>
  caf::expected<T> read_scalar(const variable& v) const {
    auto x = read(v);
    if (!x)
      return std::move(x.error());
    return scalar_as<T>(*x, read_scalar_context(v));
  }
  caf::error assign(const variable& v, const tensor& value) const;
  caf::error assign_add(const variable& v, const tensor& value) const;
  caf::error assign_sub(const variable& v, const tensor& value) const;
  /// Scalar overloads: `value` converted to the variable's dtype.
  caf::error assign(const variable& v, double value) const;
  caf::error assign_add(const variable& v, double value) const;
  caf::error assign_sub(const variable& v, double value) const;
  caf::error update(const variable& v, update_op op, const tensor& value) const;
  /// Sparse updates in cross-replica context (S4): `op` on the rows
  /// `slices.indices` with one row of `slices.values` each. ON_WRITE and
  /// NONE: every component (W3, N2); ON_READ sums and means keep their
  /// aggregate as R4 / R5 do, row by row. Host replicas only for now
  /// (invalid_argument on CUDA replicas).
  caf::error scatter(const variable& v, scatter_op op,
                     indexed_slices slices) const;
  caf::error scatter_update(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::update, std::move(slices));
  }
  caf::error scatter_add(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::add, std::move(slices));
  }
  caf::error scatter_sub(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::sub, std::move(slices));
  }
  caf::error scatter_mul(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::mul, std::move(slices));
  }
  caf::error scatter_div(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::div, std::move(slices));
  }
  caf::error scatter_min(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::min, std::move(slices));
  }
  caf::error scatter_max(const variable& v, indexed_slices slices) const {
    return scatter(v, scatter_op::max, std::move(slices));
  }
  /// Every replica's component, in replica id order, from every process:
  /// local_values in one process; across processes a collective every
  /// process must issue (row P4).
  caf::expected<std::vector<tensor>> all_values(const variable& v) const;
  /// The components of this process's replicas, in replica order (V1).
  caf::expected<std::vector<tensor>> local_values(const variable& v) const;
  /// The components of the replicas that have not failed, in replica order
  /// (nullopt where a replica failed): what survives a replica failure.
  caf::expected<std::vector<std::optional<tensor>>>
  survivor_values(const variable& v) const;

  // -- replica steps ------------------------------------------------------------

  /// Runs fn(replica_context&) on every replica; ON_WRITE updates of the
  /// step are applied together when every replica has finished. Returns the
  /// per-replica results (or the error only, for a void fn).
  template <step_function F>
  auto run(F fn) const {
    using result_type = step_result_t<F>;
    if constexpr (std::is_void_v<result_type>) {
      return run_step(make_step(std::move(fn), num_local_replicas(),
                                first_local_replica()));
    } else {
      auto made = make_step(std::move(fn), num_local_replicas(),
                                first_local_replica());
      using out = caf::expected<per_replica<result_type>>;
      if (auto err = run_step(std::move(made.step)))
        return out{std::move(err)};
      return out{made.results->take()};
    }
  }
  /// Runs a hand-written step (results, if any, stay in the step object).
  caf::error run(replica_step_ptr step) const { return run_step(std::move(step)); }

  // -- distributed values ---------------------------------------------------------

  /// D3: elementwise across replicas.
  caf::expected<tensor> reduce(reduce_op op,
                               const per_replica<tensor>& values) const;
  /// D4: across replicas and along `axis`; mean is the exact global mean.
  caf::expected<tensor> reduce(reduce_op op, const per_replica<tensor>& values,
                               int64_t axis) const;
  /// D5: sum of a mirrored x is N·x, mean is x.
  caf::expected<tensor> reduce(reduce_op op,
                               const mirrored<tensor>& value) const;
  /// D7: concatenation along `axis`.
  caf::expected<tensor> gather(const per_replica<tensor>& values,
                               int64_t axis) const;
  /// D8: the reduction, present on every replica.
  caf::expected<mirrored<tensor>>
  all_reduce(reduce_op op, const per_replica<tensor>& values) const;
  /// D8 for many tensors in one fused collective.
  caf::expected<std::vector<mirrored<tensor>>>
  batch_all_reduce(reduce_op op,
                   const std::vector<per_replica<tensor>>& values) const;

  /// Stops the replicas and the coordinator; later calls fail with
  /// shut_down. Idempotent.
  void shutdown() const;

private:
  friend class async_strategy;
  friend class weak_strategy;
  // varsync's own parts reach the shared state through it (api/).
  friend struct detail::strategy_access;

  strategy(std::shared_ptr<detail::strategy_core> core,
           std::chrono::milliseconds timeout);

  /// What errors of read_scalar start with.
  static std::string read_scalar_context(const variable& v) {
    return v.valid() ? "read_scalar of variable '" + v.name() + "'"
                     : std::string{"read_scalar"};
  }

  caf::error run_step(replica_step_ptr step) const;

  std::shared_ptr<detail::strategy_core> core_;
  std::chrono::milliseconds timeout_;
};

/// A handle that does not keep its strategy alive: for an actor of the
/// strategy's own actor system, a server or a cache that should stop with
/// the strategy rather than hold it (the strategy shuts down when its last
/// `strategy` handle goes away, whatever weak handles remain).
class weak_strategy {
public:
  weak_strategy() = default;
  explicit weak_strategy(const strategy& s)
    : core_(s.core_), timeout_(s.timeout_) {}

  /// A handle (with the timeout of the one this was made from) while one
  /// remains elsewhere; nullopt once the last has gone or the strategy was
  /// shut down.
  std::optional<strategy> lock() const;

private:
  std::weak_ptr<detail::strategy_core> core_;
  std::chrono::milliseconds timeout_{0};
};

/// True where the strategy keeps one value per component that no
/// aggregation joins (on_read + none, or synchronization none): a
/// checkpoint stores every component (K1).
bool is_per_component(const variable& v);

/// K6: the one value that the live components of a variable that is not
/// per component stand for when others are lost. `live` holds its
/// components by replica id (nullopt: lost, or not held here). `aggregate`
/// allows the aggregation of the live components where the value depends
/// on the lost ones (on_read + sum / mean). Errors: replica_failed saying
/// why no value follows; invalid_argument for a per-component variable or
/// an empty `live`.
caf::expected<tensor>
value_of_survivors(const variable& v,
                   const std::vector<std::optional<tensor>>& live,
                   bool aggregate);

/// Waits up to `limit` until every strategy whose last handle went away on a
/// thread other than the one that created it has finished shutting down (its
/// actor system is then destroyed by a thread of its own, so that any thread,
/// one of the system's own included, may release the last handle). True if
/// none is left. A process may call it before it exits.
bool await_strategy_shutdowns(std::chrono::milliseconds limit);

/// The callback API for callers that are not actors: the operations of the
/// blocking API, each taking a callback last. Callbacks run on the
/// coordinator's thread (keep them short, never block in them), except for
/// errors found before anything is sent and for the local computations
/// (reduce, gather), which call back at once on the calling thread.
class async_strategy {
public:
  explicit async_strategy(strategy s) : s_(std::move(s)) {}

  int num_replicas() const { return s_.num_replicas(); }
  int num_local_replicas() const { return s_.num_local_replicas(); }
  int first_local_replica() const { return s_.first_local_replica(); }
  /// See strategy::stats.
  void stats(callback<strategy_description> done) const;
  /// See strategy::metrics.
  void metrics(callback<strategy_metrics> done) const;
  /// See strategy::metrics_of_processes.
  void metrics_of_processes(callback<std::vector<strategy_metrics>> done) const;

  // -- variables ---------------------------------------------------------------

  void create_variable(variable_spec spec, callback<variable> done) const;
  void create_variable(std::string name, tensor initial_value,
                       callback<variable> done) const {
    create_variable(std::move(name), std::move(initial_value),
                    synchronization::auto_, aggregation::none, std::nullopt,
                    std::move(done));
  }
  void create_variable(std::string name, tensor initial_value,
                       synchronization sync, aggregation agg,
                       callback<variable> done) const {
    create_variable(std::move(name), std::move(initial_value), sync, agg,
                    std::nullopt, std::move(done));
  }
  void create_variable(std::string name, tensor initial_value,
                       synchronization sync, aggregation agg,
                       std::optional<bool> trainable,
                       callback<variable> done) const;
  void lookup(const std::string& name, callback<variable> done) const;
  /// See strategy::wait_for_variable.
  void wait_for_variable(const std::string& name,
                         callback<variable> done) const;
  /// See strategy::barrier.
  void barrier(done_callback done) const;
  /// See strategy::agree.
  void agree(caf::error local, std::string what, done_callback done) const;
  /// All variables, sorted by name.
  void variables(callback<std::vector<variable>> done) const;
  void destroy(const variable& v, done_callback done) const;

  // -- cross-replica context ----------------------------------------------------

  void read(const variable& v, callback<tensor> done) const;
  /// See strategy::read_scalar.
  template <class T>
  void read_scalar(const variable& v, callback<T> done) const {
    read(v, [what = strategy::read_scalar_context(v),
             done = std::move(done)](caf::expected<tensor> x) {
      if (!x)
        return done(std::move(x.error()));
      done(scalar_as<T>(*x, what));
    });
  }
  void update(const variable& v, update_op op, tensor value,
              done_callback done) const;
  void assign(const variable& v, tensor value, done_callback done) const {
    update(v, update_op::assign, std::move(value), std::move(done));
  }
  void assign_add(const variable& v, tensor value, done_callback done) const {
    update(v, update_op::assign_add, std::move(value), std::move(done));
  }
  void assign_sub(const variable& v, tensor value, done_callback done) const {
    update(v, update_op::assign_sub, std::move(value), std::move(done));
  }
  /// See strategy::scatter.
  void scatter(const variable& v, scatter_op op, indexed_slices slices,
               done_callback done) const;
  /// Scalar overloads: `value` converted to the variable's dtype.
  void update(const variable& v, update_op op, double value,
              done_callback done) const;
  void assign(const variable& v, double value, done_callback done) const {
    update(v, update_op::assign, value, std::move(done));
  }
  void assign_add(const variable& v, double value, done_callback done) const {
    update(v, update_op::assign_add, value, std::move(done));
  }
  void assign_sub(const variable& v, double value, done_callback done) const {
    update(v, update_op::assign_sub, value, std::move(done));
  }
  /// See strategy::all_values.
  void all_values(const variable& v,
                  callback<std::vector<tensor>> done) const;
  void local_values(const variable& v,
                    callback<std::vector<tensor>> done) const;
  /// See strategy::survivor_values.
  void survivor_values(const variable& v,
                       callback<std::vector<std::optional<tensor>>> done) const;

  // -- replica steps ------------------------------------------------------------

  /// Runs a step; `done` gets the error of the step, if any. Results of a
  /// value-returning step are reachable through `step` itself.
  void run(replica_step_ptr step, done_callback done) const;
  /// Runs fn(replica_context&) on every replica, as strategy::run(fn) does;
  /// `done` gets the per-replica results (callback<per_replica<R>>), or the
  /// error only for a void fn (done_callback).
  template <step_function F>
  void run(F fn, run_callback<step_result_t<F>> done) const {
    if constexpr (std::is_void_v<step_result_t<F>>) {
      run(make_step(std::move(fn), num_local_replicas(),
                                first_local_replica()), std::move(done));
    } else {
      auto made = make_step(std::move(fn), num_local_replicas(),
                                first_local_replica());
      run(std::move(made.step),
          [results = std::move(made.results),
           done = std::move(done)](caf::error err) {
            if (err)
              return done(std::move(err));
            done(results->take());
          });
    }
  }

  // -- distributed values -------------------------------------------------------

  /// D3, D4 and D5 (see strategy::reduce): computed on the calling thread.
  void reduce(reduce_op op, const per_replica<tensor>& values,
              callback<tensor> done) const;
  void reduce(reduce_op op, const per_replica<tensor>& values, int64_t axis,
              callback<tensor> done) const;
  void reduce(reduce_op op, const mirrored<tensor>& value,
              callback<tensor> done) const;
  /// D7 (see strategy::gather): computed on the calling thread.
  void gather(const per_replica<tensor>& values, int64_t axis,
              callback<tensor> done) const;
  /// D8: the reduction, present on every replica.
  void all_reduce(reduce_op op, per_replica<tensor> values,
                  callback<mirrored<tensor>> done) const;
  /// D8 for many tensors in one fused collective.
  void batch_all_reduce(reduce_op op, std::vector<per_replica<tensor>> values,
                        callback<std::vector<mirrored<tensor>>> done) const;
  /// The batch form under its old name: prefer batch_all_reduce.
  void all_reduce(reduce_op op, std::vector<per_replica<tensor>> values,
                  callback<std::vector<mirrored<tensor>>> done) const {
    batch_all_reduce(op, std::move(values), std::move(done));
  }

private:
  strategy s_;
};

} // namespace varsync
