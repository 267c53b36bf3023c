#pragma once
// Helpers of the GPU tests: random host tensors, device buffers, and a
// comparison that is bit for bit except that any NaN equals any NaN (the GPU
// and x86 produce different NaN payloads and signs; varsync promises bitwise
// agreement of non-NaN results only).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "varsync/dtype.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "devices/cuda/cuda_device.hpp"

namespace gpu_test {

using namespace varsync;

inline const std::vector<dtype>& all_dtypes() {
  static const std::vector<dtype> types{dtype::float16, dtype::bfloat16,
                                        dtype::float32, dtype::float64,
                                        dtype::int32,   dtype::int64};
  return types;
}

/// Random values: floating dtypes uniform in [-range, range] (rounded to the
/// dtype), integer dtypes uniform over all bit patterns (so that arithmetic
/// wraps and splits see negative values).
inline tensor random_tensor(dtype t, tensor_shape shape, std::mt19937_64& rng,
                            double range = 1000.0) {
  auto out = tensor::empty(t, std::move(shape));
  std::uniform_real_distribution<double> real(-range, range);
  auto* p = out.mutable_raw();
  for (int64_t i = 0; i < out.size(); ++i) {
    if (t == dtype::int32) {
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(rng());
    } else if (t == dtype::int64) {
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(rng());
    } else {
      store_double(t, p, i, real(rng));
    }
  }
  return out;
}

/// Random integer values in [-range, range] for any dtype (exact sums in any
/// order over up to 8 ranks, for NCCL, whose reduction order differs from the
/// host's; bfloat16 holds integers exactly only up to 256, so its range is
/// capped at 30).
inline tensor random_small_ints(dtype t, int64_t n, std::mt19937_64& rng,
                                int range = 100) {
  if (t == dtype::bfloat16)
    range = std::min(range, 30);
  auto out = tensor::empty(t, {n});
  std::uniform_int_distribution<int> dist(-range, range);
  for (int64_t i = 0; i < n; ++i)
    store_double(t, out.mutable_raw(), i, dist(rng));
  return out;
}

/// Bitwise equal, except that NaN equals NaN; reports the first mismatch.
inline bool same_values(const tensor& a, const tensor& b, std::string* why) {
  if (a.type() != b.type() || a.size() != b.size()) {
    *why = "dtype or size differs";
    return false;
  }
  const size_t width = size_of(a.type());
  const auto* pa = static_cast<const unsigned char*>(a.raw());
  const auto* pb = static_cast<const unsigned char*>(b.raw());
  for (int64_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(pa + i * width, pb + i * width, width) == 0)
      continue;
    const double x = load_double(a.type(), a.raw(), i);
    const double y = load_double(b.type(), b.raw(), i);
    if (is_floating(a.type()) && std::isnan(x) && std::isnan(y))
      continue;
    *why = "element " + std::to_string(i) + ": " + std::to_string(x) + " vs "
           + std::to_string(y);
    return false;
  }
  return true;
}

#define CHECK_SAME_VALUES(a, b)                                                \
  do {                                                                         \
    std::string why_;                                                          \
    const bool same_ = ::gpu_test::same_values((a), (b), &why_);               \
    INFO(why_);                                                                \
    CHECK(same_);                                                              \
  } while (false)

/// Opens cuda:index or fails the test with the error.
inline std::unique_ptr<cuda_device> open_gpu(int index = 0) {
  auto dev = cuda_device::open(index);
  if (!dev)
    FAIL("cannot open cuda:" << index << ": " << describe(dev.error()));
  return std::move(*dev);
}

/// A device buffer of one cuda_device, released on scope exit.
class device_buffer {
public:
  device_buffer(cuda_device& dev, size_t nbytes) : dev_(&dev) {
    auto p = dev.allocate(nbytes);
    if (!p)
      FAIL("allocate: " << describe(p.error()));
    ptr_ = *p;
  }
  device_buffer(cuda_device& dev, const tensor& init)
    : device_buffer(dev, init.nbytes()) {
    auto err = dev.upload(ptr_, init);
    if (err)
      FAIL("upload: " << describe(err));
  }
  ~device_buffer() {
    if (ptr_ != nullptr)
      dev_->release(ptr_);
  }
  device_buffer(device_buffer&& other) noexcept
    : dev_(other.dev_), ptr_(other.ptr_) {
    other.ptr_ = nullptr;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer& operator=(device_buffer&&) = delete;

  void* get() const { return ptr_; }

  tensor download(dtype t, const tensor_shape& shape) const {
    auto out = dev_->download(ptr_, t, shape);
    if (!out)
      FAIL("download: " << describe(out.error()));
    return std::move(*out);
  }

private:
  cuda_device* dev_;
  void* ptr_ = nullptr;
};

} // namespace gpu_test
