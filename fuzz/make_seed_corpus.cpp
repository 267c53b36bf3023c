// Writes the seed corpora of the fuzz targets: fuzz_seed_corpus <dir>
// creates <dir>/<target>/<seed> for every target of fuzz/CMakeLists.txt (the
// committed fuzz/corpus/ was made with it). Each target gets a handful of
// small valid inputs and some invalid ones.
//
// The parse_enums and variable_spec targets read their input with
// FuzzedDataProvider, which takes integers from the END of the input and
// strings from the front; `fdp_input` lays seeds out accordingly.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>

#include "varsync/tensor.hpp"
#include "messages/replica_usage.hpp"
#include "messages/sequenced_operation.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/config.hpp"
#include "varsync/internal/step_report.hpp"
#include "varsync/step_task.hpp"
#include "varsync/internal/tensor_inspect.hpp"
#include "varsync/variable.hpp"
#include "api/ext/safetensors_format.hpp"

using namespace varsync;
namespace fs = std::filesystem;

namespace {

fs::path root;

void write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  auto dir = root / target;
  fs::create_directories(dir);
  std::ofstream out{dir / name, std::ios::binary};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + (dir / name).string());
}

/// Builds a FuzzedDataProvider input: `front` is read front to back
/// (strings), `back` holds the integers in the order they are consumed.
class fdp_input {
public:
  /// A ConsumeIntegral / ConsumeIntegralInRange of `nbytes` bytes whose
  /// result (before adding the range minimum) is `raw`.
  fdp_input& integer(uint64_t raw, int nbytes) {
    // The first byte consumed (the last of the input) is the most significant.
    for (int b = nbytes - 1; b >= 0; --b)
      consumed_.push_back(static_cast<char>((raw >> (8 * b)) & 0xff));
    return *this;
  }
  fdp_input& u8(uint8_t x) {
    return integer(x, 1);
  }
  fdp_input& i64(int64_t x) {
    // Full range: the result is min + raw.
    return integer(static_cast<uint64_t>(x) + (uint64_t{1} << 63), 8);
  }
  /// ConsumeRandomLengthString: backslash escapes, "\\" + other ends it.
  fdp_input& string(const std::string& s) {
    for (char c : s) {
      front_ += c;
      if (c == '\\')
        front_ += '\\';
    }
    front_ += "\\ ";
    return *this;
  }
  fdp_input& rest(const std::string& s) {
    front_ += s;
    return *this;
  }
  std::string bytes() const {
    return front_ + std::string(consumed_.rbegin(), consumed_.rend());
  }

private:
  std::string front_;
  std::vector<char> consumed_;
};

caf::actor_system_config& config() {
  static auto* cfg = [] {
    auto* c = new caf::actor_system_config;
    register_types(*c);
    return c;
  }();
  return *cfg;
}

template <class T>
std::string serialized(caf::actor_system& sys, uint8_t selector, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(x))
    throw std::runtime_error("cannot serialize: " + sys.render(err));
  return std::string(1, static_cast<char>(selector))
         + std::string(buf.begin(), buf.end());
}

void seeds_parse_enums() {
  const std::string t = "parse_enums";
  // Selector 0: synchronization, 1: aggregation, 2: reduce_op, 3: dtype.
  write(t, "sync_on_write", fdp_input{}.u8(0).i64(2).string("w").rest("on_write").bytes());
  write(t, "sync_upper", fdp_input{}.u8(0).i64(3).string("hits").rest("ON_READ").bytes());
  write(t, "sync_invalid", fdp_input{}.u8(0).i64(4).string("v").rest("sometimes").bytes());
  write(t, "agg_mean", fdp_input{}.u8(1).i64(2).string("w").rest("mean").bytes());
  write(t, "agg_only_first", fdp_input{}.u8(1).i64(3).string("b").rest("ONLY_FIRST_REPLICA").bytes());
  write(t, "agg_negative", fdp_input{}.u8(1).i64(-1).string("x").rest("sum ").bytes());
  write(t, "reduce_max", fdp_input{}.u8(2).i64(0).string("").rest("max").bytes());
  write(t, "reduce_invalid", fdp_input{}.u8(2).i64(0).string("").rest("average").bytes());
  write(t, "dtype_bf16", fdp_input{}.u8(3).i64(1).string("").rest("bf16").bytes());
  write(t, "dtype_double", fdp_input{}.u8(3).i64(200).string("").rest("double").bytes());
  write(t, "dtype_invalid", fdp_input{}.u8(3).i64(6).string("").rest("float8").bytes());
}

