// Reliability: every invalid call fails with its exact error code and changes
// nothing (docs/semantics.md, "Errors" and V2), plus the documented handling of
// edge-case inputs that are *valid* (zero-element tensors, NaN, infinities).
//
// The matrix below is table driven: each row is {name, expected code, call}.
// Every row runs against one strategy of 3 host replicas that holds variables
// of every synchronization (on_write, on_read, none, auto), several
// aggregations and dtypes, a zero-element variable and a variable holding NaN
// and infinities; for each row the test checks the exact code and that no
// component of any variable changed (a bitwise snapshot before and after).
//
// Decisions made explicit here:
// - A zero-element tensor (shape [0], [2, 0]) is a valid variable value: the
//   library accepts it for every synchronization and every operation is a
//   no-op on its (empty) data. Values must still match the shape exactly.
// - A negative extent cannot be expressed: tensor::empty / zeros / filled /
//   from_vector throw std::invalid_argument before any varsync call is made.
// - NaN and +-inf are ordinary float values: assigning them stores their bits
//   unchanged; aggregation none compares contributions bitwise, so equal NaN
//   bits are "equal" (the update applies) and NaN payloads, signs or +0 / -0
//   that differ bitwise fail with aggregation_required. A scalar NaN or inf
//   given to an integer variable is invalid_argument.
// - out_of_memory: every request sized by the caller is checked against the
//   memory budget before anything is allocated (docs/memory.md). The matrix's
//   strategy has an explicit budget of 192 MiB, so that its rows (a variable,
//   outputs of all_reduce, gather and reduce, a restore from a sparse file of
//   8 TiB) run on every machine without allocating what they ask for.

#include "../semantics/fixture.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <future>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <caf/sec.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "varsync/checkpoint.hpp"
#include "varsync/ext/testing.hpp"
#ifdef VARSYNC_HAVE_CUDA
#include "devices/cuda/cuda_device.hpp"
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define VS_REL_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)      \
    || __has_feature(memory_sanitizer)
#    define VS_REL_SANITIZED 1
#  endif
#endif
#ifndef VS_REL_SANITIZED
#  define VS_REL_SANITIZED 0
#endif

using namespace vs_test;
namespace fs = std::filesystem;

namespace {

constexpr int N = 3; // replicas of the strategy under test

// -- helpers ------------------------------------------------------------------

float float_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

const float qnan = float_bits(0x7fc00000u);      // the default quiet NaN
const float qnan_payload = float_bits(0x7fc00123u); // a NaN with a payload
const float neg_qnan = float_bits(0xffc00000u);  // quiet NaN, sign bit set
const float pos_inf = std::numeric_limits<float>::infinity();

tensor f32(tensor_shape shape, std::vector<float> xs) {
  return tensor::from_vector<float>(std::move(shape), xs);
}

// A fresh directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::random_device rd;
    path = fs::temp_directory_path()
           / ("varsync-reliability-" + std::to_string(::getpid()) + "-"
              + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string file(const std::string& name) const {
    return (path / name).string();
  }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    FAIL("cannot write " << path);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A safetensors file: 8-byte little-endian header length, header, data.
std::string safetensors_bytes(const std::string& header,
                              const std::string& data,
                              uint64_t claimed_header_length = UINT64_MAX) {
  uint64_t n = claimed_header_length == UINT64_MAX ? header.size()
                                                   : claimed_header_length;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xffu);
  return out + header + data;
}

// Runs `fn(ctx)` on every replica and returns the error of the step, or else
// the first error that a replica's call returned (replica-context calls that
// fail before anything is recorded do not fail the step itself). Only for
// steps that finish in time: `errors` lives on this stack frame.
template <class F>
caf::error step_error(const strategy& s, F fn) {
  std::vector<caf::error> errors(static_cast<size_t>(s.num_replicas()));
  auto err = s.run([&](replica_context& ctx) {
    errors[static_cast<size_t>(ctx.replica_id())] = fn(ctx);
  });
  if (err)
    return err;
  for (auto& e : errors)
    if (e)
      return e;
  return {};
}

strategy_options options_for(std::vector<std::string> devices) {
  strategy_options opts;
  opts.devices = std::move(devices);
  opts.timeout = std::chrono::seconds(10);
  opts.scheduler_threads = 1;
  return opts;
}

caf::error create_error(std::vector<std::string> devices,
                        std::chrono::milliseconds timeout = 10s) {
  auto opts = options_for(std::move(devices));
  opts.timeout = timeout;
  auto s = strategy::create(opts);
  if (s) {
    s->shutdown();
    return {};
  }
  return s.error();
}

// Why a cuda:K row expecting device_error cannot run here: this build has
// the CUDA backend and the machine has at least `gpus` GPUs, so cuda:(gpus-1)
// opens (empty: it does not, the row runs).
std::string gpu_present_skip(int gpus) {
#ifdef VARSYNC_HAVE_CUDA
  int count = varsync::cuda_device_count();
  if (count >= gpus)
    return "this machine has " + std::to_string(count)
           + " GPU(s) and the CUDA backend: cuda:" + std::to_string(gpus - 1)
           + " opens";
#else
  (void) gpus;
#endif
  return {};
}

// -- the matrix ----------------------------------------------------------------

struct row {
  std::string name;
  errc expected;
  std::function<caf::error()> call;
  /// Text the error message must contain (the variable or value it names).
  std::string mentions = {};
  /// Non-empty: the row cannot run here, for this reason.
  std::function<std::string()> skip = {};
};

struct world {
  explicit world(strategy st) : s(std::move(st)) {}
  strategy s;
  // on_write
  variable w_f32_sum, w_f32_none, w_i64_ofr, w_i32_sum, auto_f32, w_f64_mean;
  // on_read
  variable r_i64_sum, r_f64_mean, r_f32_none, r_i32_ofr;
  // none
  variable n_f64, n_i32_vec;
  // edge cases
  variable empty_f32, empty_i64_2x0, nan_f32;
  // a destroyed variable's handle
  variable gone;
};

// The memory budget of the matrix's strategy.
constexpr uint64_t matrix_budget = uint64_t{192} << 20;

world make_world() {
  // fail_step: the rows with throwing steps must leave the strategy usable
  // for the rows after them (fail-stop is tested in replica_failure_test).
  strategy_options options;
  options.devices = test_devices(N);
  options.timeout = 20s;
  options.scheduler_threads = 2;
  options.step_exception = on_step_exception::fail_step;
  options.memory_budget_bytes = matrix_budget;
  auto created = strategy::create(options);
  if (!created)
    FAIL("strategy::create failed: " << describe(created.error()));
  world w{std::move(*created)};
  auto& s = w.s;
  w.w_f32_sum = make_var(s, "w_f32_sum", f32({2}, {1.5f, -2.0f}),
                         synchronization::on_write, aggregation::sum);
  w.w_f32_none = make_var(s, "w_f32_none", tensor::scalar<float>(0.25f),
                          synchronization::on_write, aggregation::none);
  w.w_i64_ofr = make_var(s, "w_i64_ofr", tensor::scalar<int64_t>(7),
                         synchronization::on_write,
                         aggregation::only_first_replica);
  w.w_i32_sum = make_var(s, "w_i32_sum",
                         tensor::from_vector<int32_t>({3}, {1, 2, 3}),
                         synchronization::on_write, aggregation::sum);
  w.auto_f32 = make_var(s, "auto_f32", tensor::scalar<float>(3.0f),
                        synchronization::auto_, aggregation::none);
  w.w_f64_mean = make_var(s, "w_f64_mean",
                          tensor::from_vector<double>({2, 2}, {1, 2, 3, 4}),
                          synchronization::on_write, aggregation::mean);
  w.r_i64_sum = make_var(s, "r_i64_sum", tensor::scalar<int64_t>(5),
                         synchronization::on_read, aggregation::sum);
  w.r_f64_mean = make_var(s, "r_f64_mean",
                          tensor::from_vector<double>({2}, {0.5, 1.5}),
                          synchronization::on_read, aggregation::mean);
  w.r_f32_none = make_var(s, "r_f32_none", tensor::scalar<float>(1.0f),
                          synchronization::on_read, aggregation::none);
  w.r_i32_ofr = make_var(s, "r_i32_ofr", tensor::scalar<int32_t>(9),
                         synchronization::on_read,
                         aggregation::only_first_replica);
  w.n_f64 = make_var(s, "n_f64", tensor::scalar<double>(2.0),
                     synchronization::none, aggregation::none);
  w.n_i32_vec = make_var(s, "n_i32_vec",
                         tensor::from_vector<int32_t>({2}, {4, 5}),
                         synchronization::none, aggregation::none);
  w.empty_f32 = make_var(s, "empty_f32", tensor::zeros(dtype::float32, {0}),
                         synchronization::on_write, aggregation::sum);
  w.empty_i64_2x0 = make_var(s, "empty_i64_2x0",
                             tensor::zeros(dtype::int64, {2, 0}),
                             synchronization::on_read, aggregation::sum);
  w.nan_f32 = make_var(s, "nan_f32", f32({3}, {qnan, pos_inf, -pos_inf}),
                       synchronization::on_write, aggregation::none);
  w.gone = make_var(s, "gone", tensor::scalar<float>(0.0f),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.destroy(w.gone));
  // Make the per-replica components differ, so that any write that reaches
  // only some of them (or restores the wrong ones) shows in the snapshot.
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto r = ctx.replica_id();
    VS_STEP_OK(ctx.assign(w.r_i64_sum, 10.0 * (r + 1)));
    VS_STEP_OK(ctx.assign(
      w.r_f64_mean, tensor::from_vector<double>({2}, {r + 0.25, -r - 0.5})));
    VS_STEP_OK(ctx.assign(w.r_f32_none, 100.0 + r));
    VS_STEP_OK(ctx.assign(w.r_i32_ofr, 20.0 + r));
    VS_STEP_OK(ctx.assign(w.n_f64, -1.0 * r));
    VS_STEP_OK(ctx.assign(w.n_i32_vec,
                          tensor::from_vector<int32_t>({2}, {r, 2 * r})));
  }));
  return w;
}

} // namespace

