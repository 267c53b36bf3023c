#pragma once
// varsync: variables replicated across devices and kept synchronized with
// TensorFlow's policies (ON_WRITE, ON_READ, NONE), on CAF actors.

#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "varsync/ext/host_buffer_cache.hpp"
#include "varsync/device_id.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/variable.hpp"
#include "varsync/distributed_values.hpp"
#include "varsync/replica_context.hpp"
#include "varsync/step_task.hpp"
#include "varsync/ext/optim.hpp"
#include "varsync/strategy.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/ext/metrics_endpoint.hpp"
#include "varsync/ext/sync_advice.hpp"