void seeds_parse_device() {
  const std::string t = "parse_device";
  write(t, "valid_cpu_0", "cpu:0");
  write(t, "valid_cpu_3", "cpu:3");
  write(t, "valid_cuda_1", "cuda:1");
  write(t, "valid_cuda_leading_zeros", "cuda:0007");
  write(t, "valid_cpu_9999", "cpu:9999");
  write(t, "invalid_no_index", "cpu:");
  write(t, "invalid_negative", "cpu:-1");
  write(t, "invalid_too_long", "cuda:12345");
  write(t, "invalid_kind", "gpu:0");
  write(t, "invalid_trailing", "cpu:1x");
  write(t, "invalid_empty", "");
}

void seeds_variable_spec() {
  const std::string t = "variable_spec";
  // Consumed in order: dtype, sync, agg, trainable (0 unset, 1 false,
  // 2 true), rank (0..6), extents (0..16), the scalar (a bool byte and 8
  // bytes: 1 + 0 gives 0.0), replicas - 1; the name is the rest.
  auto spec = [](uint8_t type, uint8_t sync, uint8_t agg, uint8_t trainable,
                 std::vector<uint8_t> shape, const std::string& name) {
    fdp_input in;
    in.u8(type).u8(sync).u8(agg).u8(trainable).u8(
      static_cast<uint8_t>(shape.size()));
    for (auto e : shape)
      in.u8(e);
    in.u8(1).integer(0, 8).u8(3);
    in.rest(name);
    return in.bytes();
  };
  write(t, "f32_on_write_mean", spec(2, 2, 2, 0, {2, 3}, "w"));
  write(t, "i64_on_read_sum", spec(5, 3, 1, 1, {}, "hits"));
  write(t, "f64_auto_none", spec(3, 0, 0, 0, {4}, "b"));
  write(t, "i32_none_none", spec(4, 1, 0, 2, {1}, "scratch"));
  write(t, "invalid_on_read_trainable", spec(2, 3, 1, 2, {}, "m"));
  write(t, "invalid_int_mean", spec(4, 2, 2, 0, {2}, "n"));
  write(t, "invalid_none_sum", spec(2, 1, 1, 0, {}, "s"));
  write(t, "invalid_sync_7", spec(2, 7, 0, 0, {}, "e"));
  write(t, "invalid_dtype_9", spec(9, 2, 0, 0, {3}, "d"));
  write(t, "invalid_empty_name", spec(2, 2, 0, 0, {}, ""));
}

