#pragma once
// Large host buffers (256 KiB and up: tensors, host components, step
// contributions) are recycled within the process: a fresh large allocation
// costs a page fault per 4 KiB on first touch, so freed buffers are kept
// for the next allocation of a similar size, up to a limit. Beyond it freed
// buffers go back to the system. Process-wide; thread-safe.

#include <cstddef>

namespace varsync {

/// The most bytes of freed large buffers the process keeps for reuse
/// (default 1 GiB).
size_t host_buffer_cache_limit();

/// Sets the limit and returns the previous one. Lowering it frees the
/// cached buffers above the new limit at once and asks the C library to
/// return free memory to the system (malloc_trim); 0 disables the cache.
size_t set_host_buffer_cache_limit(size_t bytes);

/// Bytes of freed buffers the cache holds now (the memory budget counts
/// them as held by varsync: docs/memory.md).
size_t host_buffer_cache_bytes();

} // namespace varsync
