# The fence of varsync's layers, in one table that both the build
# (cmake/VarsyncLayers.cmake, VarsyncCuda.cmake, VarsyncGloo.cmake: each
# unit's include root) and the check (cmake/check_layers.cmake, CTest
# `layering`) read. Plain set() commands: it is included in script mode too.
#
# A unit is a folder (a few: a set of folders) compiled as one CMake
# target. Every folder of the product belongs to exactly one unit (a folder
# in no unit fails the check and is reachable from no include root). A unit
# may include its own headers and those of the units in
# VARSYNC_UNIT_USES_<unit>, nothing else (the list is closed: a header a
# used unit's header includes is in the list too):
#
#   host library varsync::varsync, by layer; within a layer the folders'
#   units form a chain:
#     core <- devices, messages
#          <- sync: sync_policy (the policy per mode, the step rule, the
#             advisor) <- sync (the rules of values: distributed reductions,
#             sparse rows); sync_transport (the
#             process group, its data and control planes); both <-
#             sync_collectives (the collective seam and its algorithms)
#          <- actors: actors (helpers) <- actors_replica <- actors_coordinator
#          <- api <- input (distributed input: samplers)
#   add-ons, written over the public headers only (the check refuses any
#   other include of theirs but their own folder's, which is all their
#   include root holds): advisor (sync/advisor: the synchronization
#   advisor, over a metrics snapshot) and addons (api/ext: checkpoints and
#   their file format, optimizers, the metrics endpoint, the service main);
#   a unit may use their public headers like any other's.
#   CUDA backend varsync::cuda:     cuda_devices (devices layer) <- cuda_sync (sync layer)
#                                   <- cuda_actors (actors layer)
#   varsync::distributed:           shm, gloo_sync (the data plane: over the
#                                   transport interface only) <- cluster (the
#                                   control plane, the joiner)
#
# A backend unit sits on the host layers at and below its own layer, never
# above it, and never sees another backend; the host library sees no backend.

set(VARSYNC_UNITS core devices messages advisor sync_policy sync sync_transport
    sync_collectives actors actors_replica actors_coordinator api input addons
    cuda_devices cuda_sync cuda_actors shm gloo_sync cluster)

set(VARSYNC_UNIT_FOLDERS_core core)
set(VARSYNC_UNIT_FOLDERS_devices devices)
set(VARSYNC_UNIT_FOLDERS_messages messages)
set(VARSYNC_UNIT_FOLDERS_sync_policy sync/policy)
set(VARSYNC_UNIT_FOLDERS_sync sync)
set(VARSYNC_UNIT_FOLDERS_sync_transport sync/transport)
set(VARSYNC_UNIT_FOLDERS_sync_collectives sync/collectives)
set(VARSYNC_UNIT_FOLDERS_actors actors)
set(VARSYNC_UNIT_FOLDERS_actors_replica actors/replica)
set(VARSYNC_UNIT_FOLDERS_actors_coordinator actors/coordinator)
set(VARSYNC_UNIT_FOLDERS_api api)
set(VARSYNC_UNIT_FOLDERS_input input)
set(VARSYNC_UNIT_FOLDERS_advisor sync/advisor)
set(VARSYNC_UNIT_FOLDERS_addons api/ext)
set(VARSYNC_UNIT_FOLDERS_cuda_devices devices/cuda)
set(VARSYNC_UNIT_FOLDERS_cuda_sync sync/nccl)
set(VARSYNC_UNIT_FOLDERS_cuda_actors actors/cuda)
set(VARSYNC_UNIT_FOLDERS_shm sync/shm)
set(VARSYNC_UNIT_FOLDERS_gloo_sync sync/gloo)
set(VARSYNC_UNIT_FOLDERS_cluster actors/cluster)