void seeds_deserialize(caf::actor_system& sys) {
  const std::string t = "deserialize";
  // Selector 0: tensor, 1: variable_spec, 2: variable_info, 3: step_report,
  // 4: std::vector<tensor>, 5: std::vector<variable_info>,
  // 6: sequenced_operation, 7: strategy_metrics, 8: replica_usage.
  auto w = tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto hits = tensor::scalar<int64_t>(42);
  auto half = tensor::zeros(dtype::float16, {4});
  auto empty = tensor::zeros(dtype::int32, {0, 5});
  write(t, "tensor_f32_2x3", serialized(sys, 0, w));
  write(t, "tensor_i64_scalar", serialized(sys, 0, hits));
  write(t, "tensor_f16_4", serialized(sys, 0, half));
  write(t, "tensor_i32_0x5", serialized(sys, 0, empty));
  variable_spec spec{"w", w, synchronization::on_write, aggregation::mean, true};
  write(t, "spec_on_write_mean", serialized(sys, 1, spec));
  variable_spec bad{"hits", hits, synchronization::on_read, aggregation::mean,
                    std::nullopt};
  write(t, "spec_invalid_int_mean", serialized(sys, 1, bad));
  variable_info info{7, "w", dtype::float32, {2, 3}, synchronization::on_write,
                     aggregation::mean, true};
  write(t, "info_w", serialized(sys, 2, info));
  step_report report;
  report.updates.push_back({7, update_op::assign_sub, w});
  report.updates.push_back({8, update_op::assign_add, hits});
  report.updates.back().alike = true; // an update_mirrored
  write(t, "step_report_2_updates", serialized(sys, 3, report));
  step_report staged;
  staged.updates.push_back({7, update_op::assign_add, tensor{}, 3});
  staged.updates.push_back({8, update_op::assign, hits});
  write(t, "step_report_staged", serialized(sys, 3, staged));
  step_report sparse;
  recorded_update rows{7, update_op::assign, tensor::from_vector<float>(
                                               {2, 3}, {1, 2, 3, 4, 5, 6})};
  rows.scatter = true;
  rows.sop = scatter_op::sub;
  rows.indices = {0, 4};
  sparse.updates.push_back(rows);
  write(t, "step_report_scatter", serialized(sys, 3, sparse));
  step_report waiting;
  waiting.suspended = true;
  waiting.collective.kind = step_collective_kind::all_gather;
  waiting.collective.axis = -1;
  waiting.collective.values = {w, hits};
  write(t, "step_report_waiting", serialized(sys, 3, waiting));
  write(t, "vector_tensor", serialized(sys, 4, std::vector<tensor>{w, hits, half}));
  strategy_metrics metrics;
  metrics.steps = 3;
  metrics.collective_seconds = 0.25;
  metrics.replicas.push_back({0, "cpu:0", 3, 1, 0.1, 0, 2, 1, false, true});
  metrics.process_rounds.push_back({1, 2, 0.5, 1});
  variable_metrics vm;
  vm.id = 7;
  vm.name = "w";
  vm.sync = synchronization::on_read;
  vm.agg = aggregation::sum;
  vm.replica_updates = 6;
  metrics.variables.push_back(vm);
  write(t, "strategy_metrics", serialized(sys, 7, metrics));
  replica_usage usage{{7, 8}, {1, 2}, {3, 4}, 1, 0};
  write(t, "replica_usage", serialized(sys, 8, usage));
  write(t, "vector_info", serialized(sys, 5, std::vector<variable_info>{info, info}));
  auto update = make_sequenced(ops::update{7, update_op::assign_add, w});
  update.sequence = 12;
  update.origin = 1;
  update.ticket = 3;
  write(t, "sequenced_update", serialized(sys, 6, update));
  auto scatter = make_sequenced(ops::scatter{7, scatter_op::add, {{1, 0}, w}});
  write(t, "sequenced_scatter", serialized(sys, 6, scatter));
  auto create = make_sequenced(ops::create{spec});
  write(t, "sequenced_create", serialized(sys, 6, create));
  auto lookup = make_sequenced(ops::lookup{"hits"});
  write(t, "sequenced_lookup", serialized(sys, 6, lookup));
  write(t, "sequenced_barrier", serialized(sys, 6, make_sequenced(ops::barrier{})));
  // A scatter whose rows travel through the data plane (its description
  // only: defer_payload).
  auto deferred = make_sequenced(ops::scatter{7, scatter_op::update, {}});
  deferred.deferred.present = true;
  deferred.deferred.type = dtype::float64;
  deferred.deferred.shape = {1024, 8};
  deferred.deferred.indices = 1024;
  write(t, "sequenced_deferred", serialized(sys, 6, deferred));
  // Invalid: a wrong byte count, an invalid dtype, a negative extent, a
  // truncated message.
  auto s = serialized(sys, 0, w);
  auto wrong_count = s;
  wrong_count.pop_back();
  write(t, "invalid_tensor_truncated", wrong_count);
  auto bad_dtype = s;
  bad_dtype[1] = 9;
  write(t, "invalid_tensor_dtype_9", bad_dtype);
  auto neg = serialized(sys, 0, tensor::zeros(dtype::float32, {1}));
  // [selector][dtype][rank=1][int64 extent, big endian][len][bytes]
  for (int i = 3; i < 11; ++i)
    neg[static_cast<size_t>(i)] = static_cast<char>(0xff);
  write(t, "invalid_tensor_negative_extent", neg);
  // The byte block claims 2^32 - 1 bytes in a 9-byte message (the bounded
  // harness skips it; VARSYNC_FUZZ_UNBOUNDED=1 shows CAF's allocation).
  write(t, "invalid_tensor_huge_length_prefix",
        std::string{"\x00\x02\x00\xff\xff\xff\xff\x0f", 8});
  // Regression seeds of fixed findings (fuzz/findings/README.md): a float32
  // tensor of shape [2^32, 2^32] (the element count overflowed int64) and one
  // of shape [2^62] with no bytes (2^62 x 4 bytes wrapped to 0 and matched).
  // Reproducers of findings that are not fixed yet live in fuzz/findings/,
  // not here: a seed that crashes stops every run.
  write(t, "deserialize-tensor-element-count-overflow",
        std::string{"\x00\x02\x02\x00\x00\x00\x01\x00\x00\x00\x00"
                    "\x00\x00\x00\x01\x00\x00\x00\x00\x00",
                    20});
  write(t, "deserialize-tensor-byte-count-overflow",
        std::string{"\x00\x02\x01\x40\x00\x00\x00\x00\x00\x00\x00\x00", 12});
  // A metrics snapshot whose seconds unpack to infinity: CAF 0.17 cannot
  // serialize an infinity again (its IEEE 754 packing never ends), so the
  // load callbacks reject seconds that are not finite.
  strategy_metrics infinite;
  infinite.replicas.push_back({0, "cpu:0", 1, 1, 0.5, 0, 0, 0, false, false});
  auto inf_bytes = serialized(sys, 7, infinite);
  const std::string packed_half{"\x3f\xe0\x00\x00\x00\x00\x00\x00", 8};
  if (auto at = inf_bytes.find(packed_half); at != std::string::npos) {
    inf_bytes.replace(at, 8,
                      std::string{"\x7f\xf0\x00\x00\x00\x00\x00\x00", 8});
    write(t, "deserialize-metrics-infinite-seconds", inf_bytes);
  }
  // Enum fields out of range (V4): the inspect load callbacks must reject
  // them. Serializing checks nothing, so a cast gives the bytes; the first
  // value past the range and the largest byte.
  auto shifted = s;
  shifted[1] = 6; // the first dtype past int64
  write(t, "invalid_tensor_dtype_6", shifted);
  variable_spec first_bad_sync = spec;
  first_bad_sync.sync = static_cast<synchronization>(4);
  write(t, "invalid_spec_sync_4", serialized(sys, 1, first_bad_sync));
  variable_spec bad_agg = spec;
  bad_agg.agg = static_cast<aggregation>(0xff);
  write(t, "invalid_spec_agg_255", serialized(sys, 1, bad_agg));
  // trainable travels as an int8 (-1 unset, 0, 1), the last byte.
  auto bad_trainable = serialized(sys, 1, spec);
  bad_trainable.back() = 2;
  write(t, "invalid_spec_trainable_2", bad_trainable);
  variable_info edge{9, "hits", dtype::int64, {}, synchronization::on_read,
                     aggregation::only_first_replica, false};
  write(t, "info_enum_maxima", serialized(sys, 2, edge));
  auto info_with = [&](auto change) {
    auto x = info;
    change(x);
    return x;
  };
  write(t, "invalid_info_dtype_6",
        serialized(sys, 2, info_with([](variable_info& x) {
                     x.type = static_cast<dtype>(6);
                   })));
  write(t, "invalid_info_sync_255",
        serialized(sys, 2, info_with([](variable_info& x) {
                     x.sync = static_cast<synchronization>(0xff);
                   })));
  write(t, "invalid_info_agg_4",
        serialized(sys, 2, info_with([](variable_info& x) {
                     x.agg = static_cast<aggregation>(4);
                   })));
  write(t, "invalid_vector_info_second_sync_4",
        serialized(sys, 5,
                   std::vector<variable_info>{
                     info, info_with([](variable_info& x) {
                       x.sync = static_cast<synchronization>(4);
                     })}));
  step_report bad_op;
  bad_op.updates.push_back({7, update_op::assign, w});
  bad_op.updates.push_back({8, static_cast<update_op>(3), hits});
  write(t, "invalid_step_report_op_3", serialized(sys, 3, bad_op));
  step_report worst_op;
  worst_op.updates.push_back({8, static_cast<update_op>(0xff), hits});
  write(t, "invalid_step_report_op_255", serialized(sys, 3, worst_op));
  step_report staged_with_value;
  staged_with_value.updates.push_back({7, update_op::assign_add, w, 3});
  write(t, "invalid_step_report_staged_with_value",
        serialized(sys, 3, staged_with_value));
}

