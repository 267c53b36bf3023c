#pragma once
// Serialization of tensors for replicas in other processes: dtype, shape and
// the raw bytes as one block (CAF serializes std::vector<char> with a single
// raw copy; element-wise serialization was ~100x slower). In-process messages
// never serialize: they share the tensor's reference-counted buffer.

#include <cstdint>
#include <type_traits>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/sec.hpp>

#include "varsync/tensor.hpp"

namespace varsync {

template <class Inspector>
typename std::enable_if<Inspector::reads_state,
                        typename Inspector::result_type>::type
inspect(Inspector& f, tensor& x) {
  auto type = static_cast<uint8_t>(x.type());
  auto shape = x.shape();
  auto first = static_cast<const char*>(x.raw());
  std::vector<char> bytes(first, first + x.nbytes());
  return f(caf::meta::type_name("varsync::tensor"), type, shape, bytes);
}

template <class Inspector>
typename std::enable_if<Inspector::writes_state,
                        typename Inspector::result_type>::type
inspect(Inspector& f, tensor& x) {
  uint8_t type = 0;
  tensor_shape shape;
  std::vector<char> bytes;
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (type > static_cast<uint8_t>(dtype::int64))
      return caf::sec::invalid_argument;
    auto n = element_count(shape);
    auto width = size_of(static_cast<dtype>(type));
    // Compared by division: n * width could wrap (a fuzz finding).
    if (n < 0 || bytes.size() % width != 0
        || static_cast<size_t>(n) != bytes.size() / width)
      return caf::sec::invalid_argument;
    x = tensor::from_bytes(static_cast<dtype>(type), shape, bytes.data(),
                           bytes.size());
    return caf::none;
  });
  return f(caf::meta::type_name("varsync::tensor"), type, shape, bytes, load);
}

} // namespace varsync