set(VARSYNC_UNIT_USES_core "")
set(VARSYNC_UNIT_USES_devices core)
set(VARSYNC_UNIT_USES_messages core)
set(VARSYNC_UNIT_USES_sync_policy core devices messages)
set(VARSYNC_UNIT_USES_sync core devices messages sync_policy)
set(VARSYNC_UNIT_USES_sync_transport core devices messages)
set(VARSYNC_UNIT_USES_sync_collectives core devices messages sync_policy sync
    sync_transport)
set(VARSYNC_SYNC_UNITS sync_policy sync sync_transport sync_collectives)
set(VARSYNC_UNIT_USES_actors core devices messages ${VARSYNC_SYNC_UNITS})
set(VARSYNC_UNIT_USES_actors_replica core devices messages
    ${VARSYNC_SYNC_UNITS} actors)
set(VARSYNC_UNIT_USES_actors_coordinator core devices messages
    ${VARSYNC_SYNC_UNITS} actors actors_replica)
set(VARSYNC_UNIT_USES_api core devices messages ${VARSYNC_SYNC_UNITS}
    actors actors_replica actors_coordinator advisor)
set(VARSYNC_UNIT_USES_input core devices messages ${VARSYNC_SYNC_UNITS}
    actors actors_replica actors_coordinator api advisor)
set(VARSYNC_UNIT_USES_advisor core)
set(VARSYNC_UNIT_USES_addons core devices messages ${VARSYNC_SYNC_UNITS}
    actors actors_replica actors_coordinator api input advisor)
# Units whose files include public headers only.
set(VARSYNC_PUBLIC_ONLY_UNITS advisor addons)
set(VARSYNC_UNIT_USES_cuda_devices core devices)
set(VARSYNC_UNIT_USES_cuda_sync core devices messages ${VARSYNC_SYNC_UNITS}
    cuda_devices)
set(VARSYNC_UNIT_USES_cuda_actors core devices messages ${VARSYNC_SYNC_UNITS}
    actors actors_replica cuda_devices cuda_sync)
set(VARSYNC_UNIT_USES_shm core devices messages sync_transport)
set(VARSYNC_UNIT_USES_gloo_sync core devices messages sync_transport)
set(VARSYNC_UNIT_USES_cluster core devices messages ${VARSYNC_SYNC_UNITS}
    actors shm gloo_sync)

# The unit that implements each public header (include/varsync/, keyed by
# its path there without .hpp: "strategy", "ext/optim", "internal/by_value";
# default: core). Public headers are on every unit's include path, so only
# the check fences them: a unit may include those of the units it uses.
# include/varsync/ holds the core a user needs, ext/ the add-ons (metrics,
# optimizers, the advisor, CUDA streams, input, services, testing) and
# internal/ what public headers must include but users must not use.
set(VARSYNC_PUBLIC_OWNER_actor_protocol messages)
set(VARSYNC_PUBLIC_OWNER_internal/step_report messages)
set(VARSYNC_PUBLIC_OWNER_config messages)
set(VARSYNC_PUBLIC_OWNER_replica_context actors_replica)
set(VARSYNC_PUBLIC_OWNER_ext/sync_advice advisor)
foreach(h strategy actor_api function_step ext/testing)
  set(VARSYNC_PUBLIC_OWNER_${h} api)
endforeach()
# The umbrella header includes the add-ons' headers too.
foreach(h varsync checkpoint ext/checkpoint_actor ext/optim ext/service_main
          ext/metrics_endpoint)
  set(VARSYNC_PUBLIC_OWNER_${h} addons)
endforeach()
foreach(h ext/sampler ext/input_batches ext/sampler_checkpoint)
  set(VARSYNC_PUBLIC_OWNER_${h} input)
endforeach()
# Header-only for users of varsync::cuda: the replica's stream
# (replica_context, actors layer), cuda_gpu_count() (devices/cuda).
set(VARSYNC_PUBLIC_OWNER_ext/cuda_stream cuda_actors)

# The top-level folders of the product (what the check walks).
set(VARSYNC_PRODUCT_ROOTS core devices messages sync actors api input)
