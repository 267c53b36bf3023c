#include "actors/cluster/operation_sequencer_actor.hpp"

#include <utility>
#include <vector>

#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

// -- endpoint -------------------------------------------------------------

// The receiver's functions only send a message: they run under the lock,
// which keeps the early operations ahead of later ones.

void sequence_endpoint::attach(sequence_receiver receiver) {
  std::lock_guard<std::mutex> lock{mtx_};
  receiver_ = std::move(receiver);
  attached_ = true;
  for (auto& op : early_)
    receiver_.deliver(std::move(op));
  early_.clear();
  if (failed_)
    receiver_.failed(failure_);
}

void sequence_endpoint::deliver(sequenced_operation op) {
  std::lock_guard<std::mutex> lock{mtx_};
  if (failed_)
    return;
  if (!attached_)
    early_.push_back(std::move(op));
  else
    receiver_.deliver(std::move(op));
}

void sequence_endpoint::fail(caf::error reason) {
  std::lock_guard<std::mutex> lock{mtx_};
  if (failed_)
    return;
  failed_ = true;
  // P16: fenced is the sequencer's own process's word; to the others their
  // sequencer is lost.
  const bool fenced = has_code(reason, errc::fenced);
  failure_ = fenced && !orders_here_
               ? make_error(errc::replica_failed,
                            "process 0 left the strategy (its sequencer lost "
                            "its lead: "
                              + message_of(reason)
                              + "); cross-process operations fail from now "
                                "on")
               : std::move(reason);
  if (attached_)
    receiver_.failed(failure_);
  if (has_code(failure_, errc::shut_down)) // this process's own exit
    return;
  if (fenced) {
    lose(failure_, false);
    return;
  }
  const bool orderly = failure_ == caf::exit_reason::user_shutdown
                       || failure_ == caf::exit_reason::normal || closing_;
  lose(make_error(errc::replica_failed,
                  std::string{"process 0 left the strategy "}
                    + (orderly ? "(it shut its strategy down): "
                               : "(its control connection closed: it exited, "
                                 "was killed, or stopped answering for longer "
                                 "than the peer timeout): ")
                    + describe(failure_)
                    + "; cross-process operations fail from now on"),
       orderly);
}

void sequence_endpoint::sequencer_closing() {
  std::lock_guard<std::mutex> lock{mtx_};
  closing_ = true;
}

void sequence_endpoint::peer_left(int rank, const std::string& reason,
                                  bool orderly) {
  std::lock_guard<std::mutex> lock{mtx_};
  lose(make_error(errc::replica_failed,
                  "process " + std::to_string(rank)
                    + (orderly ? " left the strategy (it shut its strategy "
                                 "down): "
                               : " left the strategy (its control connection "
                                 "closed: it exited, was killed, or stopped "
                                 "answering for longer than the peer "
                                 "timeout): ")
                    + reason + "; cross-process operations fail from now on"),
       orderly);
}

void sequence_endpoint::on_lost(std::function<void(caf::error, bool)> fn) {
  std::lock_guard<std::mutex> lock{mtx_};
  lost_ = std::move(fn);
}

void sequence_endpoint::lose(caf::error reason, bool orderly) {
  if (lost_called_ || !lost_)
    return;
  lost_called_ = true;
  lost_(std::move(reason), orderly);
}

void departures::left() {
  std::lock_guard<std::mutex> lock{mtx_};
  --others_;
  cv_.notify_all();
}

void departures::stop_waiting() {
  std::lock_guard<std::mutex> lock{mtx_};
  others_ = 0;
  cv_.notify_all();
}

bool departures::await_all(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock{mtx_};
  return cv_.wait_for(lock, limit, [this] { return others_ <= 0; });
}

namespace {

// -- sequencer ------------------------------------------------------------

class sequencer_impl final : public operation_sequencer_actor::base {
public:
  sequencer_impl(caf::actor_config& cfg, int world_size,
                 std::shared_ptr<departures> gone, sequencer_lead lead)
    : operation_sequencer_actor::base(cfg),
      links_(static_cast<size_t>(world_size)),
      leaving_(static_cast<size_t>(world_size), false),
      gone_(std::move(gone)),
      lead_(std::move(lead)) {
  }