TEST_CASE("bad input matrix: every invalid call fails with its exact code and "
          "changes nothing") {
  auto w = make_world();
  auto& s = w.s;
  temp_dir dir;

  // -- checkpoint files ------------------------------------------------------
  auto good = dir.file("good.safetensors");
  VS_REQUIRE_OK(save(s, good));
  // An auxiliary strategy with the same replica count writes "wrong" files.
  auto aux = make_strategy(N, 20s);
  auto aux_file = [&](const std::string& file, auto populate) {
    for (auto& v : VS_VALUE(aux.variables()))
      VS_REQUIRE_OK(aux.destroy(v));
    populate();
    auto path = dir.file(file);
    VS_REQUIRE_OK(save(aux, path));
    return path;
  };
  auto wrong_dtype = aux_file("wrong_dtype.safetensors", [&] {
    make_var(aux, "w_f32_sum", tensor::from_vector<double>({2}, {1, 2}),
             synchronization::on_write, aggregation::sum);
  });
  auto wrong_shape = aux_file("wrong_shape.safetensors", [&] {
    make_var(aux, "w_f32_sum", f32({3}, {1, 2, 3}), synchronization::on_write,
             aggregation::sum);
  });
  auto per_component_into_on_write
    = aux_file("per_component.safetensors", [&] {
        make_var(aux, "w_f32_none", tensor::scalar<float>(8.0f),
                 synchronization::none);
      });
  // Every variable of `s` with the same spec but other values, except one
  // whose dtype differs: restore must validate all before changing any.
  auto all_but_one = aux_file("all_but_one.safetensors", [&] {
    for (auto& v : VS_VALUE(s.variables())) {
      auto type = v.name() == "w_i32_sum" ? dtype::int64 : v.type();
      VS_VALUE(aux.create_variable(v.name(), tensor::filled(type, v.shape(), 42),
                                   v.synchronization(), v.aggregation()));
    }
  });
  // Per-component entries of a strategy with another replica count.
  auto two_replicas = make_strategy(2, 20s);
  make_var(two_replicas, "n_f64", tensor::scalar<double>(1.0),
           synchronization::none);
  auto wrong_replicas = dir.file("wrong_replicas.safetensors");
  VS_REQUIRE_OK(save(two_replicas, wrong_replicas));
  two_replicas.shutdown();

  auto empty_file = dir.file("empty.safetensors");
  write_bytes(empty_file, "");
  auto garbage = dir.file("garbage.safetensors");
  write_bytes(garbage, "this is not a checkpoint at all, just text\n");
  auto truncated = dir.file("truncated.safetensors");
  {
    auto bytes = read_bytes(good);
    REQUIRE(bytes.size() > 16);
    write_bytes(truncated, bytes.substr(0, bytes.size() - 7));
  }
  auto long_header = dir.file("long_header.safetensors");
  write_bytes(long_header, safetensors_bytes("{}", "", 4096));
  auto not_json = dir.file("not_json.safetensors");
  write_bytes(not_json, safetensors_bytes("{\"w_f32_sum\": [1, 2", ""));
  auto bad_offsets = dir.file("bad_offsets.safetensors");
  write_bytes(bad_offsets,
              safetensors_bytes("{\"w_f32_sum\":{\"dtype\":\"F32\",\"shape\":[2],"
                                "\"data_offsets\":[0,800]}}",
                                std::string(8, '\0')));
  auto bad_dtype_tag = dir.file("bad_dtype.safetensors");
  write_bytes(bad_dtype_tag,
              safetensors_bytes("{\"w_f32_sum\":{\"dtype\":\"Q7\",\"shape\":[2],"
                                "\"data_offsets\":[0,8]}}",
                                std::string(8, '\0')));
  auto bad_replica_meta = dir.file("bad_replica_meta.safetensors");
  write_bytes(bad_replica_meta,
              safetensors_bytes("{\"__metadata__\":{\"n_f64.replicas\":\"abc\"}}",
                                ""));
  // A sparse file far larger than memory: restore sizes its buffer from it.
  const uint64_t huge_size = uint64_t{8} << 40; // 8 TiB, no disk blocks
  auto huge_file = dir.file("huge.safetensors");
  auto huge_skip = [&]() -> std::string {
    int fd = ::open(huge_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
      return "cannot create the sparse file";
    int rc = ::ftruncate(fd, static_cast<off_t>(huge_size));
    ::close(fd);
    if (rc != 0)
      return "the file system refuses a sparse file of 8 TiB";
    return {};
  };

  // Values whose memory use the budget refuses (untouched: never read).
  auto big_value = tensor::empty(dtype::float32, {int64_t{25} << 20});
  per_replica<tensor> big_pr{std::vector<tensor>(N, big_value)};
  auto big_int = tensor::empty(dtype::int32, {int64_t{25} << 20});
  per_replica<tensor> big_ints{std::vector<tensor>(N, big_int)};
  // Paths that are not regular files, and a checkpoint with one flipped
  // data byte (in the last tensor of the file).
  auto fifo = dir.file("fifo.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto a_dir = dir.file("a_dir.safetensors");
  fs::create_directory(a_dir);
  auto flipped = dir.file("flipped.safetensors");
  {
    auto bytes = read_bytes(good);
    bytes[bytes.size() - 1] ^= 0x01;
    write_bytes(flipped, bytes);
  }

  // A strategy that has shut down.
  auto dead = make_strategy(2, 20s);
  auto dead_v = make_var(dead, "dv", tensor::scalar<float>(1.0f),
                         synchronization::on_write, aggregation::sum);
  dead.shutdown();

  const auto inf = std::numeric_limits<double>::infinity();
  const auto nan = std::numeric_limits<double>::quiet_NaN();
  auto pr = [](std::vector<tensor> xs) {
    return per_replica<tensor>{std::move(xs)};
  };
  auto vec = [](std::initializer_list<float> xs) {
    return tensor::from_list<float>(xs);
  };
  auto mat2x2 = f32({2, 2}, {1, 2, 3, 4});

  std::vector<row> rows = {
    // -- invalid_synchronization ---------------------------------------------
    {"parse_synchronization(4): one past on_read",
     errc::invalid_synchronization,
     [] { return error_of(parse_synchronization(int64_t{4}, "cfg_var")); },
     "cfg_var"},
    {"parse_synchronization(-1)", errc::invalid_synchronization,
     [] { return error_of(parse_synchronization(int64_t{-1}, "cfg_var")); },
     "-1"},
    {"parse_synchronization(INT64_MAX)", errc::invalid_synchronization,
     [] {
       return error_of(parse_synchronization(
         std::numeric_limits<int64_t>::max(), "cfg_var"));
     }},
    {"parse_synchronization(256): would wrap to 0 in a uint8_t",
     errc::invalid_synchronization,
     [] { return error_of(parse_synchronization(int64_t{256}, "v")); }},
    {"parse_synchronization(\"sometimes\")", errc::invalid_synchronization,
     [] { return error_of(parse_synchronization("sometimes", "cfg_var")); },
     "sometimes"},
    {"parse_synchronization(\"\")", errc::invalid_synchronization,
     [] { return error_of(parse_synchronization("", "cfg_var")); }},
    {"parse_synchronization(\"on-write\"): dash instead of underscore",
     errc::invalid_synchronization,
     [] { return error_of(parse_synchronization("on-write", "cfg_var")); }},
    {"parse_synchronization(\" on_write\"): leading space",
     errc::invalid_synchronization,
     [] { return error_of(parse_synchronization(" on_write", "cfg_var")); }},
    {"parse_synchronization(\"2\"): a number as text",
     errc::invalid_synchronization,
     [] { return error_of(parse_synchronization("2", "cfg_var")); }},
    {"create_variable: spec.sync = 4 (cast from an integer)",
     errc::invalid_synchronization,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<float>(0),
                                         static_cast<synchronization>(4),
                                         aggregation::none));
     },
     "new_var"},
    {"create_variable: spec.sync = 255 (cast from an integer)",
     errc::invalid_synchronization,
     [&] {
       variable_spec spec;
       spec.name = "new_var";
       spec.initial_value = tensor::scalar<int64_t>(0);
       spec.sync = static_cast<synchronization>(255);
       return error_of(s.create_variable(spec));
     }},
    {"create_variable: bad sync on an existing name (validation first)",
     errc::invalid_synchronization,
     [&] {
       return error_of(s.create_variable("w_f32_sum", f32({2}, {0, 0}),
                                         static_cast<synchronization>(9),
                                         aggregation::sum));
     }},

    // -- invalid_aggregation -------------------------------------------------
    {"parse_aggregation(4): one past only_first_replica",
     errc::invalid_aggregation,
     [] { return error_of(parse_aggregation(int64_t{4}, "cfg_var")); },
     "cfg_var"},
    {"parse_aggregation(-3)", errc::invalid_aggregation,
     [] { return error_of(parse_aggregation(int64_t{-3}, "cfg_var")); }, "-3"},
    {"parse_aggregation(INT64_MIN)", errc::invalid_aggregation,
     [] {
       return error_of(
         parse_aggregation(std::numeric_limits<int64_t>::min(), "cfg_var"));
     }},
    {"parse_aggregation(\"avg\")", errc::invalid_aggregation,
     [] { return error_of(parse_aggregation("avg", "cfg_var")); }, "avg"},
    {"parse_aggregation(\"\")", errc::invalid_aggregation,
     [] { return error_of(parse_aggregation("", "cfg_var")); }},
    {"parse_aggregation(\"only_first\"): a prefix",
     errc::invalid_aggregation,
     [] { return error_of(parse_aggregation("only_first", "cfg_var")); }},
    {"create_variable: spec.agg = 4 (cast from an integer)",
     errc::invalid_aggregation,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<float>(0),
                                         synchronization::on_write,
                                         static_cast<aggregation>(4)));
     },
     "new_var"},
    {"create_variable: spec.agg = 200 on an on_read variable",
     errc::invalid_aggregation,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<double>(0),
                                         synchronization::on_read,
                                         static_cast<aggregation>(200)));
     }},

    // -- invalid_argument: enums out of range (V4) ------------------------------
    {"update: update_op 99 (cast from an integer) on on_write",
     errc::invalid_argument,
     [&] {
       return s.update(w.w_f32_sum, static_cast<update_op>(99),
                       f32({2}, {1, 1}));
     },
     "99"},
    {"update: update_op 3 on an on_read sum variable (first component path)",
     errc::invalid_argument,
     [&] {
       return s.update(w.r_i64_sum, static_cast<update_op>(3),
                       tensor::scalar<int64_t>(1));
     },
     "r_i64_sum"},
    {"update: update_op 255 on a none variable", errc::invalid_argument,
     [&] {
       return s.update(w.n_f64, static_cast<update_op>(255),
                       tensor::scalar<double>(1));
     },
     "255"},
    {"async update: update_op 17", errc::invalid_argument,
     [&] {
       std::promise<caf::error> p;
       s.async().update(w.w_i32_sum, static_cast<update_op>(17),
                        tensor::from_vector<int32_t>({3}, {1, 1, 1}),
                        [&](caf::error e) { p.set_value(std::move(e)); });
       return p.get_future().get();
     },
     "17"},
    {"replica context: update_op 9 on an on_write variable in a step",
     errc::invalid_argument,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.update(w.w_f32_sum, static_cast<update_op>(9),
                           f32({2}, {1, 1}));
       });
     },
     "w_f32_sum"},
    {"replica context: update_op 9 on an on_read variable in a step",
     errc::invalid_argument,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.update(w.r_f32_none, static_cast<update_op>(9),
                           tensor::scalar<float>(1));
       });
     },
     "r_f32_none"},
    {"all_reduce: reduce_op 42", errc::invalid_argument,
     [&] {
       return error_of(s.all_reduce(
         static_cast<reduce_op>(42),
         pr({tensor::scalar<float>(1), tensor::scalar<float>(2),
             tensor::scalar<float>(3)})));
     },
     "42"},
    {"reduce: reduce_op 200 of per-replica values", errc::invalid_argument,
     [&] {
       return error_of(s.reduce(
         static_cast<reduce_op>(200),
         pr({tensor::scalar<float>(1), tensor::scalar<float>(2),
             tensor::scalar<float>(3)})));
     },
     "200"},
    {"strategy::create: step_exception policy 5", errc::invalid_argument,
     [&] {
       auto opts = options_for({"cpu:0"});
       opts.step_exception = static_cast<on_step_exception>(5);
       auto st = strategy::create(opts);
       if (st)
         st->shutdown();
       return error_of(st);
     },
     "5"},

    // -- invalid_argument: creation ---------------------------------------------
    {"create_variable: empty name", errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("", tensor::scalar<float>(0),
                                         synchronization::on_write));
     }},
    {"create_variable: name __metadata__ (C9)", errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("__metadata__",
                                         tensor::scalar<float>(0)));
     },
     "reserved"},
    {"create_variable: name n_f64/replica_0 beside per-component n_f64 (C9)",
     errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("n_f64/replica_0",
                                         tensor::scalar<double>(0)));
     },
     "/replica_"},
    {"create_variable: name with a NUL byte (C9)", errc::invalid_argument,
     [&] {
       return error_of(s.create_variable(std::string{"a\0b", 3},
                                         tensor::scalar<float>(0)));
     },
     "control character"},
    {"create_variable: name of 64 MiB (C9)", errc::invalid_argument,
     [&] {
       return error_of(s.create_variable(std::string(64u << 20, 'x'),
                                         tensor::scalar<float>(0)));
     },
     "256"},
    {"create_variable: on_read with trainable = true (C4)",
     errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<float>(0),
                                         synchronization::on_read,
                                         aggregation::sum, true));
     },
     "new_var"},
    {"create_variable: int64 with mean (C5)", errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<int64_t>(0),
                                         synchronization::on_write,
                                         aggregation::mean));
     },
     "new_var"},
    {"create_variable: int32 on_read with mean (C5)", errc::invalid_argument,
     [&] {
       return error_of(
         s.create_variable("new_var", tensor::scalar<int32_t>(0),
                           synchronization::on_read, aggregation::mean));
     }},
    {"create_variable: synchronization none with sum (C3)",
     errc::invalid_argument,
     [&] {
       return error_of(s.create_variable("new_var", tensor::scalar<float>(0),
                                         synchronization::none,
                                         aggregation::sum));
     }},

    // -- invalid_argument: empty handles ------------------------------------------
    {"read(empty handle)", errc::invalid_argument,
     [&] { return error_of(s.read(variable{})); }},
    {"assign(empty handle, tensor)", errc::invalid_argument,
     [&] { return s.assign(variable{}, tensor::scalar<float>(1)); }},
    {"assign_add(empty handle, 1.0)", errc::invalid_argument,
     [&] { return s.assign_add(variable{}, 1.0); }},
    {"local_values(empty handle)", errc::invalid_argument,
     [&] { return error_of(s.local_values(variable{})); }},
    {"destroy(empty handle)", errc::invalid_argument,
     [&] { return s.destroy(variable{}); }},
    {"async read(empty handle)", errc::invalid_argument,
     [&] {
       std::promise<caf::error> p;
       s.async().read(variable{}, [&](caf::expected<tensor> r) {
         p.set_value(r ? caf::error{} : r.error());
       });
       return p.get_future().get();
     }},
    {"replica context: assign_sub(empty handle)", errc::invalid_argument,
     [&] {
       return step_error(s, [](replica_context& ctx) {
         return ctx.assign_sub(variable{}, 1.0);
       });
     }},
    {"replica context: read(empty handle)", errc::invalid_argument,
     [&] {
       return step_error(s, [](replica_context& ctx) {
         return error_of(ctx.read(variable{}));
       });
     }},

    // -- invalid_argument: scalar overloads on integer variables ---------------------
    {"assign(int64 on_write, 0.5): not an integer", errc::invalid_argument,
     [&] { return s.assign(w.w_i64_ofr, 0.5); }, "w_i64_ofr"},
    {"assign_add(int32 on_read, 2.25)", errc::invalid_argument,
     [&] { return s.assign_add(w.r_i32_ofr, 2.25); }},
    {"assign_add(int32 [3] on_write, 2.0): scalar needs shape [] first",
     errc::shape_mismatch, [&] { return s.assign_add(w.w_i32_sum, 2.0); }},
    {"assign_add(int64 on_read, NaN)", errc::invalid_argument,
     [&] { return s.assign_add(w.r_i64_sum, nan); }, "r_i64_sum"},
    {"assign(int64 on_write, +inf)", errc::invalid_argument,
     [&] { return s.assign(w.w_i64_ofr, inf); }},
    {"assign_sub(int32 on_read, -inf)", errc::invalid_argument,
     [&] { return s.assign_sub(w.r_i32_ofr, -inf); }},
    {"assign(int32 on_read, 2^31): out of int32 range", errc::invalid_argument,
     [&] { return s.assign(w.r_i32_ofr, 2147483648.0); }},
    {"assign(int64 on_write, 2^63): out of int64 range",
     errc::invalid_argument,
     [&] { return s.assign(w.w_i64_ofr, 9223372036854775808.0); }},
    {"replica context: assign(int64 on_read, NaN)", errc::invalid_argument,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign(w.r_i64_sum, nan);
       });
     }},
    {"replica context: assign_add(int64 on_write, 1.5)",
     errc::invalid_argument,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign_add(w.w_i64_ofr, 1.5);
       });
     }},

    // -- invalid_argument: distributed values -------------------------------------
    {"reduce: 2 values for 3 replicas", errc::invalid_argument,
     [&] {
       return error_of(
         s.reduce(reduce_op::sum, pr({vec({1}), vec({2})})));
     }},
    {"reduce: 4 values for 3 replicas", errc::invalid_argument,
     [&] {
       return error_of(s.reduce(reduce_op::mean,
                                pr({vec({1}), vec({2}), vec({3}), vec({4})})));
     }},
    {"reduce along axis 1 of rank-1 values", errc::invalid_argument,
     [&] {
       return error_of(s.reduce(
         reduce_op::sum, pr({vec({1, 2}), vec({3, 4}), vec({5, 6})}), 1));
     }},
    {"reduce along axis -3 of rank-2 values", errc::invalid_argument,
     [&] {
       return error_of(
         s.reduce(reduce_op::mean, pr({mat2x2, mat2x2, mat2x2}), -3));
     }},
    {"reduce along axis 0 of rank-0 values", errc::invalid_argument,
     [&] {
       auto x = tensor::scalar<float>(1);
       return error_of(s.reduce(reduce_op::sum, pr({x, x, x}), 0));
     }},
    {"reduce(mirrored over 2 replicas) on 3 replicas", errc::invalid_argument,
     [&] {
       return error_of(
         s.reduce(reduce_op::sum, mirrored<tensor>{vec({1, 2}), 2}));
     }},
    {"gather: 2 values for 3 replicas", errc::invalid_argument,
     [&] { return error_of(s.gather(pr({vec({1}), vec({2})}), 0)); }},
    {"gather along axis 1 of rank-1 values", errc::invalid_argument,
     [&] {
       return error_of(s.gather(pr({vec({1}), vec({2}), vec({3})}), 1));
     }},
    {"gather of rank-0 values (D7)", errc::invalid_argument,
     [&] {
       auto x = tensor::scalar<int64_t>(1);
       return error_of(s.gather(pr({x, x, x}), 0));
     }},
    {"all_reduce: 2 values for 3 replicas", errc::invalid_argument,
     [&] {
       return error_of(s.all_reduce(reduce_op::sum, pr({vec({1}), vec({2})})));
     }},
    {"batch_all_reduce: second group has 1 value", errc::invalid_argument,
     [&] {
       return error_of(s.batch_all_reduce(
         reduce_op::sum,
         {pr({vec({1}), vec({2}), vec({3})}), pr({vec({1})})}));
     }},
    {"parse_reduce_op(\"median\")", errc::invalid_argument,
     [] { return error_of(parse_reduce_op("median")); }, "median"},

    // -- invalid_argument: devices and strategy options ------------------------------
    {"parse_device(\"tpu:0\")", errc::invalid_argument,
     [] { return error_of(parse_device("tpu:0")); }, "tpu:0"},
    {"parse_device(\"cpu:-1\")", errc::invalid_argument,
     [] { return error_of(parse_device("cpu:-1")); }},
    {"parse_device(\"cpu:\")", errc::invalid_argument,
     [] { return error_of(parse_device("cpu:")); }},
    {"parse_device(\"cpu0\")", errc::invalid_argument,
     [] { return error_of(parse_device("cpu0")); }},
    {"parse_device(\"cpu:99999\"): index too long", errc::invalid_argument,
     [] { return error_of(parse_device("cpu:99999")); }},
    {"strategy::create with device \"tpu:0\"", errc::invalid_argument,
     [] { return create_error({"cpu:0", "tpu:0"}); }, "tpu:0"},
    {"strategy::create with no device", errc::invalid_argument,
     [] { return create_error({}); }},
    {"strategy::create with cpu:1 listed twice", errc::invalid_argument,
     [] { return create_error({"cpu:1", "cpu:0", "cpu:1"}); }},
    {"strategy::create with a negative timeout", errc::invalid_argument,
     [] { return create_error({"cpu:0"}, -1ms); }},
    {"strategy::create with max_queued_operations = 0 (no unbounded queue)",
     errc::invalid_argument,
     [] {
       auto opts = options_for({"cpu:0"});
       opts.max_queued_operations = 0;
       auto s = strategy::create(opts);
       return s ? caf::error{} : s.error();
     }, "max_queued_operations"},
    {"strategy::create with max_queued_bytes = 0 (no unbounded queue)",
     errc::invalid_argument,
     [] {
       auto opts = options_for({"cpu:0"});
       opts.max_queued_bytes = 0;
       auto s = strategy::create(opts);
       return s ? caf::error{} : s.error();
     }, "max_queued_bytes"},

    // -- invalid_argument: checkpoint files that cannot be read / written ---------------
    {"restore from a path that does not exist", errc::invalid_argument,
     [&] { return restore(s, dir.file("no-such-file.safetensors")); }},
    {"restore from a directory", errc::invalid_argument,
     [&] { return restore(s, dir.path.string()); }},
    {"save into a directory that does not exist", errc::invalid_argument,
     [&] { return save(s, dir.file("no/such/dir/x.safetensors")); }},

    // -- already_exists ----------------------------------------------------------
    {"create_variable: duplicate name, same spec", errc::already_exists,
     [&] {
       return error_of(s.create_variable("w_f32_sum", f32({2}, {0, 0}),
                                         synchronization::on_write,
                                         aggregation::sum));
     },
     "w_f32_sum"},
    {"create_variable: duplicate name, other dtype and sync",
     errc::already_exists,
     [&] {
       return error_of(s.create_variable("r_i64_sum",
                                         tensor::scalar<double>(0),
                                         synchronization::none));
     }},
    {"create_variable: duplicate of a zero-element variable",
     errc::already_exists,
     [&] {
       return error_of(s.create_variable("empty_f32",
                                         tensor::zeros(dtype::float32, {0}),
                                         synchronization::on_write,
                                         aggregation::sum));
     }},

    // -- unknown_variable ----------------------------------------------------------
    {"lookup(\"no_such_variable\")", errc::unknown_variable,
     [&] { return error_of(s.lookup("no_such_variable")); },
     "no_such_variable"},
    {"lookup(\"\")", errc::unknown_variable,
     [&] { return error_of(s.lookup("")); }},
    {"lookup of a destroyed variable's name", errc::unknown_variable,
     [&] { return error_of(s.lookup("gone")); }},
    {"read(destroyed handle)", errc::unknown_variable,
     [&] { return error_of(s.read(w.gone)); }},
    {"assign_add(destroyed handle, 1.0)", errc::unknown_variable,
     [&] { return s.assign_add(w.gone, 1.0); }},
    {"local_values(destroyed handle)", errc::unknown_variable,
     [&] { return error_of(s.local_values(w.gone)); }},
    {"destroy(destroyed handle): a second destroy", errc::unknown_variable,
     [&] { return s.destroy(w.gone); }},
    {"replica context: read(destroyed handle)", errc::unknown_variable,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return error_of(ctx.read(w.gone));
       });
     }},
    {"replica context: assign_add(destroyed on_write handle) after a valid "
     "update",
     errc::unknown_variable,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})));
         return ctx.assign_add(w.gone, tensor::scalar<float>(1));
       });
     }},
    {"save of an unknown name", errc::unknown_variable,
     [&] { return save(s, dir.file("unused.safetensors"), {"no_such"}); }},

    // -- dtype_mismatch --------------------------------------------------------------
    {"assign float64 to float32 on_write", errc::dtype_mismatch,
     [&] {
       return s.assign(w.w_f32_sum, tensor::from_vector<double>({2}, {1, 2}));
     },
     "w_f32_sum"},
    {"assign_add int32 to int64 on_read", errc::dtype_mismatch,
     [&] { return s.assign_add(w.r_i64_sum, tensor::scalar<int32_t>(1)); }},
    {"assign_sub int64 to float64 none", errc::dtype_mismatch,
     [&] { return s.assign_sub(w.n_f64, tensor::scalar<int64_t>(1)); }},
    {"assign float32 to a zero-element int64 variable", errc::dtype_mismatch,
     [&] {
       return s.assign(w.empty_i64_2x0, tensor::zeros(dtype::float32, {2, 0}));
     }},
    {"replica context: on_write update with the wrong dtype on one replica",
     errc::dtype_mismatch,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f32_none, tensor::scalar<float>(1)));
         if (ctx.replica_id() == 1)
           return ctx.assign_add(w.auto_f32, tensor::scalar<double>(1));
         return ctx.assign_add(w.auto_f32, tensor::scalar<float>(1));
       });
     }},
    {"replica context: on_read update with the wrong dtype",
     errc::dtype_mismatch,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign(w.r_f32_none, tensor::scalar<double>(1));
       });
     }},
    {"reduce: float32 and float64 values", errc::dtype_mismatch,
     [&] {
       return error_of(s.reduce(
         reduce_op::sum,
         pr({vec({1}), tensor::from_vector<double>({1}, {2}), vec({3})})));
     }},
    {"all_reduce: int32 and int64 values", errc::dtype_mismatch,
     [&] {
       return error_of(s.all_reduce(
         reduce_op::sum,
         pr({tensor::scalar<int32_t>(1), tensor::scalar<int64_t>(1),
             tensor::scalar<int32_t>(1)})));
     }},
    {"gather: float32 and int32 values", errc::dtype_mismatch,
     [&] {
       return error_of(s.gather(
         pr({vec({1}), vec({2}), tensor::from_vector<int32_t>({1}, {3})}), 0));
     }},

    // -- shape_mismatch ----------------------------------------------------------------
    {"assign [3] to a [2] on_write variable", errc::shape_mismatch,
     [&] { return s.assign(w.w_f32_sum, vec({1, 2, 3})); }, "w_f32_sum"},
    {"assign a scalar to a [2, 2] on_write variable", errc::shape_mismatch,
     [&] { return s.assign(w.w_f64_mean, tensor::scalar<double>(1)); }},
    {"assign [4] to a [2, 2] variable (same element count)",
     errc::shape_mismatch,
     [&] {
       return s.assign(w.w_f64_mean,
                       tensor::from_vector<double>({4}, {1, 2, 3, 4}));
     }},
    {"scalar overload on a [2] none variable", errc::shape_mismatch,
     [&] { return s.assign(w.n_i32_vec, 1.0); }},
    {"scalar overload on a zero-element variable", errc::shape_mismatch,
     [&] { return s.assign_add(w.empty_f32, 1.0); }},
    {"assign [1] to a [0] variable", errc::shape_mismatch,
     [&] { return s.assign(w.empty_f32, vec({1})); }},
    {"assign [0] to a [2, 0] variable", errc::shape_mismatch,
     [&] {
       return s.assign(w.empty_i64_2x0, tensor::zeros(dtype::int64, {0}));
     }},
    {"assign [0] to a scalar variable", errc::shape_mismatch,
     [&] { return s.assign(w.auto_f32, tensor::zeros(dtype::float32, {0})); }},
    {"replica context: on_write update with the wrong shape on replica 2",
     errc::shape_mismatch,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         if (ctx.replica_id() == 2)
           return ctx.assign(w.w_f32_sum, vec({1}));
         return ctx.assign(w.w_f32_sum, vec({1, 1}));
       });
     }},
    {"replica context: none update with the wrong shape",
     errc::shape_mismatch,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign_add(w.n_i32_vec,
                               tensor::from_vector<int32_t>({3}, {1, 1, 1}));
       });
     }},
    {"reduce: [2] and [3] values", errc::shape_mismatch,
     [&] {
       return error_of(s.reduce(reduce_op::sum,
                                pr({vec({1, 2}), vec({1, 2, 3}), vec({1, 2})})));
     }},
    {"reduce along axis 0: values of rank 1 and 2", errc::shape_mismatch,
     [&] {
       return error_of(
         s.reduce(reduce_op::mean, pr({vec({1, 2}), mat2x2, vec({1, 2})}), 0));
     }},
    {"all_reduce: [2] and [2, 2] values", errc::shape_mismatch,
     [&] {
       return error_of(
         s.all_reduce(reduce_op::max, pr({vec({1, 2}), vec({1, 2}), mat2x2})));
     }},
    {"gather along axis 0: [2, 2] and [2, 3] values", errc::shape_mismatch,
     [&] {
       return error_of(
         s.gather(pr({mat2x2, f32({2, 3}, {1, 2, 3, 4, 5, 6}), mat2x2}), 0));
     }},

    // -- aggregation_required ---------------------------------------------------------------
    {"on_write none: replicas contribute different values",
     errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign(w.w_f32_none, 1.0 + ctx.replica_id());
       });
     },
     "w_f32_none"},
    {"on_write none (auto): equal on replicas 0 and 1, different on 2",
     errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign_add(w.auto_f32, ctx.replica_id() == 2 ? 2.0 : 1.0);
       });
     }},
    {"on_write none: a valid sum update first, then different values",
     errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})));
         return ctx.assign(w.w_f32_none, ctx.replica_id() == 0 ? 1.0 : 2.0);
       });
     }},
    {"on_write none: NaNs with different payloads differ bitwise",
     errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         auto x = ctx.replica_id() == 1 ? qnan_payload : qnan;
         return ctx.assign(w.nan_f32, f32({3}, {x, pos_inf, -pos_inf}));
       });
     },
     "nan_f32"},
    {"on_write none: NaN and -NaN differ bitwise", errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         auto x = ctx.replica_id() == 2 ? neg_qnan : qnan;
         return ctx.assign(w.nan_f32, f32({3}, {x, 0, 0}));
       });
     }},
    {"on_write none: +0.0 and -0.0 differ bitwise", errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         float z = ctx.replica_id() == 0 ? 0.0f : -0.0f;
         return ctx.assign(w.w_f32_none, tensor::scalar<float>(z));
       });
     }},
    {"on_write none: +inf and -inf", errc::aggregation_required,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         float x = ctx.replica_id() == 1 ? -pos_inf : pos_inf;
         return ctx.assign_add(w.w_f32_none, tensor::scalar<float>(x));
       });
     }},

    // -- no_cross_replica_value ---------------------------------------------------------------
    {"cross-replica read of on_read + none", errc::no_cross_replica_value,
     [&] { return error_of(s.read(w.r_f32_none)); }, "r_f32_none"},
    {"cross-replica read of synchronization none (N = 3)",
     errc::no_cross_replica_value,
     [&] { return error_of(s.read(w.n_f64)); }},
    {"cross-replica read of a [2] none variable", errc::no_cross_replica_value,
     [&] { return error_of(s.read(w.n_i32_vec)); }},
    {"async cross-replica read of on_read + none",
     errc::no_cross_replica_value,
     [&] {
       std::promise<caf::error> p;
       s.async().read(w.r_f32_none, [&](caf::expected<tensor> r) {
         p.set_value(r ? caf::error{} : r.error());
       });
       return p.get_future().get();
     }},

    // -- mismatched_replica_updates ------------------------------------------------------------
    {"replica 1 issues one more on_write update",
     errc::mismatched_replica_updates,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})));
         if (ctx.replica_id() == 1)
           VS_STEP_OK(ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})));
         return caf::error{};
       });
     }},
    {"replica 0 issues no update, the others one",
     errc::mismatched_replica_updates,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         if (ctx.replica_id() != 0)
           VS_STEP_OK(ctx.assign(w.w_i64_ofr, 1.0));
         return caf::error{};
       });
     }},
    {"replicas update different variables", errc::mismatched_replica_updates,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         if (ctx.replica_id() == 2)
           return ctx.assign_add(w.auto_f32, 1.0);
         return ctx.assign_add(w.w_f32_none, 1.0);
       });
     }},
    {"replicas apply different ops to one variable",
     errc::mismatched_replica_updates,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         if (ctx.replica_id() == 1)
           return ctx.assign_sub(w.w_i32_sum,
                                 tensor::from_vector<int32_t>({3}, {1, 1, 1}));
         return ctx.assign_add(w.w_i32_sum,
                               tensor::from_vector<int32_t>({3}, {1, 1, 1}));
       });
     }},
    {"same updates in a different order", errc::mismatched_replica_updates,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         auto a = [&] { return ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})); };
         auto b = [&] { return ctx.assign_add(w.w_i64_ofr, 1.0); };
         if (ctx.replica_id() == 0) {
           VS_STEP_OK(a());
           return b();
         }
         VS_STEP_OK(b());
         return a();
       });
     }},

    // -- replica_failed --------------------------------------------------------------------------
    {"a step that throws on replica 2 after an on_write update",
     errc::replica_failed,
     [&] {
       return s.run([&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f32_sum, f32({2}, {1, 1})));
         if (ctx.replica_id() == 2)
           throw std::runtime_error("boom");
       });
     },
     "boom"},
    {"a step that throws on every replica", errc::replica_failed,
     [&] {
       return s.run([&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign(w.w_i64_ofr, 1.0));
         throw std::logic_error("everyone fails");
       });
     }},
    {"a step that throws a non-standard exception", errc::replica_failed,
     [&] {
       return s.run([&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(w.w_f64_mean, tensor::filled(dtype::float64,
                                                                {2, 2}, 1)));
         if (ctx.replica_id() == 0)
           throw 42;
       });
     }},
    {"a value-returning step that throws on replica 1", errc::replica_failed,
     [&] {
       auto r = s.run([&](replica_context& ctx) -> int {
         VS_STEP_OK(ctx.assign_add(w.w_i32_sum,
                                   tensor::from_vector<int32_t>({3}, {1, 1, 1})));
         if (ctx.replica_id() == 1)
           throw std::runtime_error("no result");
         return ctx.replica_id();
       });
       return error_of(r);
     }},

    // -- timeout ----------------------------------------------------------------------------------
    // The step functions capture by value: the replica still runs them after
    // the call has returned.
    {"a step that overruns a 250 ms handle on replica 1", errc::timeout,
     [&] {
       auto v = w.w_f32_sum;
       return s.with_timeout(250ms).run([v](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(v, f32({2}, {1, 1})));
         if (ctx.replica_id() == 1)
           std::this_thread::sleep_for(900ms);
       });
     }},
    {"a step that overruns a 200 ms handle on every replica", errc::timeout,
     [&] {
       auto v = w.w_i64_ofr;
       return s.with_timeout(200ms).run([v](replica_context& ctx) {
         VS_STEP_OK(ctx.assign(v, 1.0));
         std::this_thread::sleep_for(600ms);
       });
     }},
    {"local_values on a 200 ms handle behind a slow step", errc::timeout,
     [&] {
       std::promise<caf::error> slow_done;
       struct slow_step final : replica_step {
         void run(replica_context& ctx) override {
           if (ctx.replica_id() == 2)
             std::this_thread::sleep_for(800ms);
         }
       };
       s.async().run(std::make_shared<slow_step>(),
                     [&](caf::error e) { slow_done.set_value(std::move(e)); });
       auto err = error_of(s.with_timeout(200ms).local_values(w.w_f32_sum));
       // The slow step itself completes (it updates nothing).
       auto slow_err = slow_done.get_future().get();
       if (slow_err) // not a varsync code: the row fails and says why
         return caf::make_error(caf::sec::runtime_error,
                                "the slow step failed: " + describe(slow_err));
       return err;
     }},

    // -- device_error ----------------------------------------------------------------------------
    // cuda:K is a device error without the CUDA backend, and with it when
    // the machine has no GPU K (or no GPU, or no driver). Where GPU K
    // exists the strategy opens (tests/gpu covers it), so those rows are
    // skipped there. cuda:9999 stays an error everywhere: no machine has
    // that GPU.
    {"strategy::create with cuda:0 without a GPU (or without the backend)",
     errc::device_error, [] { return create_error({"cpu:0", "cuda:0"}); },
     "cuda:0", [] { return gpu_present_skip(1); }},
    {"strategy::create with only cuda:1", errc::device_error,
     [] { return create_error({"cuda:1"}); }, "cuda:1",
     [] { return gpu_present_skip(2); }},
    {"strategy::create with cuda:9999", errc::device_error,
     [] { return create_error({"cuda:9999", "cpu:0"}); }},

    // -- out_of_memory ---------------------------------------------------------------------------
    // Beyond the strategy's budget of 192 MiB; the values are 100 MiB of
    // untouched memory, shared by every replica's entry.
    {"restore from an 8 TiB sparse file", errc::out_of_memory,
     [&] { return restore(s, huge_file); }, "huge.safetensors", huge_skip},
    {"create_variable of 3 x 100 MiB beyond the budget", errc::out_of_memory,
     [&] { return error_of(s.create_variable("big", big_value)); }, "'big'"},
    {"create_variable of 3 x 100 MiB of on_read beyond the budget",
     errc::out_of_memory,
     [&] {
       return error_of(s.create_variable("big_r", big_value,
                                         synchronization::on_read,
                                         aggregation::sum));
     },
     "104857600 bytes"},
    {"batch_all_reduce whose 2 outputs of 100 MiB exceed the budget",
     errc::out_of_memory,
     [&] {
       return error_of(s.batch_all_reduce(reduce_op::sum, {big_pr, big_pr}));
     },
     "all_reduce"},
    {"gather of 3 x 100 MiB beyond the budget", errc::out_of_memory,
     [&] { return error_of(s.gather(big_pr, 0)); }, "gather"},
    {"reduce mean of 3 x 100 MiB of int32 (float64 result) beyond the budget",
     errc::out_of_memory,
     [&] { return error_of(s.reduce(reduce_op::mean, big_ints)); }, "reduce"},
    {"all_reduce mean of int32 (float64 copies) beyond the budget",
     errc::out_of_memory,
     [&] { return error_of(s.all_reduce(reduce_op::mean, big_ints)); },
     "float64"},

    // -- checkpoint_mismatch -----------------------------------------------------------------------
    {"restore: the file's w_f32_sum is float64", errc::checkpoint_mismatch,
     [&] { return restore(s, wrong_dtype, {"w_f32_sum"}); }, "w_f32_sum"},
    {"restore: the file's w_f32_sum has shape [3]", errc::checkpoint_mismatch,
     [&] { return restore(s, wrong_shape, {"w_f32_sum"}); }},
    {"restore of every variable from a file holding one",
     errc::checkpoint_mismatch, [&] { return restore(s, wrong_dtype); }},
    {"restore: a name the strategy does not have", errc::checkpoint_mismatch,
     [&] { return restore(s, good, {"no_such_variable"}); },
     "no_such_variable"},
    {"restore: per-component entries of 2 replicas into 3",
     errc::checkpoint_mismatch,
     [&] { return restore(s, wrong_replicas, {"n_f64"}); }, "n_f64"},
    {"restore: per-component entries into an on_write variable",
     errc::checkpoint_mismatch,
     [&] { return restore(s, per_component_into_on_write, {"w_f32_none"}); }},
    {"restore: every variable valid (other values) except one dtype",
     errc::checkpoint_mismatch,
     [&] { return restore(s, all_but_one); }, "w_i32_sum"},

    // -- checkpoint_corrupt --------------------------------------------------------------------------
    {"restore from an empty file", errc::checkpoint_corrupt,
     [&] { return restore(s, empty_file); }},
    {"restore from a text file", errc::checkpoint_corrupt,
     [&] { return restore(s, garbage); }},
    {"restore from a truncated checkpoint", errc::checkpoint_corrupt,
     [&] { return restore(s, truncated); }},
    {"restore: header length beyond the end of the file",
     errc::checkpoint_corrupt, [&] { return restore(s, long_header); }},
    {"restore: header is not JSON", errc::checkpoint_corrupt,
     [&] { return restore(s, not_json); }},
    {"restore: data_offsets beyond the data", errc::checkpoint_corrupt,
     [&] { return restore(s, bad_offsets); }},
    {"restore: unknown dtype tag", errc::checkpoint_corrupt,
     [&] { return restore(s, bad_dtype_tag); }},
    {"restore: \"n_f64.replicas\" metadata is not a number",
     errc::checkpoint_corrupt,
     [&] { return restore(s, bad_replica_meta, {"n_f64"}); }},

    // -- overflow (V4) --------------------------------------------------------------------------------
    {"assign_add: int32 on_write sum beyond the maximum", errc::overflow,
     [&] {
       return s.assign_add(w.w_i32_sum,
                           tensor::from_vector<int32_t>(
                             {3}, {std::numeric_limits<int32_t>::max(), 0, 0}));
     },
     "w_i32_sum"},
    {"assign_sub: int64 on_write below the minimum", errc::overflow,
     [&] {
       return s.assign_sub(w.w_i64_ofr, tensor::scalar<int64_t>(
                                          std::numeric_limits<int64_t>::min()));
     },
     "w_i64_ofr"},
    {"assign_add: int64 on_read sum, component 0", errc::overflow,
     [&] {
       return s.assign_add(w.r_i64_sum, tensor::scalar<int64_t>(
                                          std::numeric_limits<int64_t>::max()));
     }},
    {"assign_add: int32 on_read only_first, only replica 2 overflows",
     errc::overflow,
     [&] {
       // Components 20, 21, 22: only 22 + (max - 21) does not fit.
       return s.assign_add(w.r_i32_ofr,
                           tensor::scalar<int32_t>(
                             std::numeric_limits<int32_t>::max() - 21));
     }},
    {"assign_add: int32 none, only replica 2 overflows", errc::overflow,
     [&] {
       return s.assign_add(w.n_i32_vec,
                           tensor::from_vector<int32_t>(
                             {2}, {std::numeric_limits<int32_t>::max() - 1, 0}));
     }},
    {"replica step: int32 contributions whose sum overflows", errc::overflow,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign_add(
           w.w_i32_sum,
           tensor::from_vector<int32_t>(
             {3}, {std::numeric_limits<int32_t>::max() / 2, 0, 0}));
       });
     },
     "w_i32_sum"},
    {"replica step: int64 local update of an on_read component",
     errc::overflow,
     [&] {
       return step_error(s, [&](replica_context& ctx) {
         return ctx.assign_add(w.r_i64_sum,
                               tensor::scalar<int64_t>(
                                 std::numeric_limits<int64_t>::max()));
       });
     }},
    {"all_reduce: int32 sum beyond the maximum", errc::overflow,
     [&] {
       return error_of(s.all_reduce(
         reduce_op::sum,
         pr({tensor::scalar<int32_t>(std::numeric_limits<int32_t>::max()),
             tensor::scalar<int32_t>(1), tensor::scalar<int32_t>(0)})));
     }},
    {"reduce: int64 sum beyond the maximum", errc::overflow,
     [&] {
       return error_of(s.reduce(
         reduce_op::sum,
         pr({tensor::scalar<int64_t>(std::numeric_limits<int64_t>::max()),
             tensor::scalar<int64_t>(1), tensor::scalar<int64_t>(0)})));
     }},

    // -- checkpoint paths ---------------------------------------------------------------------------
    {"restore from a FIFO (never blocks in open)", errc::invalid_argument,
     [&] { return restore(s, fifo); }, "not a regular file"},
    {"save over a FIFO", errc::invalid_argument,
     [&] { return save(s, fifo); }, "FIFO"},
    {"save over a directory", errc::invalid_argument,
     [&] { return save(s, a_dir); }, "directory"},
    {"restore: a flipped byte in the last tensor's data",
     errc::checkpoint_corrupt, [&] { return restore(s, flipped); },
     "checksum"},

    // -- shut_down ----------------------------------------------------------------------------------
    {"read after shutdown", errc::shut_down,
     [&] { return error_of(dead.read(dead_v)); }},
    {"assign after shutdown", errc::shut_down,
     [&] { return dead.assign(dead_v, tensor::scalar<float>(2)); }},
    {"assign_add(scalar) after shutdown", errc::shut_down,
     [&] { return dead.assign_add(dead_v, 1.0); }},
    {"local_values after shutdown", errc::shut_down,
     [&] { return error_of(dead.local_values(dead_v)); }},
    {"create_variable after shutdown", errc::shut_down,
     [&] {
       return error_of(dead.create_variable("x", tensor::scalar<float>(0)));
     }},
    {"lookup after shutdown", errc::shut_down,
     [&] { return error_of(dead.lookup("dv")); }},
    {"variables() after shutdown", errc::shut_down,
     [&] { return error_of(dead.variables()); }},
    {"destroy after shutdown", errc::shut_down,
     [&] { return dead.destroy(dead_v); }},
    {"run after shutdown", errc::shut_down,
     [&] {
       return dead.run([&](replica_context& ctx) {
         VS_STEP_OK(ctx.assign_add(dead_v, 1.0));
       });
     }},
    {"all_reduce after shutdown", errc::shut_down,
     [&] {
       return error_of(dead.all_reduce(
         reduce_op::sum, pr({tensor::scalar<float>(1), tensor::scalar<float>(2)})));
     }},
    {"stats after shutdown", errc::shut_down,
     [&] { return error_of(dead.stats()); }},
    {"a with_timeout handle of a shut-down strategy", errc::shut_down,
     [&] { return error_of(dead.with_timeout(50ms).read(dead_v)); }},
    {"async assign_add after shutdown", errc::shut_down,
     [&] {
       std::promise<caf::error> p;
       dead.async().assign_add(dead_v, tensor::scalar<float>(1),
                               [&](caf::error e) { p.set_value(std::move(e)); });
       return p.get_future().get();
     }},
    {"save after shutdown", errc::shut_down,
     [&] { return save(dead, dir.file("dead.safetensors")); }},

    // -- injected faults (varsync::testing) ------------------------------------------
    {"an injected fault for a replica the strategy does not have",
     errc::invalid_argument,
     [] {
       auto s = varsync::testing::create_with_faults(
         options_for({"cpu:0", "cpu:1"}), {fail_replica_at(2, 1)});
       return s ? caf::error{} : s.error();
     }},
    {"an injected fault at operation 0", errc::invalid_argument,
     [] {
       auto s = varsync::testing::create_with_faults(
         options_for({"cpu:0", "cpu:1"}), {fail_replica_at(1, 0)});
       return s ? caf::error{} : s.error();
     }},
    {"an injected delay of 0 ms", errc::invalid_argument,
     [] {
       auto s = varsync::testing::create_with_faults(
         options_for({"cpu:0", "cpu:1"}), {delay_replica(1, 0ms)});
       return s ? caf::error{} : s.error();
     }},

    // -- overloaded (V3) ---------------------------------------------------------------
    {"a blocking call while max_queued_operations (1) calls are outstanding",
     errc::overloaded,
     [] {
       auto opts = options_for({"cpu:0", "cpu:1"});
       opts.max_queued_operations = 1;
       auto slow = varsync::testing::create_with_faults(
         opts, {delay_replica(1, 200ms, 2)}); // the assign_adds
       if (!slow)
         return slow.error();
       auto c = slow->create_variable("c", tensor::scalar<float>(0),
                                      synchronization::on_write,
                                      aggregation::sum);
       if (!c)
         return c.error();
       std::promise<caf::error> first;
       slow->async().assign_add(*c, 1.0, [&](caf::error e) {
         first.set_value(std::move(e));
       });
       auto err = slow->assign_add(*c, 1.0);
       first.get_future().wait();
       slow->shutdown();
       return err;
     }, "max_queued_operations"},
  };

  // Every code that host replicas can produce has at least one row.
  std::map<errc, int> per_code;
  for (auto& r : rows)
    ++per_code[r.expected];
  for (auto code = static_cast<int>(errc::invalid_synchronization);
       code <= static_cast<int>(errc::overflow); ++code) {
    // committed_late is an outcome of slow replicas, not of bad input
    // (tests/reliability/commit_point_test.cpp).
    if (code == static_cast<int>(errc::committed_late))
      continue;
    INFO("code without a row: " << to_string(static_cast<errc>(code)));
    CHECK(per_code[static_cast<errc>(code)] > 0);
  }
  CHECK(per_code[errc::overloaded] > 0);
  CHECK(rows.size() >= 40);

  std::map<errc, int> passed;
  int skipped = 0;
  const auto initial = take_snapshot(s);
  for (auto& r : rows) {
    INFO("row: " << r.name);
    if (r.skip) {
      auto reason = r.skip();
      if (!reason.empty()) {
        WARN("skipped row '" << r.name << "': " << reason);
        ++skipped;
        continue;
      }
    }
    auto before = take_snapshot(s);
    auto start = std::chrono::steady_clock::now();
    caf::error err = r.call();
    auto elapsed = std::chrono::steady_clock::now() - start;
    INFO("expected " << to_string(r.expected) << ", got " << describe(err));
    CHECK(std::string{to_string(code_of(err))}
          == std::string{to_string(r.expected)});
    CHECK(has_code(err, r.expected));
    if (!r.mentions.empty())
      CHECK(message_of(err).find(r.mentions) != std::string::npos);
    // V3: nothing hangs; every row is answered well within the deadlines.
    CHECK(elapsed < 15s);
    auto after = take_snapshot(s);
    CHECK(same(before, after));
    if (has_code(err, r.expected) && same(before, after))
      ++passed[r.expected];
  }
  CHECK(same(initial, take_snapshot(s)));
  // Every on_write variable still holds bitwise equal components (W7).
  for (auto& v : VS_VALUE(s.variables()))
    if (v.synchronization() == synchronization::on_write) {
      INFO("variable " << v.name());
      CHECK(all_components_equal(s, v));
    }
  std::ostringstream summary;
  summary << rows.size() << " rows, " << skipped << " skipped; rows per code:";
  for (auto& [code, n] : per_code)
    summary << "\n  " << to_string(code) << ": " << n << " ("
            << passed[code] << " passed)";
  std::cout << summary.str() << std::endl;
  aux.shutdown();
}

