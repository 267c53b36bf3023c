#pragma once
// Shared helpers of the rule-table tests: strategies over host replicas (or
// GPUs, in the gpu-labelled build: test_devices) and snapshots of every
// component, to prove that failing calls change nothing.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "varsync/varsync.hpp"
#include "varsync/ext/testing.hpp"
#ifdef VARSYNC_SEMANTICS_ON_GPU
#include <cuda_runtime.h>

#include "devices/cuda/cuda_device.hpp"
#include "varsync/ext/cuda_stream.hpp"
#endif

namespace vs_test {

using namespace varsync;
using namespace std::chrono_literals;

/// The devices of a rule-table strategy of `replicas` replicas: cpu:0 ..
/// cpu:N-1. The gpu-labelled build of these sources (tests/gpu,
/// VARSYNC_SEMANTICS_ON_GPU) puts them on GPUs instead, in the layout named by
/// the environment variable VARSYNC_TEST_LAYOUT:
///   one-gpu (default)  every replica on cuda:0: N logical replicas of one
///                      GPU (the same-GPU path); N = 1 is plain cuda:0
///   gpus               replica r on cuda:(r mod G), G = the visible GPUs (an
///                      NCCL clique where N <= G)
///   mixed              replica 0 on cpu:0, the others on cuda:0 (host
///                      staging; N = 1 stays on cuda:0)
inline std::vector<std::string> test_devices(int replicas) {
  std::vector<std::string> out;
#ifdef VARSYNC_SEMANTICS_ON_GPU
  const char* env = std::getenv("VARSYNC_TEST_LAYOUT");
  const std::string layout = env != nullptr && *env ? env : "one-gpu";
  int gpus = std::max(1, varsync::cuda_device_count());
  for (int r = 0; r < replicas; ++r) {
    if (layout == "gpus")
      out.push_back("cuda:" + std::to_string(r % gpus));
    else if (layout == "mixed" && r == 0 && replicas > 1)
      out.push_back("cpu:0");
    else
      out.push_back("cuda:0");
  }
#else
  for (int r = 0; r < replicas; ++r)
    out.push_back("cpu:" + std::to_string(r));
#endif
  return out;
}

/// The rule table across processes (tests/semantics/run_across_processes.sh
/// starts P copies of this binary with the same test cases): with
/// VARSYNC_TEST_PROCESSES=P, VARSYNC_TEST_RANK and VARSYNC_TEST_PORT, a
/// strategy of N replicas spans min(N, P) processes in training mode (every
/// process runs the same test case: SPMD). With N >= P, process r holds
/// N/P replicas, one more for r < N mod P (3 over 2: 2 + 1), so uneven
/// layouts run too; with N < P, processes 0 .. N-1 hold one replica each and
/// the others make a strategy of their own alone. The k-th strategy a test
/// binary makes uses rendezvous port VARSYNC_TEST_PORT + (k mod 200) in
/// every process. The processes use the transport chosen automatically
/// (shared memory on this host), Gloo with VARSYNC_TEST_TRANSPORT=gloo.
/// True in a run across processes (VARSYNC_TEST_PROCESSES).
inline bool across_processes() {
  return std::getenv("VARSYNC_TEST_PROCESSES") != nullptr;
}

/// True when the last strategy made in a run across processes is this
/// process's alone (its replica count does not split): files it writes
/// must then not be shared with the other processes (local_file).
inline bool& last_strategy_local() {
  static bool local = false;
  return local;
}

inline std::optional<cluster_spec> test_cluster(int replicas,
                                                int& local_replicas) {
  static int made = 0;
  local_replicas = replicas;
  last_strategy_local() = across_processes();
  const char* procs = std::getenv("VARSYNC_TEST_PROCESSES");
  const char* rank = std::getenv("VARSYNC_TEST_RANK");
  const char* port = std::getenv("VARSYNC_TEST_PORT");
  if (procs == nullptr || rank == nullptr || port == nullptr)
    return std::nullopt;
  const int p = std::min(std::atoi(procs), replicas);
  const int r = std::atoi(rank);
  const int k = made++;
  if (p < 2 || r >= p)
    return std::nullopt;
  cluster_spec spec;
  spec.world_size = p;
  spec.rank = r;
  spec.rendezvous_port = static_cast<uint16_t>(std::atoi(port) + k % 200);
  spec.join_timeout = 30s;
  spec.operation_timeout = 20s;
  spec.group_name = "semantics-" + std::to_string(k);
  // VARSYNC_TEST_TRANSPORT=gloo: Gloo over TCP instead of the shared memory
  // that processes on one host use otherwise.
  if (const char* t = std::getenv("VARSYNC_TEST_TRANSPORT");
      t != nullptr && std::string{t} == "gloo")
    spec.transport = host_transport::gloo;
  local_replicas = replicas / p + (r < replicas % p ? 1 : 0);
  last_strategy_local() = false;
  return spec;
}

/// strategy::create (with `faults` injected, if any), or the test fails
/// with its error.
inline strategy create_or_fail(const strategy_options& options,
                               std::vector<replica_fault> faults = {}) {
  auto s = faults.empty()
             ? strategy::create(options)
             : varsync::testing::create_with_faults(options, std::move(faults));
  if (!s)
    FAIL("strategy::create failed: " << describe(s.error()));
  return std::move(*s);
}

/// A strategy of `replicas` made with `options` and `faults` (devices,
/// cluster and scheduler threads filled in as make_strategy does).
inline strategy make_strategy_with(int replicas, strategy_options options,
                                   std::vector<replica_fault> faults = {}) {
  int local = replicas;
  options.cluster = test_cluster(replicas, local);
  options.devices = test_devices(local);
  options.scheduler_threads = 2;
  if (options.timeout.count() == 0)
    options.timeout = 20s;
  return create_or_fail(options, std::move(faults));
}

/// A strategy of `replicas` host replicas in this process, whatever layout
/// the rule table runs in: for the tests about host memory and injected
/// faults (`faults`). A zero timeout in `options` becomes 20 s.
inline strategy make_host_strategy(int replicas,
                                   strategy_options options = {},
                                   std::vector<replica_fault> faults = {}) {
  options.devices.clear();
  for (int r = 0; r < replicas; ++r)
    options.devices.push_back("cpu:" + std::to_string(r));
  options.scheduler_threads = 2;
  if (options.timeout.count() == 0)
    options.timeout = 20s;
  return create_or_fail(options, std::move(faults));
}

inline strategy make_strategy(int replicas,
                              std::chrono::milliseconds timeout = 20s,
                              on_step_exception step_exception
                              = on_step_exception::stop_replica) {
  strategy_options options;
  int local = replicas;
  options.cluster = test_cluster(replicas, local);
  options.step_exception = step_exception;
  // The rule table runs twice on host replicas: with the default (small
  // steps combined by the coordinator) and with every step a collective.
  if (const char* env = std::getenv("VARSYNC_TEST_SMALL_STEP_BYTES");
      env != nullptr && *env)
    options.small_step_bytes = std::strtoull(env, nullptr, 10);
  options.devices = test_devices(local);
  options.timeout = timeout;
  options.scheduler_threads = 2;
  return create_or_fail(options);
}

#define VS_REQUIRE_OK(expr)                                                    \
  do {                                                                         \
    auto vs_err_ = (expr);                                                     \
    if (vs_err_)                                                               \
      FAIL(#expr << " failed: " << varsync::describe(vs_err_));                \
  } while (false)

/// Inside a replica step (another thread: no Catch2 assertions there): a
/// failing call throws, which fails the step and so the test.
#define VS_STEP_OK(expr)                                                       \
  do {                                                                         \
    auto vs_err_ = (expr);                                                     \
    if (vs_err_)                                                               \
      throw std::runtime_error(std::string{#expr} + " failed: "                \
                               + varsync::describe(vs_err_));                  \
  } while (false)

template <class T>
T value_in_step(caf::expected<T> x, const char* what) {
  if (!x)
    throw std::runtime_error(std::string{what} + " failed: "
                             + varsync::describe(x.error()));
  return std::move(*x);
}

#define VS_VALUE_IN_STEP(expr) vs_test::value_in_step((expr), #expr)

/// Inside a replica step: writes host tensor `x` into `dst`, a buffer on
/// the replica's device (on a GPU: a copy on the replica's stream, waited
/// for, as a user's kernel would write it).
inline void write_buffer(replica_context& ctx, const device_view& dst,
                         const tensor& x) {
  if (dst.nbytes() != x.nbytes())
    throw std::runtime_error("write_buffer: size mismatch");
#ifdef VARSYNC_SEMANTICS_ON_GPU
  if (!dst.host_accessible()) {
    auto stream = cuda_stream(ctx);
    if (cudaMemcpyAsync(dst.data, x.raw(), x.nbytes(), cudaMemcpyHostToDevice,
                        stream)
          != cudaSuccess
        || cudaStreamSynchronize(stream) != cudaSuccess)
      throw std::runtime_error("write_buffer: CUDA copy failed");
    return;
  }
#endif
  (void) ctx;
  std::memcpy(dst.data, x.raw(), x.nbytes());
}

template <class T>
T value_or_fail(caf::expected<T> x, const char* what) {
  if (!x)
    FAIL(what << " failed: " << varsync::describe(x.error()));
  return std::move(*x);
}

#define VS_VALUE(expr) vs_test::value_or_fail((expr), #expr)

inline variable make_var(const strategy& s, const std::string& name,
                         tensor initial, synchronization sync,
                         aggregation agg = aggregation::none) {
  return VS_VALUE(s.create_variable(name, std::move(initial), sync, agg));
}

/// Components of `v` as doubles, in replica order: every replica's, from
/// every process when the strategy spans several (all_values).
inline std::vector<double> components(const strategy& s, const variable& v) {
  std::vector<double> out;
  for (auto& t : VS_VALUE(s.all_values(v)))
    out.push_back(t.as_double(0));
  return out;
}

/// The part of `all` (one entry per replica of the strategy) that belongs
/// to this process's replicas: what run() returns here.
template <class T>
std::vector<T> mine(const strategy& s, std::vector<T> all) {
  auto first = all.begin() + s.first_local_replica();
  return std::vector<T>(first, first + s.num_local_replicas());
}

/// A name that every process of a run across processes computes alike
/// (VARSYNC_TEST_PORT), and that differs between test processes otherwise.
inline std::string shared_run_id() {
  static int made = 0;
  const char* port = std::getenv("VARSYNC_TEST_PORT");
  return (port != nullptr ? std::string{"p"} + port
                          : std::to_string(::getpid()))
         + "-" + std::to_string(made++);
}

/// `path` for a file the last strategy writes: shared by the processes of
/// a strategy across processes, this process's own for a local one.
inline std::string local_file(std::string path) {
  if (across_processes() && last_strategy_local())
    path += std::string{"-r"} + std::getenv("VARSYNC_TEST_RANK");
  return path;
}

inline double read_scalar(const strategy& s, const variable& v) {
  return VS_VALUE(s.read(v)).as_double(0);
}

/// Every component of every variable of `s`.
using snapshot = std::map<std::string, std::vector<tensor>>;

inline snapshot take_snapshot(const strategy& s) {
  snapshot out;
  for (auto& v : VS_VALUE(s.variables()))
    out[v.name()] = VS_VALUE(s.local_values(v));
  return out;
}

inline bool same(const snapshot& a, const snapshot& b) {
  if (a.size() != b.size())
    return false;
  for (auto& [name, values] : a) {
    auto i = b.find(name);
    if (i == b.end() || i->second.size() != values.size())
      return false;
    for (size_t r = 0; r < values.size(); ++r)
      if (!values[r].bitwise_equal(i->second[r]))
        return false;
  }
  return true;
}

inline bool all_components_equal(const strategy& s, const variable& v) {
  auto values = VS_VALUE(s.local_values(v));
  for (auto& x : values)
    if (!x.bitwise_equal(values[0]))
      return false;
  return true;
}

/// Checks that `err` is a varsync error with `code`.
#define VS_CHECK_CODE(err_expr, code)                                          \
  do {                                                                         \
    caf::error vs_e_ = (err_expr);                                             \
    INFO("error: " << varsync::describe(vs_e_));                               \
    CHECK(varsync::has_code(vs_e_, varsync::errc::code));                      \
  } while (false)

template <class T>
caf::error error_of(const caf::expected<T>& x) {
  return x ? caf::error{} : x.error();
}

} // namespace vs_test
