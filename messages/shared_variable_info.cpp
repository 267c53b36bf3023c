#include "messages/shared_variable_info.hpp"

#include <memory_resource>

#include "core/small_object_pool.hpp"

namespace varsync {

namespace {

// Never destroyed: a description may outlive every strategy (a handle
// kept by the user until exit).
synchronized_small_object_pool& descriptions() {
  static auto* pool = new synchronized_small_object_pool;
  return *pool;
}

} // namespace

shared_variable_info make_shared_variable_info(variable_info info) {
  return std::allocate_shared<const variable_info>(
    std::pmr::polymorphic_allocator<variable_info>{&descriptions()},
    std::move(info));
}

} // namespace varsync