// -- focused cases: valid edge-case inputs --------------------------------------------

TEST_CASE("bad input: zero-element variables are valid for every "
          "synchronization and every operation is a no-op on them") {
  auto s = make_strategy(N);
  int k = 0;
  for (auto sync : {synchronization::on_write, synchronization::on_read,
                    synchronization::none}) {
    for (auto shape : {tensor_shape{0}, tensor_shape{2, 0}, tensor_shape{0, 3}}) {
      auto agg = sync == synchronization::none ? aggregation::none
                                               : aggregation::sum;
      auto name = "z" + std::to_string(k++);
      INFO(name << " " << to_string(sync) << " " << to_string(shape));
      auto v = make_var(s, name, tensor::zeros(dtype::float32, shape), sync, agg);
      CHECK(v.shape() == shape);
      auto empty = tensor::zeros(dtype::float32, shape);
      VS_REQUIRE_OK(s.assign(v, empty));
      VS_REQUIRE_OK(s.assign_add(v, empty));
      VS_REQUIRE_OK(s.assign_sub(v, empty));
      VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
        auto view = VS_VALUE_IN_STEP(ctx.read(v));
        if (view.size != 0)
          throw std::runtime_error("a zero-element view has elements");
        VS_STEP_OK(ctx.assign_add(v, empty));
      }));
      auto values = VS_VALUE(s.local_values(v));
      REQUIRE(values.size() == static_cast<size_t>(N));
      for (auto& x : values) {
        CHECK(x.size() == 0);
        CHECK(x.shape() == shape);
        CHECK(x.bitwise_equal(empty));
      }
      if (sync != synchronization::none) {
        auto x = VS_VALUE(s.read(v));
        CHECK(x.shape() == shape);
        CHECK(x.size() == 0);
      }
      // The shape is still fixed: another empty shape is a mismatch.
      VS_CHECK_CODE(s.assign(v, tensor::zeros(dtype::float32, {0, 0, 0})),
                    shape_mismatch);
    }
  }
  // reduce / all_reduce / gather of zero-element values.
  auto e = tensor::zeros(dtype::float32, {0});
  per_replica<tensor> values{{e, e, e}};
  CHECK(VS_VALUE(s.reduce(reduce_op::sum, values)).size() == 0);
  CHECK(VS_VALUE(s.all_reduce(reduce_op::sum, values)).value().size() == 0);
  CHECK(VS_VALUE(s.gather(values, 0)).shape() == tensor_shape{0});
}