  behavior_type make_behavior() override {
    if (lead_.arbitrated())
      delayed_send(this, lead_.renew_every(), sequence_renew_atom::value);
    set_down_handler([this](caf::down_msg& msg) {
      // After a stop, the lead is checked before anything else: a sequencer
      // fenced meanwhile says so rather than that the others left.
      if (fenced(lead_.check()))
        return;
      for (size_t r = 0; r < links_.size(); ++r) {
        auto& l = links_[r];
        if (!l || l.address() != msg.source)
          continue;
        auto reason = system().render(msg.reason);
        // A process that said it leaves may close its connection before
        // its link's exit arrives: CAF then reports the connection.
        const bool orderly = msg.reason == caf::exit_reason::user_shutdown
                             || msg.reason == caf::exit_reason::normal
                             || leaving_[r];
        log()->info("process {} left the strategy: {}", r, reason);
        l = nullptr;
        if (r == 0)
          continue;
        if (gone_)
          gone_->left();
        // The others learn it now, not at their next collective's deadline.
        for (auto& other : links_)
          if (other)
            send(other, sequence_gone_atom::value, static_cast<int32_t>(r),
                 reason, orderly);
      }
    });
    return {
      [this](sequence_join_atom, int32_t rank,
             sequence_link_actor& link) -> caf::result<ok_atom> {
        if (rank < 0 || rank >= static_cast<int32_t>(links_.size())
            || links_[static_cast<size_t>(rank)] || !link)
          return make_error(errc::invalid_argument,
                            "sequencer: rank " + std::to_string(rank)
                              + " cannot join (out of range, or joined "
                                "already)");
        links_[static_cast<size_t>(rank)] = link;
        monitor(link);
        auto promise = make_response_promise<ok_atom>();
        joining_.push_back(promise);
        if (++joined_ == links_.size()) {
          for (auto& p : joining_)
            p.deliver(ok_atom::value);
          joining_.clear();
        }
        return promise;
      },
      [this](sequence_leave_atom) -> caf::result<ok_atom> {
        if (auto r = sender_rank(); r >= 0)
          leaving_[static_cast<size_t>(r)] = true;
        return ok_atom::value;
      },
      [this](sequence_close_atom) -> caf::result<ok_atom> {
        return close_links();
      },
      [this](sequence_renew_atom) {
        if (!lead_.arbitrated() || fenced(lead_.renew()))
          return;
        delayed_send(this, lead_.renew_every(), sequence_renew_atom::value);
      },
      [this](sequence_submit_atom, sequenced_operation& op) {
        // The sender's rank is the one it joined as, whatever op says.
        const int32_t origin = sender_rank();
        if (origin < 0 || joined_ < links_.size()) {
          log()->warn("services mode: dropped an operation from a process "
                      "that has not joined the sequencer");
          return;
        }
        if (fenced(lead_.check()))
          return;
        op.origin = origin;
        op.epoch = lead_.epoch();
        op.sequence = ++sequence_;
        // The other processes first: their copy crosses the network, and
        // the operation's round waits for the last process to get it.
        for (size_t r = 1; r <= links_.size(); ++r)
          if (auto& l = links_[r % links_.size()])
            send(l, sequence_deliver_atom::value, op);
      },
    };
  }

  // Promises and links hold remote proxies that can lead back here. The
  // lead is given up (unless fenced): this process orders nothing more;
  // its file goes when no other process is left to use it.
  void on_exit() override {
    joining_.clear();
    links_.clear();
    lead_.release(gone_ && gone_->await_all(std::chrono::milliseconds{0}));
  }

private:
  /// Stops the sequencer when `err` (from its lead) says it may order
  /// nothing more: every link then fails with it.
  bool fenced(caf::error err) {
    if (!err)
      return false;
    log()->error("{}", describe(err));
    if (gone_)
      gone_->stop_waiting();
    quit(std::move(err));
    return true;
  }

  /// The rank whose link sent the current message, or -1.
  int32_t sender_rank() {
    auto sender = current_sender();
    for (size_t r = 0; r < links_.size(); ++r)
      if (links_[r] && sender == links_[r]->ctrl())
        return static_cast<int32_t>(r);
    return -1;
  }

