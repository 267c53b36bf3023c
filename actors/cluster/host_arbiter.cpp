#include "actors/cluster/host_arbiter.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "varsync/error.hpp"

namespace varsync {

namespace {

constexpr uint64_t file_magic = 0x7661727361726231; // "varsarb1"
constexpr uint32_t file_version = 1;

// The file's first bytes; the lock that makes a change atomic covers them.
struct record {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = -1; // the holder, -1: none
  uint64_t epoch = 0;
  int32_t pid = 0;
  int32_t reserved = 0;
  int64_t lease_until_ns = 0; // CLOCK_BOOTTIME, shared by the host
};
static_assert(sizeof(record) <= 64);

// The byte whose lock the holder of `epoch` keeps while it lives: past the
// record, one per epoch, so that a new holder never waits for an old one.
off_t alive_byte(uint64_t epoch) {
  return static_cast<off_t>(4096 + epoch % (uint64_t{1} << 40));
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int ofd_lock(int fd, short type, off_t start, off_t len, bool wait) {
  struct flock fl{};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
}

} // namespace

struct host_arbiter::impl {
  host_arbiter_options options;
  int fd = -1;
  uint64_t held = 0; // the epoch this process holds, 0: none

  ~impl() {
    if (fd >= 0)
      close(fd); // drops every lock of this open file description
  }

  std::string who() const {
    return "host arbiter " + options.path + ", process "
           + std::to_string(options.rank);
  }

  caf::error system_error(const char* what) const {
    return make_error(errc::invalid_argument,
                      who() + ": " + what + ": " + std::strerror(errno));
  }

  // Runs `fn(record&)` with the record locked (`write`: exclusively) and
  // writes it back if `fn` returned true.
  template <class F>
  caf::error transaction(bool write, F fn) {
    if (ofd_lock(fd, write ? F_WRLCK : F_RDLCK, 0, 64, true) != 0)
      return system_error("cannot lock");
    record r;
    caf::error err;
    const auto n = pread(fd, &r, sizeof(r), 0);
    if (n < 0)
      err = system_error("cannot read");
    else if (n != static_cast<ssize_t>(sizeof(r)) || r.magic != file_magic
             || r.version != file_version)
      err = make_error(errc::invalid_argument,
                       who() + ": the file holds something else");
    else if (fn(r) && write
             && pwrite(fd, &r, sizeof(r), 0)
                  != static_cast<ssize_t>(sizeof(r)))
      err = system_error("cannot write");
    ofd_lock(fd, F_UNLCK, 0, 64, false);
    return err;
  }

  // Whether the holder of `r` lives: it holds its epoch's byte.
  bool alive(const record& r) const {
    if (r.rank < 0 || r.epoch == 0)
      return false;
    if (r.epoch == held)
      return true; // this process: its own lock never conflicts
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = alive_byte(r.epoch);
    fl.l_len = 1;
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
      return true; // unknown: assume it lives, wait for its lease
    return fl.l_type != F_UNLCK;
  }

  lead describe(const record& r) const {
    lead l;
    l.epoch = r.epoch;
    l.rank = r.rank;
    l.pid = r.pid;
    l.alive = alive(r);
    l.leased = r.rank >= 0 && now_ns() < r.lease_until_ns;
    return l;
  }

  int64_t lease_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(options.lease)
      .count();
  }

  // The file as a fresh arbiter, if nothing wrote it yet.
  caf::error initialise() {
    if (ofd_lock(fd, F_WRLCK, 0, 64, true) != 0)
      return system_error("cannot lock");
    caf::error err;
    struct stat st{};
    if (fstat(fd, &st) != 0) {
      err = system_error("cannot stat");
    } else if (st.st_size == 0) {
      record r;
      r.magic = file_magic;
      r.version = file_version;
      if (pwrite(fd, &r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r)))
        err = system_error("cannot write");
    }
    ofd_lock(fd, F_UNLCK, 0, 64, false);
    return err;
  }
};

