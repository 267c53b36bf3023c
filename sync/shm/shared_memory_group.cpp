#include "sync/shm/shared_memory_group.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "devices/host_kernels.hpp"
#include "sync/transport/data_transport.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;

constexpr uint64_t segment_magic = 0x7661727379736d31; // "varsysm1"
constexpr uint32_t segment_version = 3;

static_assert(std::atomic<uint32_t>::is_always_lock_free
              && sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// One rank's corner of the segment, on cache lines of its own.
struct alignas(64) rank_header {
  std::atomic<uint64_t> reached; // barriers this rank has arrived at
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> pid_namespace; // its pid means something here if equal
  std::atomic<uint32_t> overflow[2]; // per slot set: this rank's slice
  std::atomic<uint64_t> call[2];     // per slot set: what the chunk is
  std::atomic<int32_t> cpu;          // where it last arrived at a barrier
};

struct segment_header {
  uint64_t magic;
  uint32_t version;
  int32_t size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  alignas(64) std::atomic<uint32_t> arrivals; // the barrier's futex word
  // Ranks asleep on `arrivals` (or about to be): the last to arrive wakes
  // them only if there are any, so that a barrier whose ranks all spun
  // costs no system call.
  alignas(64) std::atomic<uint32_t> sleepers;
};

// The ranks' headers follow the segment header, `size` of them.
constexpr size_t ranks_offset
  = (sizeof(segment_header) + alignof(rank_header) - 1) / alignof(rank_header)
    * alignof(rank_header);

rank_header& rank_at(segment_header* h, int rank) {
  return reinterpret_cast<rank_header*>(reinterpret_cast<std::byte*>(h)
                                        + ranks_offset)[rank];
}

size_t header_bytes(int size) {
  auto bytes = ranks_offset + sizeof(rank_header) * static_cast<size_t>(size);
  return (bytes + 4095) / 4096 * 4096;
}

size_t segment_bytes(int size, size_t slot_bytes) {
  return header_bytes(size) + 2 * static_cast<size_t>(size) * slot_bytes;
}

void wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX,
          nullptr, nullptr, 0);
}

void wait_on(std::atomic<uint32_t>* word, uint32_t seen,
             std::chrono::microseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000),
              static_cast<long>(limit.count() % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen,
          &ts, nullptr, 0);
}

// How long a rank that arrives first at a barrier waits awake before it
// sleeps on the futex: it spins on the arrivals word for `spin` (the others
// usually arrive within microseconds, and a futex sleep and wake-up costs
// tens of them), then yields its core until `awake`. With more ranks than
// cores, spinning would take the core from a rank that has yet to arrive:
// a short spin, then sleep. `yield_to_shared_core`: yield at once while the
// rank waited for last arrived on this core (see shares_cpu_with_missing);
// not with more ranks than cores, where ranks share cores all the time and
// a rank that yielded, instead of sleeping, is not woken when the last one
// arrives (a small step of 4 processes on 2 cores ran slower).
struct wait_policy {
  std::chrono::microseconds spin;
  std::chrono::microseconds awake;
  bool yield_to_shared_core;
};
constexpr wait_policy spin_then_yield{std::chrono::microseconds(10),
                                      std::chrono::microseconds(200), true};
constexpr wait_policy oversubscribed{std::chrono::microseconds(2),
                                     std::chrono::microseconds(2), false};

