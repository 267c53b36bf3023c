#pragma once
// Holds a CUDA stream up until released: a host function that waits for the
// test, which is how a collective whose peer never arrives looks to the host
// (queued work that does not finish). Never leaves the stream held.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <cuda_runtime.h>

namespace gpu_test {

class stream_blocker {
public:
  explicit stream_blocker(void* stream)
    : released_(std::make_shared<std::atomic<bool>>(false)) {
    // The flag outlives the blocker: the host function may run after the
    // blocker is gone (it was released first).
    auto* keep = new std::shared_ptr<std::atomic<bool>>(released_);
    auto e = cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), &hold, keep);
    if (e != cudaSuccess)
      delete keep;
    REQUIRE(e == cudaSuccess);
  }
  ~stream_blocker() { release(); }
  stream_blocker(const stream_blocker&) = delete;
  stream_blocker& operator=(const stream_blocker&) = delete;

  void release() { released_->store(true, std::memory_order_release); }

  /// Releases the stream after `delay`, from another thread.
  std::thread release_after(std::chrono::milliseconds delay) {
    return std::thread{[flag = released_, delay] {
      std::this_thread::sleep_for(delay);
      flag->store(true, std::memory_order_release);
    }};
  }

private:
  static void CUDART_CB hold(void* p) {
    auto* flag = static_cast<std::shared_ptr<std::atomic<bool>>*>(p);
    while (!(*flag)->load(std::memory_order_acquire))
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    delete flag;
  }
  std::shared_ptr<std::atomic<bool>> released_;
};

} // namespace gpu_test