caf::expected<std::unique_ptr<host_arbiter>>
host_arbiter::open(host_arbiter_options options) {
  if (options.path.empty() || options.rank < 0 || options.lease.count() <= 0)
    return make_error(errc::invalid_argument,
                      "host arbiter: expected a file path, a rank of 0 or "
                      "more and a positive lease (path '"
                        + options.path + "', rank "
                        + std::to_string(options.rank) + ", lease "
                        + std::to_string(options.lease.count()) + " ms)");
  auto p = std::make_unique<impl>();
  p->options = std::move(options);
  p->fd = ::open(p->options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p->fd < 0)
    return p->system_error("cannot open");
  if (auto err = p->initialise())
    return err;
  if (auto err = p->transaction(false, [](record&) { return false; }))
    return err;
  return std::unique_ptr<host_arbiter>{new host_arbiter(std::move(p))};
}

host_arbiter::host_arbiter(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

host_arbiter::~host_arbiter() = default;

const arbiter_options& host_arbiter::options() const {
  return impl_->options;
}

caf::expected<host_arbiter::lead> host_arbiter::current() const {
  auto& d = *impl_;
  lead out;
  if (auto err = d.transaction(false, [&](record& r) {
        out = d.describe(r);
        return false;
      }))
    return err;
  return out;
}

caf::expected<uint64_t> host_arbiter::try_acquire() {
  auto& d = *impl_;
  uint64_t epoch = 0;
  caf::error refused;
  auto err = d.transaction(true, [&](record& r) {
    const auto now = now_ns();
    if (d.held != 0 && r.epoch == d.held) { // ours: renewed
      r.lease_until_ns = now + d.lease_ns();
      epoch = d.held;
      return true;
    }
    if (d.alive(r) && now < r.lease_until_ns) {
      refused = make_error(
        errc::replica_failed,
        d.who() + ": process " + std::to_string(r.rank) + " (pid "
          + std::to_string(r.pid) + ") leads in epoch "
          + std::to_string(r.epoch) + ", its lease runs "
          + std::to_string((r.lease_until_ns - now) / 1000000)
          + " ms more; nothing was changed");
      return false;
    }
    const uint64_t next = r.epoch + 1;
    if (ofd_lock(d.fd, F_WRLCK, alive_byte(next), 1, false) != 0) {
      refused = d.system_error("cannot hold the new epoch's lock");
      return false;
    }
    r.epoch = next;
    r.rank = d.options.rank;
    r.pid = static_cast<int32_t>(getpid());
    r.lease_until_ns = now + d.lease_ns();
    d.held = next;
    epoch = next;
    return true;
  });
  if (err)
    return err;
  if (refused)
    return refused;
  return epoch;
}

caf::error host_arbiter::renew(uint64_t epoch) {
  auto& d = *impl_;
  caf::error fenced;
  auto err = d.transaction(true, [&](record& r) {
    if (epoch == 0 || epoch != d.held || r.epoch != epoch) {
      fenced = make_error(
        errc::fenced,
        d.who() + ": fenced: epoch " + std::to_string(epoch)
          + " is not this process's to renew (the lead is in epoch "
          + std::to_string(r.epoch) + ", process " + std::to_string(r.rank)
          + "); it may order nothing under it");
      if (epoch == d.held && d.held != 0) {
        ofd_lock(d.fd, F_UNLCK, alive_byte(d.held), 1, false);
        d.held = 0;
      }
      return false;
    }
    r.lease_until_ns = now_ns() + d.lease_ns();
    return true;
  });
  return err ? err : fenced;
}

void host_arbiter::forget() {
  ::unlink(impl_->options.path.c_str());
}

void host_arbiter::release(uint64_t epoch) {
  auto& d = *impl_;
  if (epoch == 0 || epoch != d.held)
    return;
  (void) d.transaction(true, [&](record& r) {
    if (r.epoch != epoch)
      return false;
    r.rank = -1;
    r.pid = 0;
    r.lease_until_ns = 0;
    return true;
  });
  ofd_lock(d.fd, F_UNLCK, alive_byte(epoch), 1, false);
  d.held = 0;
}

} // namespace varsync