// The policy for `ranks` on this host's cores (those this process may run
// on).
wait_policy policy_for(int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                           : 1;
  return ranks > cores ? oversubscribed : spin_then_yield;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// What a chunk of a call is, so that ranks that disagree fail instead of
// mixing their data.
uint64_t call_code(int kind, uint64_t a, uint64_t b) {
  return (static_cast<uint64_t>(kind) << 60) ^ (a * 0x9e3779b97f4a7c15ULL)
         ^ (b + 0x632be59bd9b4e019ULL);
}

// The process id namespace this process lives in (0 if unknown): process
// ids of ranks in another one (containers that share /dev/shm) name other
// processes here, or none.
uint64_t own_pid_namespace() {
  struct stat st{};
  if (stat("/proc/self/ns/pid", &st) != 0)
    return 0;
  return static_cast<uint64_t>(st.st_ino);
}

std::string fresh_name() {
  std::random_device rd;
  std::mt19937_64 gen{(static_cast<uint64_t>(rd()) << 32) ^ rd()};
  char text[64];
  std::snprintf(text, sizeof(text), "/varsync-%d-%016llx%016llx",
                static_cast<int>(getpid()),
                static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return text;
}

} // namespace

struct shared_memory_group::impl {
  shared_memory_group_options options;
  std::string name;
  bool linked = false; // rank 0: the name still exists
  int fd = -1;
  void* base = nullptr;
  size_t bytes = 0;
  segment_header* header = nullptr;
  uint64_t barriers = 0; // passed by this rank
  uint64_t chunks = 0;   // chunks run by this group (alternate slot sets)
  uint64_t pid_namespace = own_pid_namespace();
  wait_policy waits = spin_then_yield; // set when the group forms
  bool broken = false;
  std::vector<const void*> inputs; // every rank's data of a chunk's slice

  ~impl() {
    if (base != nullptr)
      munmap(base, bytes);
    if (fd >= 0)
      close(fd);
    if (linked)
      shm_unlink(name.c_str());
  }

  std::string who() const {
    return "shared memory group, rank " + std::to_string(options.rank)
           + " of " + std::to_string(options.size);
  }

  std::byte* slot(uint64_t set, int rank) const {
    return static_cast<std::byte*>(base) + header_bytes(options.size)
           + (set * static_cast<uint64_t>(options.size)
              + static_cast<uint64_t>(rank))
               * options.slot_bytes;
  }

  caf::error fail(const std::string& what) {
    broken = true;
    return make_error(errc::replica_failed,
                      who() + ": " + what + "; the group is unusable");
  }

  // Why the ranks that have not reached barrier `b` will not, if they will
  // not: one exited, or the strategy gave up on them. Empty otherwise.
  caf::error gone(uint64_t b, const char* what) {
    if (options.abandon)
      if (auto err = options.abandon()) {
        broken = true;
        return err;
      }
    for (int r = 0; r < options.size; ++r) {
      auto& peer = rank_at(header, r);
      if (peer.reached.load(std::memory_order_acquire) >= b)
        continue;
      auto pid = peer.pid.load(std::memory_order_relaxed);
      auto ns = peer.pid_namespace.load(std::memory_order_relaxed);
      if (pid > 0 && ns != 0 && ns == pid_namespace && kill(pid, 0) != 0
          && errno == ESRCH)
        return fail(std::string{what} + ": rank " + std::to_string(r)
                    + " (process " + std::to_string(pid) + ") exited");
    }
    return {};
  }

  // Every rank arrives; the writes each made before arriving are visible
  // to all after it.
  caf::error barrier(const char* what) {
    const uint64_t b = ++barriers;
    const auto size = static_cast<uint64_t>(options.size);
    auto& self = rank_at(header, options.rank);
    const int cpu = sched_getcpu();
    self.cpu.store(cpu, std::memory_order_relaxed);
    self.reached.store(b, std::memory_order_release);
    const auto target = static_cast<uint32_t>(b * size);
    auto* word = &header->arrivals;
    // seq_cst, with the sleepers' count below: a rank going to sleep either
    // sees this arrival or is seen by the wake-up check.
    if (word->fetch_add(1, std::memory_order_seq_cst) + 1 == target) {
      if (header->sleepers.load(std::memory_order_seq_cst) > 0)
        wake_all(word);
      return {};
    }
    auto arrived = [&] {
      auto seen = word->load(std::memory_order_acquire);
      return static_cast<int32_t>(seen - target) >= 0;
    };
    const auto start = clock::now();
    for (uint32_t i = 1;; ++i) {
      if (arrived())
        return {};
      if (i % 64 != 0) {
        cpu_relax();
        continue;
      }
      const auto waited = clock::now() - start;
      if (waited >= waits.awake)
        break;
      if (waited >= waits.spin
          || (waits.yield_to_shared_core && shares_cpu_with_missing(b, cpu)))
        sched_yield();
    }
    return sleep_until_arrived(b, target, what);
  }

  // Whether a rank that has not reached barrier `b` arrived last time on
  // `cpu`, this rank's. Then spinning only delays it: both are runnable on
  // one core (a wake-up, say from a socket, put them there, and the
  // scheduler takes milliseconds to move a task that never sleeps), so the
  // waiter yields the core at once instead of after its spin.
  bool shares_cpu_with_missing(uint64_t b, int cpu) const {
    if (cpu < 0)
      return false;
    for (int r = 0; r < options.size; ++r) {
      if (r == options.rank)
        continue;
      auto& peer = rank_at(header, r);
      if (peer.reached.load(std::memory_order_acquire) < b
          && peer.cpu.load(std::memory_order_relaxed) == cpu)
        return true;
    }
    return false;
  }

  // The barrier's slow path: sleeps on the futex in steps of at most 10 ms,
  // checking between them that no rank has exited, until every rank
  // arrived or the timeout passed.
  caf::error sleep_until_arrived(uint64_t b, uint32_t target,
                                 const char* what) {
    auto* word = &header->arrivals;
    const auto deadline = clock::now() + options.timeout;
    for (;;) {
      if (auto err = gone(b, what))
        return err;
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - clock::now());
      if (left.count() <= 0) {
        std::string missing;
        for (int r = 0; r < options.size; ++r)
          if (rank_at(header, r).reached.load(std::memory_order_acquire) < b)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        return fail(std::string{what} + ": rank(s) " + missing
                    + " did not arrive within "
                    + std::to_string(options.timeout.count()) + " ms");
      }
      header->sleepers.fetch_add(1, std::memory_order_seq_cst);
      auto seen = word->load(std::memory_order_seq_cst);
      if (static_cast<int32_t>(seen - target) < 0)
        wait_on(word, seen, std::min(left, std::chrono::microseconds{10000}));
      header->sleepers.fetch_sub(1, std::memory_order_seq_cst);
      seen = word->load(std::memory_order_acquire);
      if (static_cast<int32_t>(seen - target) >= 0)
        return {};
    }
  }

  // Publishes what this chunk is, waits for every rank, and checks that all
  // run the same call.
  caf::error enter_chunk(uint64_t set, uint64_t code, const char* what) {
    rank_at(header, options.rank).call[set].store(code,
                                                std::memory_order_relaxed);
    if (auto err = barrier(what))
      return err;
    for (int r = 0; r < options.size; ++r)
      if (rank_at(header, r).call[set].load(std::memory_order_relaxed) != code)
        return fail(std::string{what} + ": rank " + std::to_string(r)
                    + " runs a different collective (kind, size or root)");
    return {};
  }

  caf::error check_usable() const {
    if (!broken)
      return {};
    return make_error(errc::replica_failed,
                      who() + ": an earlier collective failed; the group "
                              "is unusable");
  }
};