void seeds_safetensors() {
  const std::string t = "safetensors";
  using safetensors::named_tensor;
  auto put = [&](const std::string& name, std::vector<named_tensor> ts,
                 std::map<std::string, std::string> meta = {}) {
    auto bytes = safetensors::encode(ts, meta);
    if (!bytes)
      throw std::runtime_error("cannot encode seed " + name);
    write(t, name, *bytes);
    return *bytes;
  };
  put("valid_empty", {});
  auto one = put("valid_f32_2x3",
                 {{"w", tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}});
  put("valid_checkpoint",
      {{"w", tensor::from_vector<float>({2}, {0.5f, -1})},
       {"hits", tensor::scalar<int64_t>(80000)},
       {"scratch/replica_0", tensor::from_vector<int32_t>({1}, {3})},
       {"scratch/replica_1", tensor::from_vector<int32_t>({1}, {4})}},
      {{"format", "varsync-checkpoint"},
       {"format_version", "1"},
       {"replicas", "2"},
       {"w.synchronization", "on_write"},
       {"w.aggregation", "mean"}});
  put("valid_all_dtypes",
      {{"a", tensor::zeros(dtype::float16, {2})},
       {"b", tensor::zeros(dtype::bfloat16, {2})},
       {"c", tensor::scalar<double>(2.5)},
       {"d", tensor::zeros(dtype::int32, {0, 3})},
       {"e", tensor::from_list<int64_t>({1, -1})}});
  // Invalid files.
  write(t, "invalid_short", std::string{"\x08\x00\x00", 3});
  auto truncated = one;
  truncated.resize(truncated.size() - 4);
  write(t, "invalid_truncated_data", truncated);
  auto huge = one;
  huge[7] = 0x7f; // header length ~ 2^63
  write(t, "invalid_header_length", huge);
  auto header = [](const std::string& json, size_t data_bytes) {
    std::string out;
    uint64_t n = json.size();
    for (int b = 0; b < 8; ++b)
      out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    return out + json + std::string(data_bytes, '\0');
  };
  write(t, "invalid_overlap",
        header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               4));
  write(t, "invalid_shape_overflow",
        header(R"({"a":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
               0));
  write(t, "invalid_dtype",
        header(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2));
  write(t, "invalid_metadata",
        header(R"({"__metadata__":{"k":1}})", 0));
  write(t, "invalid_json", header(R"({"a":{"dtype":"F32","sha)", 0));
}