TEST_CASE("bad input: zero-element variables survive a checkpoint round trip") {
  auto s = make_strategy(N);
  temp_dir dir;
  make_var(s, "z_w", tensor::zeros(dtype::float64, {0}),
           synchronization::on_write, aggregation::mean);
  make_var(s, "z_n", tensor::zeros(dtype::int32, {3, 0}),
           synchronization::none);
  auto x = make_var(s, "x", tensor::scalar<int64_t>(5),
                    synchronization::on_write, aggregation::sum);
  auto path = dir.file("zero.safetensors");
  VS_REQUIRE_OK(save(s, path));
  VS_REQUIRE_OK(s.assign(x, 6.0));
  VS_REQUIRE_OK(restore(s, path));
  CHECK(read_scalar(s, x) == 5);
}

TEST_CASE("bad input: a negative extent cannot be constructed") {
  // tensor::empty and everything built on it throw std::invalid_argument
  // before any varsync call could see such a value.
  CHECK(element_count({3, -1}) == -1);
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {-1}), std::invalid_argument);
  CHECK_THROWS_AS(tensor::zeros(dtype::int64, {2, -3}), std::invalid_argument);
  CHECK_THROWS_AS(tensor::filled(dtype::float64, {-2, 0}, 1.0),
                  std::invalid_argument);
  CHECK_THROWS_AS(tensor::from_vector<float>({-1}, {}), std::invalid_argument);
  CHECK_THROWS_AS(tensor::from_bytes(dtype::int32, {-4}, nullptr, 0),
                  std::invalid_argument);
  // A value count that does not fit the shape is rejected the same way.
  CHECK_THROWS_AS(tensor::from_vector<float>({2}, {1, 2, 3}),
                  std::invalid_argument);
}

