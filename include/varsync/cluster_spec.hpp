#pragma once
// Where a process stands in a strategy that spans processes: its rank, the
// number of processes and the rendezvous address, given in code or read from
// the environment that varsync-run, torchrun, Open MPI's mpirun or Slurm's
// srun set (docs/multiprocess.md).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <caf/expected.hpp>

namespace varsync {

/// How the processes issue cross-replica operations (docs/multiprocess.md).
enum class cluster_mode : uint8_t {
  /// Every process runs the same program: each issues every step and every
  /// cross-replica operation, in the same order (SPMD).
  training = 0,
  /// Any process issues cross-replica operations on its own (one-sided);
  /// process 0 orders them, and every process applies them in that one
  /// order. Steps run on this process's replicas only and may not update
  /// ON_WRITE variables.
  services = 1,
};

/// "training" or "services".
const char* to_string(cluster_mode mode);

/// How host tensors move between the processes (docs/multiprocess.md).
enum class host_transport : uint8_t {
  /// Through a shared-memory segment when every process runs on one host
  /// (found when they join), through Gloo over TCP otherwise.
  automatic = 0,
  /// Always Gloo over TCP (what several hosts use, on one host too).
  gloo = 1,
  /// Always shared memory: joining fails unless every process is on one
  /// host and can map the segment.
  shared_memory = 2,
};

/// "automatic", "gloo" or "shared_memory".
const char* to_string(host_transport transport);

struct cluster_spec {
  /// This process, in [0, world_size).
  int rank = 0;
  /// The number of processes.
  int world_size = 1;
  /// This process among those on its host (informational: which GPU to use).
  int local_rank = 0;
  /// Rank 0 serves the rendezvous here; the others connect to it.
  std::string rendezvous_host = "127.0.0.1";
  uint16_t rendezvous_port = 0;
  /// The address this process's data transport listens on. Loopback by
  /// default: processes on several hosts need an address the others reach.
  std::string bind_host = "127.0.0.1";
  /// Joining (all processes arrived and connected) must finish within this.
  std::chrono::milliseconds join_timeout{30000};
  /// Every cross-process operation must finish within this; a process that
  /// does not take part in time fails it on every other process.
  std::chrono::milliseconds operation_timeout{30000};
  /// A process not heard from for this long is lost: the others close their
  /// control connections to it. Every process sends a heartbeat four times
  /// per period, so a process that was stopped (SIGSTOP) or cut off is
  /// noticed while idle too: in services mode, calls waiting for process 0
  /// and every later one fail with replica_failed. Zero: no heartbeats (a
  /// lost process is noticed by the next operation's deadline only).
  /// Otherwise at least 100 ms.
  std::chrono::milliseconds peer_timeout{5000};
  /// Distinguishes several strategies that share one rendezvous address
  /// (1 to 128 bytes).
  std::string group_name = "varsync";
  /// Every process must use the same mode.
  cluster_mode mode = cluster_mode::training;
  /// Every process must use the same transport.
  host_transport transport = host_transport::automatic;
  /// The cluster's shared secret (16 to 1024 bytes; varsync-run makes one
  /// for its processes). A process that joins must prove it knows the
  /// same one before process 0 lets it reach the control plane: a
  /// challenge and response over the rendezvous port, the token itself
  /// never sent. Empty: any process that reaches the rendezvous port may
  /// join (keep it on loopback, the default).
  std::string cluster_token;
  /// Services mode: who decides which process orders the operations
  /// (docs/multiprocess.md, "Who orders"). Empty: no arbiter; process 0
  /// orders, and once it is lost cross-process operations fail (P3).
  /// "host": the kernel of the one host every process runs on, through a
  /// lock file in /dev/shm named after the group and rendezvous address;
  /// "host:<absolute path>": that file. "etcd:http://<host>:<port>": an
  /// etcd server (3.4, its JSON gateway; no TLS), the lead kept under a key
  /// named after the group and rendezvous address, or "/<key>" appended.
  /// With an arbiter, process 0 holds
  /// the lead for an epoch, renewed every third of the peer timeout (its
  /// lease), and every operation it orders carries that epoch; a process 0
  /// that stopped for longer than its lease while another took the lead
  /// orders nothing more and fails with `fenced` (P16). Needs a peer
  /// timeout. Every process must name the same arbiter.
  std::string arbiter;
};

/// The bounds on a cluster token's length.
struct cluster_token_limits {
  static constexpr size_t min_bytes = 16;
  static constexpr size_t max_bytes = 1024;
};

/// Reads one environment variable; nullopt when unset.
using environment_reader
  = std::function<std::optional<std::string>(const std::string&)>;

/// The cluster described by the environment, or nullopt when it describes
/// none (no rank variable of any launcher is set). In order, the first
/// launcher whose rank variable is set wins:
///   varsync-run: VARSYNC_RANK, VARSYNC_WORLD_SIZE, VARSYNC_LOCAL_RANK,
///                VARSYNC_RENDEZVOUS (host:port)
///   torchrun:    RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
///   Open MPI:    OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
///                OMPI_COMM_WORLD_LOCAL_RANK
///   Slurm:       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
/// Open MPI and Slurm give no rendezvous address: VARSYNC_RENDEZVOUS, or
/// MASTER_ADDR and MASTER_PORT, must be set as well. VARSYNC_BIND sets the
/// bind address, VARSYNC_TIMEOUT_MS both timeouts, VARSYNC_PEER_TIMEOUT_MS
/// the peer timeout, VARSYNC_MODE the mode ("training" or "services"),
/// VARSYNC_HOST_TRANSPORT the transport ("automatic", "gloo" or
/// "shared_memory"), VARSYNC_CLUSTER_TOKEN the cluster token, VARSYNC_ARBITER
/// the arbiter ("host", "host:<path>" or "etcd:http://<host>:<port>[/<key>]").
/// A value that
/// is not a number, out of range, or a missing companion variable is
/// invalid_argument naming the variable (never quoting the token).
caf::expected<std::optional<cluster_spec>>
cluster_from_environment(const environment_reader& getenv = {});

/// invalid_argument naming the field when `spec` cannot describe a cluster
/// (rank outside [0, world_size), no rendezvous port with several
/// processes, a non-positive timeout, a peer timeout under 100 ms but not
/// zero, an empty host, a mode or transport that is not one, a cluster
/// token that is not empty but shorter than 16 or longer than 1024 bytes,
/// an arbiter that is not "host", "host:<absolute path>" or
/// "etcd:http://<host>:<port>[/<key>]", or one outside services mode or
/// without a peer timeout).
caf::error validate(const cluster_spec& spec);

} // namespace varsync
