#include "varsync/tensor.hpp"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <type_traits>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <cstddef>
#include <cstring>
#include <new>
#include <sstream>
#include <stdexcept>

#include "core/half.hpp"
#include "varsync/error.hpp"
#include "varsync/dtype.hpp"
#include "core/host_buffer_pool.hpp"
#include "varsync/ext/host_buffer_cache.hpp"

namespace varsync {

namespace {

constexpr size_t alignment = 64;

} // namespace

int64_t element_count(const tensor_shape& s) {
  int64_t n = 1;
  bool empty = false;
  for (auto d : s) {
    if (d < 0)
      return -1;
    if (d == 0) {
      empty = true;
      continue;
    }
    // Overflow is checked before it happens (a fuzz finding: shapes from
    // other processes are untrusted).
    if (n > std::numeric_limits<int64_t>::max() / d)
      return -1;
    n *= d;
  }
  return empty ? 0 : n;
}

std::string to_string(const tensor_shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(s[i]);
  }
  out += "]";
  return out;
}

namespace {

// Large buffers are recycled: a fresh multi-megabyte allocation comes from
// mmap and pays a page fault per 4 KiB on first touch (milliseconds per
// buffer), and glibc hands it back to the OS on free. Sizes round up to a
// power of two so that buffers of similar sizes share a class. What the
// cache does not keep is freed; glibc keeps freed chunks below its mmap
// threshold (up to 32 MiB) in the heap, so after every 64 MiB freed that
// way it is asked to return free heap memory (malloc_trim).
class large_buffer_pool {
public:
  static constexpr size_t min_pooled = size_t{256} << 10;
  static constexpr size_t default_limit = size_t{1} << 30;
  static constexpr size_t max_per_class = 8;
  static constexpr size_t trim_every = size_t{64} << 20;

  static large_buffer_pool& instance() {
    // Never destroyed: tensors may be freed during static destruction.
    static auto* pool = new large_buffer_pool;
    return *pool;
  }

  static size_t class_size(size_t nbytes) {
    // Above 2^63 bytes the doubling below would wrap to 0 and never end.
    if (nbytes > std::numeric_limits<size_t>::max() / 2 + 1)
      throw std::bad_alloc{};
    size_t size = min_pooled;
    while (size < nbytes)
      size <<= 1;
    return size;
  }

  void* take(size_t size) {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto& free_list = free_[size];
      if (!free_list.empty()) {
        auto* p = free_list.back();
        free_list.pop_back();
        cached_ -= size;
        cached_view_.store(cached_, std::memory_order_relaxed);
        return p;
      }
    }
    return std::aligned_alloc(alignment, size);
  }

  void give_back(void* p, size_t size) {
    bool trim_heap = false;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto& free_list = free_[size];
      if (free_list.size() < max_per_class && cached_ + size <= limit_) {
        free_list.push_back(p);
        cached_ += size;
        cached_view_.store(cached_, std::memory_order_relaxed);
        return;
      }
      freed_since_trim_ += size;
      if (freed_since_trim_ >= trim_every) {
        freed_since_trim_ = 0;
        trim_heap = true;
      }
    }
    std::free(p);
    if (trim_heap)
      malloc_trim(0);
  }

  size_t limit() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return limit_;
  }

  /// Sets the limit; frees what the cache holds above it.
  size_t set_limit(size_t bytes) {
    std::vector<void*> freed;
    size_t previous = 0;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      previous = limit_;
      limit_ = bytes;
      // Largest classes first: the fewest frees to get under the limit.
      std::vector<size_t> sizes;
      for (auto& [size, list] : free_)
        sizes.push_back(size);
      std::sort(sizes.rbegin(), sizes.rend());
      for (auto size : sizes) {
        auto& list = free_[size];
        while (cached_ > limit_ && !list.empty()) {
          freed.push_back(list.back());
          list.pop_back();
          cached_ -= size;
        }
      }
      cached_view_.store(cached_, std::memory_order_relaxed);
    }
    for (auto* p : freed)
      std::free(p);
    if (!freed.empty())
      malloc_trim(0);
    return previous;
  }

  // Read on every memory budget check: no lock.
  size_t cached_bytes() const {
    return cached_view_.load(std::memory_order_relaxed);
  }

  size_t trim() {
    std::unordered_map<size_t, std::vector<void*>> freed;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      freed.swap(free_);
      bytes = cached_;
      cached_ = 0;
      cached_view_.store(0, std::memory_order_relaxed);
    }
    for (auto& [size, list] : freed)
      for (auto* p : list)
        std::free(p);
    if (bytes > 0)
      malloc_trim(0);
    return bytes;
  }

private:
  mutable std::mutex mtx_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t limit_ = default_limit;
  size_t freed_since_trim_ = 0;
  size_t cached_ = 0;
  std::atomic<size_t> cached_view_{0}; // cached_, for lock-free readers
};

} // namespace

size_t host_buffer_pool_cached_bytes() {
  return large_buffer_pool::instance().cached_bytes();
}

size_t trim_host_buffer_pool() {
  return large_buffer_pool::instance().trim();
}

