// Memory references for row 4 (Google Benchmark), measured in the same run as
// the bulk figures.
//
// copy bandwidth: memcpy of a 256 MiB buffer into another, prefaulted
//   256 MiB buffer. The figure counts BYTES COPIED per second: one memcpy of
//   S bytes in t seconds is S / t (the memory traffic is twice that: S bytes
//   read plus S bytes written). "copy/threads:1": one thread copies all
//   256 MiB; "copy/threads:2": two threads copy one 128 MiB half each at the
//   same time, and the figure is the 256 MiB over the wall time of one
//   iteration (both halves copied).
//
// ideal one-pass kernel: what the host all-reduce of an ON_WRITE SUM
//   assign_add does at its core, written plainly: for every element i,
//   c = comp[0][i] + sum_r grad[r][i]; comp[r][i] = c for every r. Two
//   threads split the elements (as the 2 scheduler threads could). No actors,
//   no messages: the best a simple kernel reaches on this machine.
//
// Records (JSON lines, see common.hpp): copy.t1 / copy.t2 (bytes copied per
// second) and kernel.onepass.rN.sS (seconds per all-reduce), both from the
// wall time of one iteration. Google Benchmark's own console table shows, for
// threads:2, the wall time divided by 2 (its per-thread convention).
//
//   copy_bandwidth [--quick] [--json FILE] [Google Benchmark flags]

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/common.hpp"
#include "bench/plain_kernels.hpp"

namespace {

constexpr size_t copy_bytes = size_t{256} << 20;

struct free_deleter {
  void operator()(void* p) const { std::free(p); }
};
using buffer = std::unique_ptr<char, free_deleter>;

buffer make_buffer(size_t bytes, int fill) {
  buffer b{static_cast<char*>(std::aligned_alloc(64, bytes))};
  std::memset(b.get(), fill, bytes); // prefault
  return b;
}

char* copy_src() {
  static buffer b = make_buffer(copy_bytes, 1);
  return b.get();
}

char* copy_dst() {
  static buffer b = make_buffer(copy_bytes, 2);
  return b.get();
}

void copy(benchmark::State& state) {
  auto threads = static_cast<size_t>(state.threads());
  auto part = copy_bytes / threads;
  auto offset = part * static_cast<size_t>(state.thread_index());
  char* src = copy_src() + offset;
  char* dst = copy_dst() + offset;
  for (auto _ : state) {
    std::memcpy(dst, src, part);
    benchmark::ClobberMemory();
  }
}

struct onepass_buffers {
  std::vector<buffer> grads;
  std::vector<buffer> comps;
};

onepass_buffers& onepass_for(int replicas, size_t bytes) {
  static std::vector<std::unique_ptr<onepass_buffers>> all;
  static std::vector<std::pair<int, size_t>> keys;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == std::make_pair(replicas, bytes))
      return *all[i];
  auto b = std::make_unique<onepass_buffers>();
  for (int r = 0; r < replicas; ++r) {
    b->grads.push_back(make_buffer(bytes, 0));
    b->comps.push_back(make_buffer(bytes, 0));
  }
  keys.emplace_back(replicas, bytes);
  all.push_back(std::move(b));
  return *all.back();
}

void onepass(benchmark::State& state) {
  auto replicas = static_cast<int>(state.range(0));
  auto bytes = static_cast<size_t>(state.range(1));
  static std::vector<float*> comps;
  static std::vector<const float*> grads;
  if (state.thread_index() == 0) {
    auto& b = onepass_for(replicas, bytes);
    comps.clear();
    grads.clear();
    for (int r = 0; r < replicas; ++r) {
      comps.push_back(reinterpret_cast<float*>(b.comps[r].get()));
      grads.push_back(reinterpret_cast<const float*>(b.grads[r].get()));
    }
  }
  // Google Benchmark starts the timed loop of all threads together, after
  // thread 0's setup above.
  auto count = bytes / sizeof(float);
  auto threads = static_cast<size_t>(state.threads());
  for (auto _ : state) {
    auto t = static_cast<size_t>(state.thread_index());
    size_t lo = count * t / threads;
    size_t hi = count * (t + 1) / threads;
    if (replicas == 2)
      bench::onepass2(comps[0], comps[1], grads[0], grads[1], lo, hi);
    else if (replicas == 4)
      bench::onepass4(comps[0], comps[1], comps[2], comps[3], grads[0], grads[1],
               grads[2], grads[3], lo, hi);
    benchmark::ClobberMemory();
  }
}

// Captures the median aggregates into JSON-lines records, and prints the
// usual console table.
class recording_reporter : public benchmark::ConsoleReporter {
public:
  explicit recording_reporter(bench::recorder& rec) : rec_(rec) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (auto& run : runs) {
      if (run.run_type != Run::RT_Aggregate || run.aggregate_name != "median")
        continue;
      auto name = run.run_name.function_name;
      // The wall time of one iteration, in which all threads together copy
      // (or reduce) the whole buffer. Google Benchmark 1.7 reports real time
      // per iteration PER THREAD: the threads' mean real time divided by
      // the iterations of all threads together, i.e. the wall time divided
      // by the thread count. Multiplying back gives the wall time (checked
      // against a plain two-thread memcpy timed with steady_clock: 256 MiB
      // in 28.9 ms, reported as 14.5 ms).
      double secs = run.GetAdjustedRealTime()
                    / benchmark::GetTimeUnitMultiplier(run.time_unit)
                    * static_cast<double>(run.threads);
      if (name == "copy") {
        double bps = static_cast<double>(copy_bytes) / secs;
        rec_.record("copy.t" + std::to_string(run.threads), bps, "B/s",
                    {{"bytes", static_cast<double>(copy_bytes)},
                     {"threads", static_cast<double>(run.threads)},
                     {"seconds", secs}},
                    {{"counts", "bytes copied per second"}});
      } else if (name == "onepass") {
        // args "2/67108864"
        auto args = run.run_name.args;
        auto slash = args.find('/');
        auto replicas = args.substr(0, slash);
        auto bytes = args.substr(slash + 1);
        rec_.record("kernel.onepass.r" + replicas + ".s" + bytes, secs, "s",
                    {{"bytes", std::stod(bytes)},
                     {"replicas", std::stod(replicas)},
                     {"bytes_per_second", std::stod(bytes) / secs},
                     {"threads", static_cast<double>(run.threads)}});
      }
    }
  }

private:
  bench::recorder& rec_;
};

} // namespace

int main(int argc, char** argv) {
  // Our flags first; the rest goes to Google Benchmark.
  auto opt = bench::parse_options(argc, argv);
  double min_time = opt.quick ? 0.2 : 0.5;
  int reps = opt.quick ? 3 : 5;
  benchmark::RegisterBenchmark("copy", copy)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime()
    ->MinTime(min_time)
    ->Repetitions(reps)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("onepass", onepass)
    ->Args({2, int64_t{64} << 20})
    ->Args({4, int64_t{64} << 20})
    ->Threads(2)
    ->UseRealTime()
    ->MinTime(min_time)
    ->Repetitions(reps)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);
  std::vector<char*> gb_args{argv[0]};
  for (auto& a : opt.rest)
    gb_args.push_back(a.data());
  int gb_argc = static_cast<int>(gb_args.size());
  benchmark::Initialize(&gb_argc, gb_args.data());
  bench::recorder rec{opt.json};
  recording_reporter reporter{rec};
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