TEST_CASE("bad input: a huge shape fails in tensor allocation, before varsync") {
  // A value of 2^62 bytes cannot exist as a host tensor (no address space
  // holds it): tensor::empty throws std::bad_alloc before any varsync call.
  // Values that do exist but whose components would not fit are
  // out_of_memory (the matrix above; memory_budget_test.cpp).
  if (VS_REL_SANITIZED) {
    WARN("skipped in a sanitizer build: its allocator aborts on such requests");
    return;
  }
  CHECK_THROWS_AS(tensor::empty(dtype::float32, {int64_t{1} << 60}),
                  std::bad_alloc);
}

TEST_CASE("bad input: NaN and infinities are stored bitwise in float "
          "variables") {
  auto s = make_strategy(N);
  auto special = f32({5}, {qnan, qnan_payload, neg_qnan, pos_inf, -pos_inf});
  auto w = make_var(s, "w", f32({5}, {0, 0, 0, 0, 0}),
                    synchronization::on_write, aggregation::none);
  auto m = make_var(s, "m", f32({5}, {0, 0, 0, 0, 0}), synchronization::on_read,
                    aggregation::mean);
  auto n = make_var(s, "n", f32({5}, {0, 0, 0, 0, 0}), synchronization::none);
  // Initial values with NaN / inf are accepted too.
  auto init = make_var(s, "init", special, synchronization::on_write,
                       aggregation::sum);
  for (auto& x : VS_VALUE(s.local_values(init)))
    CHECK(x.bitwise_equal(special));

  SECTION("cross-replica assign stores the bits in every component") {
    for (auto& v : {w, m, n}) {
      INFO(v.name());
      VS_REQUIRE_OK(s.assign(v, special));
      for (auto& x : VS_VALUE(s.local_values(v)))
        CHECK(x.bitwise_equal(special));
    }
    CHECK(VS_VALUE(s.read(w)).bitwise_equal(special));
    auto mean = VS_VALUE(s.read(m));
    CHECK(std::isnan(mean.as_double(0)));
    CHECK(mean.as_double(3) == std::numeric_limits<double>::infinity());
    CHECK(mean.as_double(4) == -std::numeric_limits<double>::infinity());
  }

  SECTION("scalar overloads accept NaN and inf for float variables") {
    auto sf = make_var(s, "sf", tensor::scalar<float>(0),
                       synchronization::on_write, aggregation::sum);
    auto sd = make_var(s, "sd", tensor::scalar<double>(0),
                       synchronization::on_read, aggregation::sum);
    VS_REQUIRE_OK(s.assign(sf, std::numeric_limits<double>::quiet_NaN()));
    for (auto& x : VS_VALUE(s.local_values(sf)))
      CHECK(std::isnan(x.as_double(0)));
    CHECK(all_components_equal(s, sf));
    VS_REQUIRE_OK(s.assign(sd, -std::numeric_limits<double>::infinity()));
    // on_read + sum splits x / N: -inf / 3 = -inf in every component.
    for (auto& x : VS_VALUE(s.local_values(sd)))
      CHECK(x.as_double(0) == -std::numeric_limits<double>::infinity());
    CHECK(read_scalar(s, sd) == -std::numeric_limits<double>::infinity());
  }

  SECTION("aggregation none: equal NaN bits from every replica are equal") {
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      VS_STEP_OK(ctx.assign(w, special));
    }));
    for (auto& x : VS_VALUE(s.local_values(w)))
      CHECK(x.bitwise_equal(special));
    // A NaN payload that differs on one replica is a different value.
    auto before = take_snapshot(s);
    VS_CHECK_CODE(s.run([&](replica_context& ctx) {
                    auto x = ctx.replica_id() == 2 ? qnan : qnan_payload;
                    VS_STEP_OK(ctx.assign(w, f32({5}, {x, 0, 0, 0, 0})));
                  }),
                  aggregation_required);
    CHECK(same(before, take_snapshot(s)));
  }

  SECTION("sum with a NaN contribution keeps the components bitwise equal") {
    auto sum = make_var(s, "sum", f32({2}, {1, 1}), synchronization::on_write,
                        aggregation::sum);
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      float x = ctx.replica_id() == 1 ? qnan : 1.0f;
      VS_STEP_OK(ctx.assign_add(sum, f32({2}, {x, pos_inf})));
    }));
    auto values = VS_VALUE(s.local_values(sum));
    for (auto& x : values) {
      CHECK(std::isnan(x.as_double(0)));
      CHECK(x.as_double(1) == std::numeric_limits<double>::infinity());
      CHECK(x.bitwise_equal(values[0])); // W7
    }
  }

  SECTION("replica-context NaN into an on_read float component is local") {
    VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
      if (ctx.replica_id() == 1)
        VS_STEP_OK(ctx.assign(m, special));
    }));
    auto values = VS_VALUE(s.local_values(m));
    CHECK(values[1].bitwise_equal(special));
    CHECK(values[0].bitwise_equal(f32({5}, {0, 0, 0, 0, 0})));
    CHECK(bits_of(values[1].data<float>()[1]) == 0x7fc00123u);
  }
}

TEST_CASE("bad input: a handle of another strategy is not this strategy's "
          "variable") {
  // Handles carry an id and a name. Were ids allocated per strategy, a
  // handle of strategy B whose id also exists in strategy A would reach A's
  // variable; the call must fail with unknown_variable (the name does
  // not match) and change nothing.
  auto a = make_strategy(2);
  auto b = make_strategy(2);
  make_var(a, "a_var", tensor::scalar<float>(1.0f), synchronization::on_write,
           aggregation::sum);
  auto foreign = make_var(b, "b_var", tensor::scalar<float>(2.0f),
                          synchronization::on_write, aggregation::sum);
  auto before = take_snapshot(a);
  VS_CHECK_CODE(error_of(a.read(foreign)), unknown_variable);
  VS_CHECK_CODE(a.assign(foreign, tensor::scalar<float>(5.0f)),
                unknown_variable);
  VS_CHECK_CODE(a.destroy(foreign), unknown_variable);
  CHECK(same(before, take_snapshot(a)));
}