caf::expected<std::unique_ptr<shared_memory_group>>
shared_memory_group::create(shared_memory_group_options options) {
  if (options.size < 1 || options.rank != 0)
    return make_error(errc::invalid_argument,
                      "shared memory group: rank 0 creates the segment "
                      "(rank "
                        + std::to_string(options.rank) + " of "
                        + std::to_string(options.size) + ")");
  if (options.slot_bytes < 4096 || options.slot_bytes % 64 != 0
      || options.timeout.count() <= 0)
    return make_error(errc::invalid_argument,
                      "shared memory group: the slot size must be a multiple "
                      "of 64 bytes, at least 4096, and the timeout positive");
  auto p = std::make_unique<impl>();
  p->options = std::move(options);
  p->waits = policy_for(p->options.size);
  p->name = fresh_name();
  p->bytes = segment_bytes(p->options.size, p->options.slot_bytes);
  p->fd = shm_open(p->name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (p->fd < 0)
    return make_error(errc::invalid_argument,
                      p->who() + ": cannot create " + p->name + ": "
                        + std::strerror(errno));
  p->linked = true;
  // Reserved, not only sized: a full /dev/shm (a container's is often
  // 64 MiB) fails here, instead of killing a process with SIGBUS when it
  // first touches a page.
  if (int rc = posix_fallocate(p->fd, 0, static_cast<off_t>(p->bytes));
      rc != 0)
    return make_error(errc::out_of_memory,
                      p->who() + ": cannot reserve "
                        + std::to_string(p->bytes) + " bytes for " + p->name
                        + ": " + std::strerror(rc));
  p->base = mmap(nullptr, p->bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, p->fd, 0);
  if (p->base == MAP_FAILED) {
    p->base = nullptr;
    return make_error(errc::out_of_memory,
                      p->who() + ": cannot map " + p->name + ": "
                        + std::strerror(errno));
  }
  // A fresh segment reads as zeros: the atomics start at 0.
  p->header = static_cast<segment_header*>(p->base);
  p->header->size = p->options.size;
  p->header->slot_bytes = p->options.slot_bytes;
  p->header->total_bytes = p->bytes;
  p->header->version = segment_version;
  rank_at(p->header, 0).pid.store(static_cast<int32_t>(getpid()));
  rank_at(p->header, 0).pid_namespace.store(p->pid_namespace);
  std::atomic_thread_fence(std::memory_order_release);
  p->header->magic = segment_magic;
  return std::unique_ptr<shared_memory_group>{
    new shared_memory_group(std::move(p))};
}

caf::expected<std::unique_ptr<shared_memory_group>>
shared_memory_group::open(const std::string& name,
                          shared_memory_group_options options) {
  if (options.size < 2 || options.rank < 1 || options.rank >= options.size
      || options.timeout.count() <= 0)
    return make_error(errc::invalid_argument,
                      "shared memory group: rank "
                        + std::to_string(options.rank) + " of "
                        + std::to_string(options.size)
                        + " cannot open a segment (ranks 1 to size - 1 "
                          "open, with a positive timeout)");
  auto p = std::make_unique<impl>();
  p->options = std::move(options);
  p->waits = policy_for(p->options.size);
  p->name = name;
  p->fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (p->fd < 0)
    return make_error(errc::invalid_argument,
                      p->who() + ": cannot open " + name
                        + " (not on rank 0's host?): "
                        + std::strerror(errno));
  struct stat st{};
  if (fstat(p->fd, &st) != 0
      || static_cast<size_t>(st.st_size) < sizeof(segment_header))
    return make_error(errc::invalid_argument,
                      p->who() + ": " + name + " is not a segment of a group");
  p->bytes = static_cast<size_t>(st.st_size);
  p->base = mmap(nullptr, p->bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_POPULATE, p->fd, 0);
  if (p->base == MAP_FAILED) {
    p->base = nullptr;
    return make_error(errc::out_of_memory,
                      p->who() + ": cannot map " + name + ": "
                        + std::strerror(errno));
  }
  p->header = static_cast<segment_header*>(p->base);
  std::atomic_thread_fence(std::memory_order_acquire);
  auto& h = *p->header;
  if (h.magic != segment_magic || h.version != segment_version
      || h.size != p->options.size || h.total_bytes != p->bytes
      || h.slot_bytes < 4096
      || segment_bytes(h.size, h.slot_bytes) != p->bytes)
    return make_error(errc::invalid_argument,
                      p->who() + ": " + name
                        + " was made for another group (size "
                        + std::to_string(h.size) + ")");
  p->options.slot_bytes = h.slot_bytes;
  rank_at(&h, p->options.rank).pid.store(static_cast<int32_t>(getpid()));
  rank_at(&h, p->options.rank).pid_namespace.store(p->pid_namespace);
  return std::unique_ptr<shared_memory_group>{
    new shared_memory_group(std::move(p))};
}

shared_memory_group::shared_memory_group(std::unique_ptr<impl> p)
  : impl_(std::move(p)) {}

shared_memory_group::~shared_memory_group() = default;

const std::string& shared_memory_group::name() const { return impl_->name; }

void shared_memory_group::unlink() {
  if (impl_->linked) {
    shm_unlink(impl_->name.c_str());
    impl_->linked = false;
  }
}

int shared_memory_group::rank() const { return impl_->options.rank; }

int shared_memory_group::size() const { return impl_->options.size; }

std::string shared_memory_group::describe() const {
  return "shared memory (one host), rank " + std::to_string(rank()) + " of "
         + std::to_string(size());
}

caf::error shared_memory_group::all_reduce(reduce_op op, dtype type,
                                           void* data, int64_t count) {
  auto& d = *impl_;
  if (auto err = d.check_usable())
    return err;
  if (auto err = check_all_reduce_input(d.who(), op, type, data, count))
    return err;
  const int size = d.options.size;
  if (count == 0 || size == 1) {
    if (count > 0 && op == reduce_op::mean)
      host::split_assign(type, data, data, 0, count, 0, 1);
    return {};
  }
  const reduce_op combine = op == reduce_op::mean ? reduce_op::sum : op;
  const auto elem = static_cast<int64_t>(size_of(type));
  const auto per_chunk = static_cast<int64_t>(d.options.slot_bytes) / elem;
  const auto code = call_code(1, static_cast<uint64_t>(count),
                              static_cast<uint64_t>(op) * 256
                                + static_cast<uint64_t>(type));
  auto* bytes = static_cast<std::byte*>(data);
  auto& inputs = d.inputs;
  inputs.resize(static_cast<size_t>(size));
  bool overflowed = false;
  const int me = d.options.rank;
  // Sliced (below): a rank keeps its own slice where it is. Whole: every
  // rank copies all its data into its slot and the result out of rank 0's,
  // kept with more ranks than cores, where the measurements disagree.
  using layout = shared_memory_group_options::layout;
  const bool sliced = d.options.chunk_layout == layout::automatic
                        ? d.waits.yield_to_shared_core
                        : d.options.chunk_layout == layout::sliced;
  for (int64_t off = 0; off < count; off += per_chunk) {
    const auto n = std::min(per_chunk, count - off);
    const uint64_t set = d.chunks++ % 2;
    // Rank r reduces slice r of the chunk. The others' slices of this
    // rank's data go into its slot; its own slice stays where it is.
    auto slice = [n, size](int r) {
      return std::pair<int64_t, int64_t>{n * r / size, n * (r + 1) / size};
    };
    auto* own = bytes + off * elem;
    auto* mine = d.slot(set, me);
    auto copy = [elem](std::byte* to, const std::byte* from,
                       std::pair<int64_t, int64_t> s) {
      if (s.second > s.first)
        std::memcpy(to + s.first * elem, from + s.first * elem,
                    static_cast<size_t>((s.second - s.first) * elem));
    };
    for (int r = 0; r < size; ++r)
      if (!sliced || r != me)
        copy(mine, own, slice(r));
    if (auto err = d.enter_chunk(set, code, "all_reduce"))
      return err;
    // This rank's slice over every rank's data in rank order: sliced, into
    // its own data (read before written: reduce allows it), then into its
    // slot's slice for the others; whole, into rank 0's slot. Nobody else
    // touches either there until the barrier.
    const auto [lo, hi] = slice(me);
    for (int r = 0; r < size; ++r)
      inputs[static_cast<size_t>(r)]
        = sliced && r == me ? own : d.slot(set, r);
    auto* out = sliced ? own : d.slot(set, 0);
    uint32_t flag = 0;
    if (!is_floating(type)
        && host::first_overflow(combine, update_op::assign, type, inputs,
                                nullptr, lo, hi)
             >= 0)
      flag = 1;
    if (hi > lo)
      host::reduce(combine, type, out, inputs, lo, hi);
    if (op == reduce_op::mean) // the sum, then one division (as in-process)
      host::split_assign(type, out, out, lo, hi, 0, size);
    if (sliced)
      copy(mine, own, slice(me));
    rank_at(d.header, me).overflow[set].store(flag,
                                              std::memory_order_relaxed);
    if (auto err = d.barrier("all_reduce"))
      return err;
    for (int r = 0; r < size; ++r)
      if (!sliced || r != me)
        copy(own, d.slot(set, sliced ? r : 0), slice(r));
    for (int r = 0; r < size; ++r)
      if (rank_at(d.header, r).overflow[set].load(std::memory_order_relaxed))
        overflowed = true;
  }
  if (overflowed)
    return all_reduce_overflow(d.who(), op, type);
  return {};
}

caf::error shared_memory_group::broadcast(void* data, size_t bytes,
                                          int root) {
  auto& d = *impl_;
  if (auto err = d.check_usable())
    return err;
  if (auto err = check_broadcast_input(d.who(), data, bytes, root,
                                       d.options.size))
    return err;
  if (bytes == 0 || d.options.size == 1)
    return {};
  const auto code = call_code(2, bytes, static_cast<uint64_t>(root));
  auto* out = static_cast<std::byte*>(data);
  // One barrier per chunk: a slot set is refilled two chunks later, after
  // the next chunk's barrier, which every rank reaches once it has copied
  // this chunk out.
  for (size_t off = 0; off < bytes; off += d.options.slot_bytes) {
    const auto n = std::min(d.options.slot_bytes, bytes - off);
    const uint64_t set = d.chunks++ % 2;
    if (d.options.rank == root)
      std::memcpy(d.slot(set, root), out + off, n);
    if (auto err = d.enter_chunk(set, code, "broadcast"))
      return err;
    if (d.options.rank != root)
      std::memcpy(out + off, d.slot(set, root), n);
  }
  return {};
}

caf::error shared_memory_group::all_gather(const void* in, void* out,
                                           size_t bytes) {
  auto& d = *impl_;
  if (auto err = d.check_usable())
    return err;
  if (auto err = check_all_gather_input(d.who(), in, out, bytes))
    return err;
  if (bytes == 0)
    return {};
  if (d.options.size == 1) {
    std::memcpy(out, in, bytes);
    return {};
  }
  const auto code = call_code(3, bytes, 0);
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  for (size_t off = 0; off < bytes; off += d.options.slot_bytes) {
    const auto n = std::min(d.options.slot_bytes, bytes - off);
    const uint64_t set = d.chunks++ % 2;
    std::memcpy(d.slot(set, d.options.rank), src + off, n);
    if (auto err = d.enter_chunk(set, code, "all_gather"))
      return err;
    for (int r = 0; r < d.options.size; ++r)
      std::memcpy(dst + static_cast<size_t>(r) * bytes + off, d.slot(set, r),
                  n);
  }
  return {};
}

} // namespace varsync
