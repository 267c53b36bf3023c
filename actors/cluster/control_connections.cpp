#include "actors/cluster/control_connections.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/scribe_impl.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;
using caf::io::network::default_multiplexer;

caf::io::network::default_multiplexer* multiplexer_of(caf::actor_system& sys) {
  return dynamic_cast<default_multiplexer*>(&sys.middleman().backend());
}

std::string held_back_text(size_t held_back) {
  return held_back == 0 ? std::string{}
                        : " (" + std::to_string(held_back)
                            + " more closed in the second before)";
}

caf::actor basp_of(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

// A TCP connection as CAF's own (caf::io::network::scribe_impl), with the
// bounds CAF 0.17 lacks. Its state is touched on CAF's network thread only
// (the broker that owns it, and reap()).
class control_scribe final : public caf::io::network::scribe_impl {
public:
  control_scribe(default_multiplexer& mx, int fd,
                 std::shared_ptr<std::atomic<size_t>> open,
                 std::shared_ptr<log_throttle> warnings)
    : scribe_impl(mx, fd),
      open_(std::move(open)),
      warnings_(std::move(warnings)) {
    open_->fetch_add(1);
  }

  ~control_scribe() override { open_->fetch_sub(1); }

  // CAF asks for the payload a header claims: beyond the bound, the
  // connection closes instead of a buffer that size being made.
  void configure_read(caf::io::receive_policy::config config) override {
    if (config.second > control_limits::message_bytes) {
      if (size_t held_back = 0; warnings_->admit(held_back))
        log()->warn("control plane: closed the connection from {}: a message "
                    "there claims {} bytes, more than the {} any control "
                    "message may have{}",
                    peer(), config.second, control_limits::message_bytes,
                    held_back_text(held_back));
      stream_.passivate();
      // Not from inside the broker's handler that asked: from the loop.
      caf::intrusive_ptr<control_scribe> self{this};
      auto* mx = &stream_.backend();
      mx->post([self, mx] { self->close_now(mx); });
      return;
    }
    scribe_impl::configure_read(config);
  }

  bool consume(caf::execution_unit* ctx, const void* buf,
               size_t size) override {
    ++reads_;
    return scribe::consume(ctx, buf, size);
  }

  // CAF's handshake is a header and a payload: two reads.
  bool past_handshake() const { return reads_ >= 2; }

  // Closed by CAF (or by us) after it was started.
  bool gone() const { return launched_ && detached(); }

  // As a failed read would: CAF's broker learns the connection is gone.
  // The peer learns it at once, even while a reference keeps the socket.
  void close_now(caf::execution_unit* ctx) {
    ::shutdown(stream_.fd(), SHUT_RDWR);
    if (!detached())
      io_failure(ctx, caf::io::network::operation::read);
  }

  std::string peer() const { return addr() + ":" + std::to_string(port()); }

private:
  std::shared_ptr<std::atomic<size_t>> open_;
  std::shared_ptr<log_throttle> warnings_;
  size_t reads_ = 0;
};

} // namespace

struct control_connections::tally {
  std::shared_ptr<std::atomic<size_t>> open
    = std::make_shared<std::atomic<size_t>>(0);
  // What a peer can make happen as often as it likes is logged once a
  // second at most.
  std::shared_ptr<log_throttle> warnings = std::make_shared<log_throttle>();
  std::chrono::milliseconds handshake_timeout;
  std::mutex mtx;
  // Served connections not yet through CAF's handshake, with their
  // deadlines.
  std::vector<std::pair<caf::intrusive_ptr<control_scribe>, clock::time_point>>
    unproven;
  bool released = false;
};

control_connections::control_connections(
  caf::actor_system& sys, std::chrono::milliseconds handshake_timeout)
  : sys_(sys), tally_(std::make_shared<tally>()) {
  tally_->handshake_timeout = handshake_timeout;
}

control_connections::~control_connections() {
  release();
}

void control_connections::serve(int fd, uint16_t port,
                                const caf::strong_actor_ptr& published,
                                const std::set<std::string>& interface) {
  auto* mx = multiplexer_of(sys_);
  if (mx == nullptr) {
    ::close(fd);
    return;
  }
  auto scribe = caf::make_counted<control_scribe>(*mx, fd, tally_->open,
                                                  tally_->warnings);
  {
    std::lock_guard<std::mutex> lock{tally_->mtx};
    if (tally_->released)
      return; // closes fd
    tally_->unproven.emplace_back(scribe,
                                  clock::now() + tally_->handshake_timeout);
  }
  // What CAF's own acceptor does, with a socket accepted here: the broker
  // adds the connection and sends its handshake, naming `published`.
  caf::anon_send(basp_of(sys_), caf::publish_atom::value,
                 caf::io::scribe_ptr{std::move(scribe)}, port, published,
                 interface);
}

caf::expected<control_connections::remote>
control_connections::open(int fd, uint16_t port,
                          std::chrono::milliseconds timeout) {
  auto* mx = multiplexer_of(sys_);
  if (mx == nullptr) {
    ::close(fd);
    return make_error(errc::invalid_argument,
                      "control plane: CAF's network layer runs another "
                      "backend than its default");
  }
  caf::io::scribe_ptr scribe
    = caf::make_counted<control_scribe>(*mx, fd, tally_->open,
                                        tally_->warnings);
  // What CAF's connect does after its own connect(): the broker runs the
  // handshake and answers with what process 0 published.
  caf::scoped_actor self{sys_};
  caf::expected<remote> out{caf::error{}};
  self
    ->request(basp_of(sys_), timeout, caf::connect_atom::value,
              std::move(scribe), port)
    .receive(
      [&](caf::node_id&, caf::strong_actor_ptr& actor,
          std::set<std::string>& interface) {
        out = remote{std::move(actor), std::move(interface)};
      },
      [&](caf::error& err) { out = std::move(err); });
  return out;
}

size_t control_connections::open_count() const {
  return tally_->open->load();
}

void control_connections::reap() {
  auto* mx = multiplexer_of(sys_);
  if (mx == nullptr)
    return;
  mx->post([t = tally_, mx] {
    std::vector<caf::intrusive_ptr<control_scribe>> late;
    {
      std::lock_guard<std::mutex> lock{t->mtx};
      auto now = clock::now();
      std::erase_if(t->unproven, [&](auto& entry) {
        auto& [scribe, deadline] = entry;
        if (scribe->past_handshake() || scribe->gone())
          return true;
        if (deadline > now)
          return false;
        late.push_back(scribe);
        return true;
      });
    }
    for (auto& scribe : late) {
      if (size_t held_back = 0; t->warnings->admit(held_back))
        log()->warn("control plane: closed the connection from {}: its peer "
                    "passed the rendezvous handshake but did not complete "
                    "CAF's within {} ms{}",
                    scribe->peer(), t->handshake_timeout.count(),
                    held_back_text(held_back));
      scribe->close_now(mx);
    }
  });
}

void control_connections::release() {
  std::lock_guard<std::mutex> lock{tally_->mtx};
  tally_->released = true;
  tally_->unproven.clear();
}

} // namespace varsync
