#pragma once
// varsync: variables replicated across devices and kept synchronized with
// TensorFlow's policies (ON_WRITE, ON_READ, NONE), on CAF actors.

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "devices/device_id.hpp"
#include "sync/synchronization.hpp"
#include "varsync/distributed_values.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/strategy.hpp"
#include "varsync/variable.hpp"