void seeds_config() {
  const std::string t = "config";
  // Byte 0: 0 a level name, 1 a config file, 2 command-line arguments.
  auto level = [](const std::string& s) { return std::string(1, '\0') + s; };
  auto file = [](const std::string& s) { return std::string(1, '\1') + s; };
  auto cli = [](const std::string& s) { return std::string(1, '\2') + s; };
  write(t, "level_debug", level("debug"));
  write(t, "level_warning", level("warning"));
  write(t, "level_invalid_upper", level("INFO"));
  write(t, "file_valid",
        file("[varsync]\ntimeout-ms=1500\nlog-level=\"info\"\n"));
  write(t, "file_unknown_level", file("[varsync]\nlog-level=\"loud\"\n"));
  write(t, "file_negative_timeout", file("[varsync]\ntimeout-ms=-1\n"));
  write(t, "file_huge_timeout",
        file("[varsync]\ntimeout-ms=9223372036854775807\n"));
  write(t, "file_wrong_type", file("[varsync]\ntimeout-ms=\"soon\"\n"));
  write(t, "file_other_sections",
        file("[scheduler]\nmax-threads=2\n[logger]\nverbosity='quiet'\n"));
  write(t, "cli_valid", cli("--varsync.timeout-ms=250\n--varsync.log-level=error"));
  write(t, "cli_zero_timeout", cli("--varsync.timeout-ms=0"));
  write(t, "cli_unknown_option", cli("--varsync.speed=3"));
  write(t, "file_memory_budget", file("[varsync]\nmemory-budget-mb=64\n"));
  write(t, "file_negative_memory_budget",
        file("[varsync]\nmemory-budget-mb=-1\n"));
  write(t, "cli_huge_memory_budget",
        cli("--varsync.memory-budget-mb=17592186044416"));
  write(t, "file_zero_memory_budget", file("[varsync]\nmemory-budget-mb=0\n"));
  write(t, "file_largest_memory_budget",
        file("[varsync]\nmemory-budget-mb=17592186044415\n"));
  write(t, "file_wrong_type_memory_budget",
        file("[varsync]\nmemory-budget-mb=\"lots\"\n"));
  // The overload bounds (V3): valid, zero (no unbounded queue), negative,
  // huge (the MiB would overflow in bytes) and of the wrong type.
  write(t, "file_overload_bounds",
        file("[varsync]\nmax-queued-operations=64\nmax-queued-mb=16\n"));
  write(t, "cli_overload_bounds",
        cli("--varsync.max-queued-operations=1\n--varsync.max-queued-mb=1"));
  write(t, "file_zero_max_queued_operations",
        file("[varsync]\nmax-queued-operations=0\n"));
  write(t, "cli_negative_max_queued_operations",
        cli("--varsync.max-queued-operations=-1"));
  write(t, "file_huge_max_queued_operations",
        file("[varsync]\nmax-queued-operations=9223372036854775807\n"));
  write(t, "file_wrong_type_max_queued_operations",
        file("[varsync]\nmax-queued-operations=true\n"));
  write(t, "cli_zero_max_queued_mb", cli("--varsync.max-queued-mb=0"));
  write(t, "file_negative_max_queued_mb",
        file("[varsync]\nmax-queued-mb=-16\n"));
  write(t, "file_largest_max_queued_mb",
        file("[varsync]\nmax-queued-mb=16777216\n"));
  write(t, "cli_huge_max_queued_mb", cli("--varsync.max-queued-mb=16777217"));
  write(t, "cli_wrong_type_max_queued_mb", cli("--varsync.max-queued-mb=1.5"));
  write(t, "file_all_entries",
        file("[varsync]\ntimeout-ms=100\nlog-level=\"warn\"\n"
             "memory-budget-mb=512\nmax-queued-operations=4096\n"
             "max-queued-mb=256\n"));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seed_corpus <corpus-dir>\n";
    return 2;
  }
  root = argv[1];
  try {
    caf::actor_system sys{config()};
    seeds_parse_enums();
    seeds_parse_device();
    seeds_variable_spec();
    seeds_deserialize(sys);
    seeds_safetensors();
    seeds_config();
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seed_corpus: " << e.what() << '\n';
    return 1;
  }
  std::cout << "fuzz_seed_corpus: wrote seeds under " << root << '\n';
  return 0;
}
