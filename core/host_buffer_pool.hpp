#pragma once
// Internal: the recycled large host buffers behind allocate_host_bytes
// (core/tensor.cpp). Freed buffers stay cached for reuse, so they are memory
// the library holds: the memory budget counts them and, when a request does
// not fit, hands them back to the system first.

#include <cstddef>

namespace varsync {

/// Bytes of freed buffers the pool keeps for reuse.
size_t host_buffer_pool_cached_bytes();

/// Frees every cached buffer; returns the bytes freed.
size_t trim_host_buffer_pool();

} // namespace varsync
