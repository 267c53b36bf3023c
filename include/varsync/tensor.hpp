#pragma once
// Host tensors: a dtype, a shape and a reference-counted, 64-byte aligned
// buffer. Copies share the buffer; writers copy first (copy-on-write), so a
// tensor can travel inside in-process messages without copying its data.

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/dtype.hpp"

namespace varsync {

using tensor_shape = std::vector<int64_t>;

/// Number of elements of `s` (1 for a scalar), or -1 for a negative extent
/// or a product that does not fit int64.
int64_t element_count(const tensor_shape& s);

/// "[2, 3]" and "[]" for scalars.
std::string to_string(const tensor_shape& s);

/// Read-only view of elements owned elsewhere (a replica's component).
struct tensor_view {
  dtype type = dtype::float32;
  const tensor_shape* shape = nullptr;
  const void* data = nullptr;
  int64_t size = 0;

  template <class T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
  size_t nbytes() const { return static_cast<size_t>(size) * size_of(type); }
};

class tensor {
public:
  /// An empty float32 tensor of shape [0].
  tensor();

  /// Uninitialized storage for `shape` elements of `type`.
  static tensor empty(dtype type, tensor_shape shape);
  static tensor zeros(dtype type, tensor_shape shape);
  /// A tensor of `type` and `shape` filled with `value` converted to `type`.
  static tensor filled(dtype type, tensor_shape shape, double value);
  /// A tensor of a floating `type` from float values, each rounded to the
  /// dtype once (to nearest even; exact for float32 and float64): how to
  /// write float16 and bfloat16 values. `to_vector<float>()` reads them
  /// back.
  /// Throws std::invalid_argument, as from_vector does, for an integer
  /// dtype or a value count that does not match the shape.
  static tensor from_floats(dtype type, tensor_shape shape,
                            const std::vector<float>& values);
  /// Copies `nbytes` raw bytes; the caller guarantees they fit the shape.
  static tensor from_bytes(dtype type, tensor_shape shape, const void* bytes,
                           size_t nbytes);

  template <class T>
  static tensor scalar(T value) {
    auto t = empty(dtype_of_v<T>, {});
    *t.template mutable_data<T>() = value;
    return t;
  }

  template <class T>
  static tensor from_vector(tensor_shape shape, const std::vector<T>& values) {
    auto t = empty(dtype_of_v<T>, std::move(shape));
    if (static_cast<size_t>(t.size()) != values.size())
      throw std::invalid_argument("tensor::from_vector: value count does not "
                                  "match the shape");
    std::copy(values.begin(), values.end(), t.template mutable_data<T>());
    return t;
  }

  template <class T>
  static tensor from_list(std::initializer_list<T> values) {
    return from_vector<T>({static_cast<int64_t>(values.size())},
                          std::vector<T>(values));
  }

  dtype type() const { return type_; }
  const tensor_shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return size_; }
  size_t nbytes() const { return static_cast<size_t>(size_) * size_of(type_); }

  const void* raw() const { return data_.get(); }
  /// Writable bytes; copies the buffer first if another tensor shares it.
  void* mutable_raw();

  /// Unchecked fast path: the caller guarantees that T matches type().
  /// span<T>() and item<T>() check it.
  template <class T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }
  /// Unchecked, like data<T>(); copies a shared buffer first.
  template <class T>
  T* mutable_data() {
    return static_cast<T*>(mutable_raw());
  }

  /// The elements as T, or dtype_mismatch if T is not this tensor's dtype.
  template <class T>
  caf::expected<std::span<const T>> span() const {
    if (auto err = check_dtype(dtype_of_v<T>, "span"))
      return err;
    return std::span<const T>{data<T>(), static_cast<size_t>(size_)};
  }

  /// Writable elements as T (copies a shared buffer first), or
  /// dtype_mismatch. Only this tensor sees the writes.
  template <class T>
  caf::expected<std::span<T>> mutable_span() {
    if (auto err = check_dtype(dtype_of_v<T>, "mutable_span"))
      return err;
    return std::span<T>{mutable_data<T>(), static_cast<size_t>(size_)};
  }

  /// The single element of a one-element tensor (any rank), exactly as
  /// stored: dtype_mismatch if T is not the dtype (no conversion),
  /// shape_mismatch if the tensor does not hold exactly one element.
  template <class T>
  caf::expected<T> item() const {
    if (auto err = check_dtype(dtype_of_v<T>, "item"))
      return err;
    if (auto err = check_single("item"))
      return err;
    return *data<T>();
  }

  /// Element `i` converted to double (any dtype).
  double as_double(int64_t i = 0) const;

  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<size_t>(size_));
    for (int64_t i = 0; i < size_; ++i) {
      if (dtype_of_v<T> == type_)
        out[static_cast<size_t>(i)] = data<T>()[i];
      else
        out[static_cast<size_t>(i)] = static_cast<T>(as_double(i));
    }
    return out;
  }

  /// Same dtype, shape and bytes.
  bool bitwise_equal(const tensor& other) const;

  /// A deep copy that shares nothing with this tensor.
  tensor clone() const;

  tensor_view view() const { return {type_, &shape_, raw(), size_}; }

  /// True if both share one buffer (used to test zero-copy paths).
  bool shares_buffer_with(const tensor& other) const {
    return data_ == other.data_;
  }

  std::string debug_string(int64_t max_elements = 8) const;

private:
  tensor(dtype type, tensor_shape shape, int64_t size,
         std::shared_ptr<void> data);

  /// dtype_mismatch naming `what`, `expected` and the actual dtype.
  caf::error check_dtype(dtype expected, const char* what) const;
  /// shape_mismatch unless the tensor holds exactly one element.
  caf::error check_single(const char* what) const;

  dtype type_;
  tensor_shape shape_;
  int64_t size_;
  std::shared_ptr<void> data_;
};

/// The single element of `x` as T: exact for T's own dtype, converted from
/// any other dtype only when the value survives the conversion unchanged
/// (dtype_mismatch otherwise, e.g. 2.5 as int32 or 2^40 as int32);
/// shape_mismatch unless `x` holds exactly one element. Errors start with
/// `what`. Defined for float, double, int32_t and int64_t.
template <class T>
caf::expected<T> scalar_as(const tensor& x, const std::string& what);

extern template caf::expected<float> scalar_as<float>(const tensor&,
                                                      const std::string&);
extern template caf::expected<double> scalar_as<double>(const tensor&,
                                                        const std::string&);
extern template caf::expected<int32_t> scalar_as<int32_t>(const tensor&,
                                                          const std::string&);
extern template caf::expected<int64_t> scalar_as<int64_t>(const tensor&,
                                                          const std::string&);

/// Writes `value`, converted to `type`, to element `i` of `dst`.
void store_double(dtype type, void* dst, int64_t i, double value);
/// Reads element `i` of `src` as a double.
double load_double(dtype type, const void* src, int64_t i);

} // namespace varsync