size_t host_buffer_cache_limit() {
  return large_buffer_pool::instance().limit();
}

size_t set_host_buffer_cache_limit(size_t bytes) {
  return large_buffer_pool::instance().set_limit(bytes);
}

size_t host_buffer_cache_bytes() {
  return large_buffer_pool::instance().cached_bytes();
}

// Aligned host allocation behind every tensor.
static std::shared_ptr<void> allocate_host_bytes(size_t nbytes) {
  if (nbytes == 0) {
    // Nothing to hold: every empty buffer is one static block without an
    // owner, so that a default tensor (a message field, a write's slot
    // before its value) costs no allocation and no shared count.
    alignas(alignment) static std::byte empty_block[alignment];
    return std::shared_ptr<void>(std::shared_ptr<void>{}, empty_block);
  }
  if (nbytes >= large_buffer_pool::min_pooled) {
    auto size = large_buffer_pool::class_size(nbytes);
    void* p = large_buffer_pool::instance().take(size);
    if (p == nullptr)
      throw std::bad_alloc{};
    return std::shared_ptr<void>(p, [size](void* q) {
      large_buffer_pool::instance().give_back(q, size);
    });
  }
  size_t rounded = (nbytes + alignment - 1) / alignment * alignment;
  if (rounded == 0)
    rounded = alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr)
    throw std::bad_alloc{};
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

void store_double(dtype type, void* dst, int64_t i, double v) {
  switch (type) {
    case dtype::float16:
      static_cast<uint16_t*>(dst)[i] = float_to_float16(static_cast<float>(v));
      break;
    case dtype::bfloat16:
      static_cast<uint16_t*>(dst)[i] = float_to_bfloat16(static_cast<float>(v));
      break;
    case dtype::float32:
      static_cast<float*>(dst)[i] = static_cast<float>(v);
      break;
    case dtype::float64:
      static_cast<double*>(dst)[i] = v;
      break;
    case dtype::int32:
      static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(v);
      break;
    case dtype::int64:
      static_cast<int64_t*>(dst)[i] = static_cast<int64_t>(v);
      break;
  }
}

double load_double(dtype type, const void* src, int64_t i) {
  switch (type) {
    case dtype::float16:
      return float16_to_float(static_cast<const uint16_t*>(src)[i]);
    case dtype::bfloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(src)[i]);
    case dtype::float32: return static_cast<const float*>(src)[i];
    case dtype::float64: return static_cast<const double*>(src)[i];
    case dtype::int32: return static_cast<const int32_t*>(src)[i];
    case dtype::int64:
      return static_cast<double>(static_cast<const int64_t*>(src)[i]);
  }
  return 0;
}

tensor::tensor(dtype type, tensor_shape shape, int64_t size,
               std::shared_ptr<void> data)
  : type_(type), shape_(std::move(shape)), size_(size), data_(std::move(data)) {
}

tensor::tensor() : tensor(dtype::float32, {0}, 0, allocate_host_bytes(0)) {
}

tensor tensor::empty(dtype type, tensor_shape shape) {
  auto n = element_count(shape);
  if (n < 0)
    throw std::invalid_argument("tensor: shape " + to_string(shape)
                                + " has a negative extent or too many "
                                  "elements");
  // n x element size must not wrap (2^62 float32s would get 0 bytes).
  // (size_of is 0 for an invalid dtype, which validation reports later.)
  auto element = size_of(type);
  if (element != 0
      && static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / element)
    throw std::invalid_argument("tensor: shape " + to_string(shape)
                                + " has too many bytes");
  auto bytes = allocate_host_bytes(static_cast<size_t>(n) * size_of(type));
  return tensor{type, std::move(shape), n, std::move(bytes)};
}

tensor tensor::zeros(dtype type, tensor_shape shape) {
  auto t = empty(type, std::move(shape));
  std::memset(t.data_.get(), 0, t.nbytes());
  return t;
}

tensor tensor::filled(dtype type, tensor_shape shape, double value) {
  auto t = empty(type, std::move(shape));
  for (int64_t i = 0; i < t.size_; ++i)
    store_double(type, t.data_.get(), i, value);
  return t;
}

tensor tensor::from_floats(dtype type, tensor_shape shape,
                           const std::vector<float>& values) {
  if (!is_floating(type))
    throw std::invalid_argument("tensor::from_floats: "
                                + std::string{to_string(type)}
                                + " is not a floating dtype");
  auto t = empty(type, std::move(shape));
  if (static_cast<size_t>(t.size_) != values.size())
    throw std::invalid_argument(
      "tensor::from_floats: " + std::to_string(values.size())
      + " values for shape " + to_string(t.shape_) + " of "
      + std::to_string(t.size_) + " elements");
  auto* out = t.data_.get();
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    switch (type) {
      case dtype::float16:
        static_cast<uint16_t*>(out)[i] = float_to_float16(x);
        break;
      case dtype::bfloat16:
        static_cast<uint16_t*>(out)[i] = float_to_bfloat16(x);
        break;
      case dtype::float32: static_cast<float*>(out)[i] = x; break;
      default: static_cast<double*>(out)[i] = x; break;
    }
  }
  return t;
}