  /// Tells every other process's link that process 0 shuts down; answers
  /// once each heard it (or could not: bounded).
  caf::typed_response_promise<ok_atom> close_links() {
    auto done = make_response_promise<ok_atom>();
    auto waiting = std::make_shared<size_t>(0);
    for (size_t r = 1; r < links_.size(); ++r)
      if (links_[r])
        ++*waiting;
    if (*waiting == 0) {
      done.deliver(ok_atom::value);
      return done;
    }
    auto one = [done, waiting]() mutable {
      if (--*waiting == 0)
        done.deliver(ok_atom::value);
    };
    for (size_t r = 1; r < links_.size(); ++r)
      if (links_[r])
        request(links_[r], std::chrono::seconds{1}, sequence_close_atom::value)
          .then([one](ok_atom) mutable { one(); },
                [one](caf::error&) mutable { one(); });
    return done;
  }

  std::vector<sequence_link_actor> links_;
  /// The processes that said they leave in order (sequence_leave_atom).
  std::vector<bool> leaving_;
  std::shared_ptr<departures> gone_;
  size_t joined_ = 0;
  std::vector<caf::typed_response_promise<ok_atom>> joining_;
  uint64_t sequence_ = 0;
  sequencer_lead lead_;
};

// -- link -----------------------------------------------------------------

class link_impl final : public sequence_link_actor::base {
public:
  link_impl(caf::actor_config& cfg, operation_sequencer_actor sequencer,
            std::shared_ptr<sequence_endpoint> endpoint)
    : sequence_link_actor::base(cfg),
      sequencer_(std::move(sequencer)),
      endpoint_(std::move(endpoint)) {
  }

  behavior_type make_behavior() override {
    monitor(sequencer_);
    set_down_handler([this](caf::down_msg& msg) {
      if (msg.source == sequencer_.address())
        endpoint_->fail(msg.reason ? msg.reason
                                   : caf::error{caf::sec::runtime_error});
    });
    return {
      [this](sequence_submit_atom, sequenced_operation& op) {
        send(sequencer_, sequence_submit_atom::value, std::move(op));
      },
      [this](sequence_deliver_atom, sequenced_operation& op) {
        // Only the sequencer orders operations, and never under an epoch
        // older than one seen (P16: a fenced sequencer's late message).
        if (current_sender() != sequencer_->ctrl())
          return;
        if (op.epoch < epoch_) {
          log()->warn("services mode: refused operation {} of epoch {}: "
                      "epoch {} has ordered operations since",
                      op.sequence, op.epoch, epoch_);
          return;
        }
        epoch_ = op.epoch;
        endpoint_->deliver(std::move(op));
      },
      [this](sequence_gone_atom, int32_t rank, const std::string& reason,
             bool orderly) {
        if (current_sender() != sequencer_->ctrl())
          return;
        endpoint_->peer_left(rank, reason, orderly);
      },
      [this](sequence_leave_atom) -> caf::result<ok_atom> {
        // Answered once the sequencer heard it, or could not (bounded):
        // the shutdown goes on either way.
        auto done = make_response_promise<ok_atom>();
        request(sequencer_, std::chrono::seconds{1},
                sequence_leave_atom::value)
          .then([done](ok_atom) mutable { done.deliver(ok_atom::value); },
                [done](caf::error&) mutable { done.deliver(ok_atom::value); });
        return done;
      },
      [this](sequence_close_atom) -> caf::result<ok_atom> {
        if (current_sender() == sequencer_->ctrl())
          endpoint_->sequencer_closing();
        return ok_atom::value;
      },
    };
  }

  void on_exit() override {
    endpoint_->fail(make_error(errc::shut_down,
                               "the link to the sequencer stopped"));
    sequencer_ = nullptr;
  }

private:
  operation_sequencer_actor sequencer_;
  std::shared_ptr<sequence_endpoint> endpoint_;
  /// The newest epoch delivered.
  uint64_t epoch_ = 0;
};

} // namespace

operation_sequencer_actor
spawn_operation_sequencer(caf::actor_system& sys, int world_size,
                          std::shared_ptr<departures> gone,
                          sequencer_lead lead) {
  return sys.spawn<sequencer_impl>(world_size, std::move(gone),
                                   std::move(lead));
}

sequence_link_actor
spawn_sequence_link(caf::actor_system& sys, operation_sequencer_actor sequencer,
                    std::shared_ptr<sequence_endpoint> endpoint) {
  return sys.spawn<link_impl>(std::move(sequencer), std::move(endpoint));
}

} // namespace varsync
