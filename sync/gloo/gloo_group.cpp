#include "sync/gloo/gloo_group.hpp"

#include <atomic>
#include <csignal>
#include <pthread.h>
#include <cstring>
#include <exception>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "devices/host_kernels.hpp"
#include "sync/gloo/control_store.hpp"
#include "sync/transport/data_transport.hpp"
#include "varsync/error.hpp"

namespace varsync {

struct gloo_group::impl {
  gloo_group_options options;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  bool broken = false;
  uint32_t next_tag = 0;

  std::string who() const {
    return "gloo group '" + options.name + "' rank "
           + std::to_string(options.rank) + " of "
           + std::to_string(options.size);
  }

  caf::error check_usable() const {
    if (!broken)
      return {};
    return make_error(errc::replica_failed,
                      who() + ": an earlier collective failed; the group "
                              "is unusable");
  }

  caf::error failed(const char* what, const std::exception& e) {
    broken = true;
    return make_error(errc::replica_failed,
                      who() + ": " + what + " failed: " + e.what()
                        + "; the group is unusable");
  }

  // One Gloo allreduce, in place, with `fn` as the reduce function.
  void run(void* data, int64_t count, size_t element_size,
           gloo::AllreduceOptions::Func fn) {
    gloo::AllreduceOptions opts{context};
    // Gloo types buffers by element size only; the dtype is in `fn`.
    switch (element_size) {
      case 2: opts.setOutput(static_cast<uint16_t*>(data), count); break;
      case 4: opts.setOutput(static_cast<uint32_t*>(data), count); break;
      default: opts.setOutput(static_cast<uint64_t*>(data), count); break;
    }
    opts.setReduceFunction(std::move(fn));
    opts.setTag(next_tag++);
    opts.setTimeout(options.timeout);
    gloo::allreduce(opts);
  }
};

caf::expected<std::unique_ptr<gloo_group>>
gloo_group::join(caf::actor_system& sys, rendezvous_store_actor store,
                 gloo_group_options options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    return make_error(errc::invalid_argument,
                      "gloo group: rank " + std::to_string(options.rank)
                        + " is not in [0, " + std::to_string(options.size)
                        + ")");
  if (options.timeout.count() <= 0)
    return make_error(errc::invalid_argument,
                      "gloo group: the timeout must be positive");
  const auto join_timeout = options.join_timeout.count() > 0
                              ? options.join_timeout
                              : options.timeout;
  auto p = std::make_unique<impl>();
  p->options = options;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.bind_host;
    {
      // Gloo writes to its sockets without MSG_NOSIGNAL: a peer that died
      // would raise SIGPIPE and kill the process. Its I/O thread inherits
      // this thread's signal mask, so SIGPIPE is blocked while it starts
      // (threads that run collectives block it too: block_sigpipe).
      auto old = block_sigpipe();
      p->device = gloo::transport::tcp::CreateDevice(attr);
      restore_signals(old);
    }
    control_store kv{sys, std::move(store), options.name + "/", join_timeout};
    p->context = std::make_shared<gloo::rendezvous::Context>(options.rank,
                                                             options.size);
    p->context->setTimeout(join_timeout);
    p->context->connectFullMesh(kv, p->device);
    p->context->setTimeout(options.timeout);
  } catch (const gloo::IoException& e) {
    return make_error(errc::timeout, p->who() + ": joining failed within "
                                       + std::to_string(join_timeout.count())
                                       + " ms: " + e.what());
  } catch (const std::exception& e) {
    return make_error(errc::replica_failed,
                      p->who() + ": joining failed: " + e.what());
  }
  return std::unique_ptr<gloo_group>{new gloo_group(std::move(p))};
}

gloo_group::gloo_group(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

sigset_t gloo_group::block_sigpipe() {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  return old;
}

void gloo_group::restore_signals(const sigset_t& old) {
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

gloo_group::~gloo_group() = default;

int gloo_group::rank() const { return impl_->options.rank; }

int gloo_group::size() const { return impl_->options.size; }

std::string gloo_group::describe() const {
  return "gloo over TCP, rank " + std::to_string(rank()) + " of "
         + std::to_string(size());
}

void gloo_group::block_signals() {
  block_sigpipe();
}

caf::error gloo_group::broadcast(void* data, size_t bytes, int root) {
  auto& d = *impl_;
  if (auto err = d.check_usable())
    return err;
  if (auto err = check_broadcast_input(d.who(), data, bytes, root,
                                       d.options.size))
    return err;
  if (bytes == 0 || d.options.size == 1)
    return {};
  try {
    gloo::BroadcastOptions opts{d.context};
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(d.next_tag++);
    opts.setTimeout(d.options.timeout);
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return d.failed("broadcast", e);
  }
  return {};
}

caf::error gloo_group::all_gather(const void* in, void* out, size_t bytes) {
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
  try {
    gloo::AllgatherOptions opts{d.context};
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
    opts.setOutput(static_cast<uint8_t*>(out),
                   bytes * static_cast<size_t>(d.options.size));
    opts.setTag(d.next_tag++);
    opts.setTimeout(d.options.timeout);
    gloo::allgather(opts);
  } catch (const std::exception& e) {
    return d.failed("all_gather", e);
  }
  return {};
}

caf::error gloo_group::all_reduce(reduce_op op, dtype type, void* data,
                                  int64_t count) {
  auto& d = *impl_;
  if (auto err = d.check_usable())
    return err;
  if (auto err = check_all_reduce_input(d.who(), op, type, data, count))
    return err;
  if (count == 0 || d.options.size == 1) {
    if (count > 0 && op == reduce_op::mean)
      host::split_assign(type, data, data, 0, count, 0, 1);
    return {};
  }
  const reduce_op combine = op == reduce_op::mean ? reduce_op::sum : op;
  // V4: a rank that sees an integer overflow while combining marks it; the
  // marks are then combined too, so every rank reports it.
  std::atomic<bool> overflowed{false};
  auto fn = [combine, type, &overflowed](void* c, const void* a,
                                         const void* b, size_t n) {
    const void* inputs[] = {a, b};
    auto end = static_cast<int64_t>(n);
    if (!is_floating(type)
        && host::first_overflow(combine, update_op::assign, type, inputs,
                                nullptr, 0, end)
             >= 0)
      overflowed.store(true);
    host::reduce(combine, type, c, inputs, 0, end);
  };
  try {
    d.run(data, count, size_of(type), fn);
    if (!is_floating(type)) {
      uint32_t flag = overflowed.load() ? 1 : 0;
      d.run(&flag, 1, sizeof(flag),
            [](void* c, const void* a, const void* b, size_t n) {
              for (size_t i = 0; i < n; ++i)
                static_cast<uint32_t*>(c)[i]
                  = static_cast<const uint32_t*>(a)[i]
                    | static_cast<const uint32_t*>(b)[i];
            });
      if (flag != 0)
        return all_reduce_overflow(d.who(), op, type);
    }
  } catch (const std::exception& e) {
    return d.failed("all_reduce", e);
  }
  if (op == reduce_op::mean) // the sum, then one division (as in-process)
    host::split_assign(type, data, data, 0, count, 0, d.options.size);
  return {};
}

} // namespace varsync
