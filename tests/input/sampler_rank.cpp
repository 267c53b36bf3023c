// One process of the distributed-input test across processes
// (sampler_processes.sh starts it alone and under varsync-run): REPLICAS
// host replicas in all, spread evenly over the processes, share 103 items
// (global batch 2 per replica, shuffled, uneven last batches).
//
//   sampler_rank run PATH REPLICAS     epochs 0 and 1; after step 5 of
//                                      epoch 1 the position is saved to PATH
//   sampler_rank resume PATH REPLICAS  restores PATH, finishes its epoch
//
// Prints "item EPOCH STEP REPLICA ITEM" for every item of this process's
// replicas. Every process records the position after each epoch: a cross-
// replica assign that fails unless the processes' samplers agree (P6).
// Exit: 0 done, 1 an error (printed), 2 bad usage.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "varsync/checkpoint.hpp"
#include "varsync/cluster_spec.hpp"
#include "varsync/ext/sampler.hpp"
#include "varsync/ext/sampler_checkpoint.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using namespace varsync::input;

namespace {

int rank_ = 0;

template <class T>
T must(caf::expected<T> x, const char* what) {
  if (!x) {
    std::printf("process %d FAILED %s: %s\n", rank_, what, describe(x.error()).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  return std::move(*x);
}

void must(const caf::error& err, const char* what) {
  if (err) {
    std::printf("process %d FAILED %s: %s\n", rank_, what, describe(err).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
}

strategy make_strategy(int replicas) {
  strategy_options o;
  o.timeout = std::chrono::seconds(20);
  o.scheduler_threads = 2;
  int local = replicas;
  if (auto cluster = must(cluster_from_environment(), "read the cluster");
      cluster && cluster->world_size > 1) {
    rank_ = cluster->rank;
    local = replicas / cluster->world_size;
    o.cluster = *cluster;
  }
  o.devices.clear();
  for (int i = 0; i < local; ++i)
    o.devices.push_back("cpu:" + std::to_string(i));
  return must(strategy::create(o), "create the strategy");
}

/// The rest of the epoch; with stop_after >= 0, saves the position to
/// `path` after that many steps of it and goes on.
void run_epoch(const strategy& s, distributed_sampler& sampler, const variable& pos,
               int64_t stop_after, const std::string& path) {
  while (!sampler.epoch_done()) {
    auto step = must(sampler.next(), "next");
    for (int r = s.first_local_replica();
         r < s.first_local_replica() + s.num_local_replicas(); ++r)
      for (auto item : step.items[static_cast<size_t>(r)])
        std::printf("item %lld %lld %d %lld\n", (long long)step.epoch,
                    (long long)step.step, r, (long long)item);
    if (step.step + 1 == stop_after) {
      must(record_position(s, pos, sampler), "record the position");
      must(save(s, path), "save");
    }
  }
  must(record_position(s, pos, sampler), "record the position");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::string{argv[1]} != "run" && std::string{argv[1]} != "resume")) {
    std::fprintf(stderr, "usage: sampler_rank run|resume PATH REPLICAS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const int replicas = std::atoi(argv[3]);
  auto s = make_strategy(replicas);
  auto sampler = must(distributed_sampler::create(
                        {.num_items = 103, .global_batch_size = 2 * replicas,
                         .seed = 11, .end = uneven_end::partial},
                        s.num_replicas()),
                      "create the sampler");
  auto pos = must(create_position_variable(s, sampler, "data/position"),
                  "create the position variable");
  if (mode == "run") {
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      must(sampler.begin_epoch(epoch), "begin_epoch");
      run_epoch(s, sampler, pos, epoch == 1 ? 5 : -1, path);
    }
  } else {
    must(restore(s, path), "restore");
    must(restore_position(s, pos, sampler), "restore the position");
    std::printf("resumed epoch %lld at item %lld of its order, step %lld\n",
                (long long)sampler.position().epoch,
                (long long)sampler.position().offset,
                (long long)sampler.position().step);
    run_epoch(s, sampler, pos, -1, path);
  }
  std::fflush(stdout);
  s.shutdown();
  return 0;
}