tensor tensor::from_bytes(dtype type, tensor_shape shape, const void* bytes,
                          size_t nbytes) {
  auto t = empty(type, std::move(shape));
  if (nbytes != t.nbytes())
    throw std::invalid_argument("tensor::from_bytes: byte count does not "
                                "match dtype and shape");
  if (nbytes > 0)
    std::memcpy(t.data_.get(), bytes, nbytes);
  return t;
}

void* tensor::mutable_raw() {
  if (data_.use_count() > 1) {
    auto fresh = allocate_host_bytes(nbytes());
    if (nbytes() > 0)
      std::memcpy(fresh.get(), data_.get(), nbytes());
    data_ = std::move(fresh);
  }
  return data_.get();
}

double tensor::as_double(int64_t i) const {
  return load_double(type_, data_.get(), i);
}

namespace {

// 2^63: the first double above every int64.
constexpr double two_pow_63 = 9223372036854775808.0;

// v as T if the conversion is exact; nullopt otherwise.
template <class T>
std::optional<T> exact_from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v) || std::isinf(v))
      return static_cast<T>(v);
    if (std::fabs(v) > static_cast<double>(std::numeric_limits<T>::max()))
      return std::nullopt;
    auto out = static_cast<T>(v);
    if (static_cast<double>(out) != v)
      return std::nullopt;
    return out;
  } else {
    if (!std::isfinite(v) || std::trunc(v) != v)
      return std::nullopt;
    if (v < static_cast<double>(std::numeric_limits<T>::min())
        || v >= (std::is_same_v<T, int64_t>
                   ? two_pow_63
                   : static_cast<double>(std::numeric_limits<T>::max()) + 1))
      return std::nullopt;
    return static_cast<T>(v);
  }
}

template <class T>
std::optional<T> exact_from_int64(int64_t v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return v;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    if (v < std::numeric_limits<int32_t>::min()
        || v > std::numeric_limits<int32_t>::max())
      return std::nullopt;
    return static_cast<int32_t>(v);
  } else {
    // Large int64 values round in a float: convert and check the way back.
    auto out = static_cast<T>(v);
    auto back = static_cast<double>(out);
    if (back >= two_pow_63 || static_cast<int64_t>(back) != v)
      return std::nullopt;
    return out;
  }
}

} // namespace

template <class T>
caf::expected<T> scalar_as(const tensor& x, const std::string& what) {
  if (x.size() != 1)
    return make_error(errc::shape_mismatch,
                      what + ": expected exactly one element but the value has "
                        "shape " + to_string(x.shape()) + " ("
                        + std::to_string(x.size()) + " elements)");
  if (x.type() == dtype_of_v<T>)
    return *x.data<T>();
  auto out = x.type() == dtype::int64
               ? exact_from_int64<T>(*x.data<int64_t>())
               : exact_from_double<T>(x.as_double(0));
  if (!out) {
    std::ostringstream value;
    if (x.type() == dtype::int64)
      value << *x.data<int64_t>();
    else
      value << x.as_double(0);
    return make_error(errc::dtype_mismatch,
                      what + ": the " + std::string{to_string(x.type())}
                        + " value " + value.str() + " is not representable as "
                        + std::string{to_string(dtype_of_v<T>)});
  }
  return *out;
}

template caf::expected<float> scalar_as<float>(const tensor&,
                                               const std::string&);
template caf::expected<double> scalar_as<double>(const tensor&,
                                                 const std::string&);
template caf::expected<int32_t> scalar_as<int32_t>(const tensor&,
                                                   const std::string&);
template caf::expected<int64_t> scalar_as<int64_t>(const tensor&,
                                                   const std::string&);

caf::error tensor::check_dtype(dtype expected, const char* what) const {
  if (expected == type_)
    return {};
  return make_error(errc::dtype_mismatch,
                    std::string{"tensor::"} + what + ": expected dtype "
                      + std::string{to_string(expected)} + " but the tensor is "
                      + std::string{to_string(type_)} + " " + to_string(shape_));
}

caf::error tensor::check_single(const char* what) const {
  if (size_ == 1)
    return {};
  return make_error(errc::shape_mismatch,
                    std::string{"tensor::"} + what
                      + ": expected exactly one element but the tensor has shape "
                      + to_string(shape_) + " (" + std::to_string(size_)
                      + " elements)");
}

bool tensor::bitwise_equal(const tensor& other) const {
  return type_ == other.type_ && shape_ == other.shape_
         && (data_ == other.data_ || nbytes() == 0
             || std::memcmp(raw(), other.raw(), nbytes()) == 0);
}

tensor tensor::clone() const {
  return from_bytes(type_, shape_, raw(), nbytes());
}

std::string tensor::debug_string(int64_t max_elements) const {
  std::ostringstream os;
  os << to_string(type_) << to_string(shape_) << "{";
  for (int64_t i = 0; i < size_ && i < max_elements; ++i) {
    if (i > 0)
      os << ", ";
    os << as_double(i);
  }
  if (size_ > max_elements)
    os << ", ...";
  os << "}";
  return os.str();
}

} // namespace varsync
