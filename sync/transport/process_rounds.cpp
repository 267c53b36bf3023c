#include "sync/transport/process_rounds.hpp"

#include <algorithm>
#include <limits>

#include "core/logging.hpp"

namespace varsync {

void process_rounds::configure(std::chrono::nanoseconds stall_threshold) {
  std::lock_guard<std::mutex> guard{mutex_};
  threshold_ = stall_threshold;
  // The processes have just joined: the first round counts from here.
  round_ended_ = clock::now();
}

uint32_t process_rounds::busy_micros() const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
              clock::now() - round_ended_)
              .count();
  return static_cast<uint32_t>(std::clamp<int64_t>(
    us, 0, std::numeric_limits<uint32_t>::max()));
}

void process_rounds::record(const std::vector<uint32_t>& busy, int my_rank,
                            std::chrono::nanoseconds waited,
                            const std::string& what) {
  std::lock_guard<std::mutex> guard{mutex_};
  round_ended_ = clock::now();
  waited_ += waited;
  if (busy.size() < 2)
    return;
  peers_.resize(busy.size());
  size_t last = 0;
  for (size_t r = 1; r < busy.size(); ++r)
    if (busy[r] > busy[last])
      last = r;
  uint32_t second = 0;
  for (size_t r = 0; r < busy.size(); ++r)
    if (r != last)
      second = std::max(second, busy[r]);
  const std::chrono::microseconds lag{busy[last] - second};
  auto& p = peers_[last];
  ++p.slowest;
  p.kept_waiting += lag;
  if (threshold_.count() <= 0 || lag <= threshold_)
    return;
  ++p.stalls;
  if (round_ended_ - p.last_warning < std::chrono::seconds(10)
      && p.last_warning != clock::time_point{})
    return;
  p.last_warning = round_ended_;
  log()->warn("stall: process {} kept the other processes waiting {:.3f} s "
              "at {} (it arrived last; threshold {:.3f} s; this is process "
              "{}; {} stalls of it so far)",
              last, std::chrono::duration<double>(lag).count(), what,
              std::chrono::duration<double>(threshold_).count(), my_rank,
              p.stalls);
}

std::vector<process_metrics> process_rounds::snapshot() const {
  std::lock_guard<std::mutex> guard{mutex_};
  std::vector<process_metrics> out;
  for (size_t r = 0; r < peers_.size(); ++r) {
    process_metrics m;
    m.rank = static_cast<int>(r);
    m.slowest = peers_[r].slowest;
    m.stalls = peers_[r].stalls;
    m.kept_waiting_seconds
      = std::chrono::duration<double>(peers_[r].kept_waiting).count();
    out.push_back(m);
  }
  return out;
}

double process_rounds::waited_seconds() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return std::chrono::duration<double>(waited_).count();
}

} // namespace varsync
