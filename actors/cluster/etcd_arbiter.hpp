#pragma once
// The arbiter across hosts (arbiter.hpp, P16): etcd decides, through its
// v3 API's JSON gateway (etcd 3.4, Debian's etcd-server). The lead is one
// key, created only where it does not exist (a transaction) and attached
// to a lease the holder keeps alive; etcd deletes the key when the lease
// runs out, so a candidate takes over from a holder that died or stopped
// once its lease ran out, never from a live one. The epoch is the key's
// create revision, which only grows: a holder that wakes up finds its
// lease gone or the key created again when it renews (fenced). torchrun's
// etcd rendezvous keeps its state the same way.

#include <memory>
#include <string>

#include "actors/cluster/arbiter.hpp"

namespace varsync {

struct etcd_arbiter_options {
  /// etcd's client address (plain HTTP).
  std::string host = "127.0.0.1";
  uint16_t port = 2379;
  /// The lead's key, the lease, this process's rank (arbiter_options).
  arbiter_options lead;
};

class etcd_arbiter final : public arbiter {
public:
  /// Checks that etcd answers. invalid_argument for an empty key or host,
  /// a negative rank or a lease that is not positive; replica_failed when
  /// etcd cannot be reached.
  static caf::expected<std::unique_ptr<etcd_arbiter>>
  open(etcd_arbiter_options options);

  /// Revokes a lease still held (the lead goes at once).
  ~etcd_arbiter() override;
  etcd_arbiter(const etcd_arbiter&) = delete;
  etcd_arbiter& operator=(const etcd_arbiter&) = delete;

  /// `alive` and `leased` both mean the key exists (etcd cannot tell a
  /// live holder from one whose lease still runs).
  caf::expected<lead> current() const override;
  /// The lease granted is the options' in whole seconds, at least one (and
  /// at least etcd's own minimum).
  caf::expected<uint64_t> try_acquire() override;
  /// fenced when the lease ran out (etcd dropped the lead) or the key is
  /// another holder's.
  caf::error renew(uint64_t epoch) override;
  /// Revokes the lease: etcd deletes the key at once.
  void release(uint64_t epoch) override;
  /// Nothing more to remove: the key goes with its lease.
  void forget() override {}
  const arbiter_options& options() const override;

  struct impl;

private:
  explicit etcd_arbiter(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync
