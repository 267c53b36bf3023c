// K1-K4: checkpoints (varsync/checkpoint.hpp, docs/checkpoints.md).

#include "fixture.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "varsync/ext/checkpoint_actor.hpp"
#include "api/ext/safetensors_format.hpp"
#include "varsync/checkpoint.hpp"
#include "api/strategy_access.hpp"

using namespace vs_test;
namespace fs = std::filesystem;

namespace {

// A fresh directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("varsync-ckpt-" + shared_run_id());
    fs::create_directories(path);
  }
  ~temp_dir() {
    // Across processes another process may still use the directory: the
    // runner removes it when all are done (run_across_processes.sh).
    std::error_code ec;
    if (!across_processes())
      fs::remove_all(path, ec);
  }
  /// Where the last strategy's files go: `path`, shared by the processes
  /// of a strategy across processes, or for a strategy of this process
  /// alone (tests/semantics/fixture.hpp) a directory of its own beside it.
  fs::path files() const {
    if (!across_processes() || !last_strategy_local())
      return path;
    fs::path own = path.string() + "-r" + std::getenv("VARSYNC_TEST_RANK");
    fs::create_directories(own);
    return own;
  }
  std::string file(const std::string& name) const {
    return (files() / name).string();
  }
};

void set_components(const strategy& s, const variable& v,
                    std::vector<double> values) {
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    VS_STEP_OK(ctx.assign(v, values[static_cast<size_t>(ctx.replica_id())]));
  }));
}

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Atomically (write, then rename): across processes every process writes
// the same file, and another may be reading it.
void spit(const std::string& path, const std::string& bytes) {
  auto tmp = path + ".spit-" + std::to_string(::getpid());
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << bytes;
  }
  fs::rename(tmp, path);
}

safetensors::decoded_file decode_file(const std::string& path) {
  return VS_VALUE(safetensors::decode(slurp(path)));
}

} // namespace

TEST_CASE("K1: save writes the primary, the cross-replica value or every "
          "component") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::from_vector<float>({2}, {1, 2}),
                    synchronization::on_write, aggregation::mean);
  auto hits = make_var(s, "hits", tensor::scalar<int64_t>(0),
                       synchronization::on_read, aggregation::sum);
  auto avg = make_var(s, "avg", tensor::scalar<double>(0),
                      synchronization::on_read, aggregation::mean);
  auto local = make_var(s, "local", tensor::scalar<float>(0),
                        synchronization::on_read, aggregation::none);
  auto scratch = make_var(s, "scratch", tensor::scalar<int32_t>(0),
                          synchronization::none);
  set_components(s, hits, {4, 3});
  set_components(s, avg, {1, 2});
  set_components(s, local, {5, 6});
  set_components(s, scratch, {7, 8});
  auto path = dir.file("all.safetensors");
  VS_REQUIRE_OK(save(s, path));
  auto file = decode_file(path);
  REQUIRE(file.find("w"));
  CHECK(file.find("w")->to_vector<float>() == std::vector<float>{1, 2});
  CHECK(file.find("hits")->to_vector<int64_t>() == std::vector<int64_t>{7});
  CHECK(file.find("avg")->to_vector<double>() == std::vector<double>{1.5});
  CHECK(file.find("local") == nullptr);
  CHECK(file.find("local/replica_0")->as_double(0) == 5);
  CHECK(file.find("local/replica_1")->as_double(0) == 6);
  CHECK(file.find("scratch/replica_0")->as_double(0) == 7);
  CHECK(file.find("scratch/replica_1")->as_double(0) == 8);
  CHECK(file.tensors.size() == 7);
  auto& m = file.metadata;
  CHECK(m.at("format") == "varsync-checkpoint");
  CHECK(m.at("hits.synchronization") == "on_read");
  CHECK(m.at("hits.aggregation") == "sum");
  CHECK(m.at("hits.trainable") == "false");
  CHECK(m.at("hits.per_component") == "false");
  CHECK(m.at("w.synchronization") == "on_write");
  CHECK(m.at("w.trainable") == "true");
  CHECK(m.at("local.per_component") == "true");
  CHECK(m.at("local.replicas") == "2");
  CHECK(m.at("scratch.synchronization") == "none");
  CHECK(m.count("w.replicas") == 0);
  // Saving changed nothing.
  CHECK(components(s, hits) == std::vector<double>{4, 3});
}

TEST_CASE("K2: ON_READ SUM float restores split: [4, 3] -> 7 -> [3.5, 3.5]") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto v = make_var(s, "loss", tensor::scalar<float>(0),
                    synchronization::on_read, aggregation::sum);
  set_components(s, v, {4, 3});
  auto path = dir.file("ckpt");
  VS_REQUIRE_OK(save(s, path));
  set_components(s, v, {100, -5});
  VS_REQUIRE_OK(restore(s, path));
  CHECK(components(s, v) == std::vector<double>{3.5, 3.5});
  CHECK(read_scalar(s, v) == 7);
}

TEST_CASE("K2: ON_READ SUM int32 restores split exactly: 7 -> [4, 3]") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto v = make_var(s, "count", tensor::scalar<int32_t>(0),
                    synchronization::on_read, aggregation::sum);
  set_components(s, v, {1, 6});
  auto path = dir.file("ckpt");
  VS_REQUIRE_OK(save(s, path));
  set_components(s, v, {0, 0});
  VS_REQUIRE_OK(restore(s, path));
  CHECK(components(s, v) == std::vector<double>{4, 3});
  CHECK(read_scalar(s, v) == 7);
}

TEST_CASE("K2: a value saved from ON_WRITE restored into ON_READ SUM is "
          "split") {
  temp_dir dir;
  auto path = dir.file("ckpt");
  {
    auto s = make_strategy(2);
    make_var(s, "x", tensor::scalar<int64_t>(7), synchronization::on_write,
             aggregation::sum);
    VS_REQUIRE_OK(save(s, path));
  }
  auto s = make_strategy(2);
  auto x = make_var(s, "x", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  VS_REQUIRE_OK(restore(s, path));
  CHECK(components(s, x) == std::vector<double>{4, 3});
}

TEST_CASE("K2: ON_WRITE and other ON_READ aggregations restore the value to "
          "every component") {
  temp_dir dir;
  auto s = make_strategy(3);
  auto w = make_var(s, "w", tensor::from_vector<double>({2}, {1, 2}),
                    synchronization::on_write, aggregation::mean);
  auto avg = make_var(s, "avg", tensor::scalar<float>(0),
                      synchronization::on_read, aggregation::mean);
  auto first = make_var(s, "first", tensor::scalar<float>(0),
                        synchronization::on_read,
                        aggregation::only_first_replica);
  set_components(s, avg, {1, 2, 6});
  set_components(s, first, {9, 1, 1});
  auto path = dir.file("ckpt");
  VS_REQUIRE_OK(save(s, path));
  VS_REQUIRE_OK(s.assign(w, tensor::from_vector<double>({2}, {0, 0})));
  set_components(s, avg, {0, 0, 0});
  set_components(s, first, {0, 0, 0});
  VS_REQUIRE_OK(restore(s, path));
  for (auto& t : VS_VALUE(s.local_values(w)))
    CHECK(t.to_vector<double>() == std::vector<double>{1, 2});
  CHECK(components(s, avg) == std::vector<double>{3, 3, 3});
  CHECK(components(s, first) == std::vector<double>{9, 9, 9});
}

TEST_CASE("K2: per-component entries go back to their replicas") {
  temp_dir dir;
  auto s = make_strategy(3);
  auto local = make_var(s, "local", tensor::scalar<float>(0),
                        synchronization::on_read, aggregation::none);
  auto scratch = make_var(s, "scratch", tensor::scalar<int64_t>(0),
                          synchronization::none);
  set_components(s, local, {1.5, 2.5, 3.5});
  set_components(s, scratch, {10, 20, 30});
  auto path = dir.file("ckpt");
  VS_REQUIRE_OK(save(s, path));
  set_components(s, local, {0, 0, 0});
  set_components(s, scratch, {0, 0, 0});
  VS_REQUIRE_OK(restore(s, path));
  CHECK(components(s, local) == std::vector<double>{1.5, 2.5, 3.5});
  CHECK(components(s, scratch) == std::vector<double>{10, 20, 30});
}

TEST_CASE("K2: a named subset saves and restores only those variables") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto a = make_var(s, "a", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::mean);
  auto b = make_var(s, "b", tensor::scalar<float>(2),
                    synchronization::on_write, aggregation::mean);
  auto c = make_var(s, "c", tensor::scalar<float>(3),
                    synchronization::on_write, aggregation::mean);
  auto path = dir.file("subset");
  VS_REQUIRE_OK(save(s, path, {"a", "c"}));
  auto file = decode_file(path);
  CHECK(file.find("a"));
  CHECK(file.find("b") == nullptr);
  CHECK(file.find("c"));
  VS_CHECK_CODE(save(s, dir.file("x"), {"nope"}), unknown_variable);
  VS_REQUIRE_OK(s.assign(a, 10.0));
  VS_REQUIRE_OK(s.assign(b, 20.0));
  VS_REQUIRE_OK(s.assign(c, 30.0));
  VS_REQUIRE_OK(restore(s, path, {"c"}));
  CHECK(read_scalar(s, a) == 10);
  CHECK(read_scalar(s, b) == 20);
  CHECK(read_scalar(s, c) == 3);
  // Restoring everything needs b, which the file lacks: nothing changes.
  auto before = take_snapshot(s);
  VS_CHECK_CODE(restore(s, path), checkpoint_mismatch);
  CHECK(same(before, take_snapshot(s)));
}

TEST_CASE("K3: a mismatch fails and leaves every component unchanged") {
  temp_dir dir;
  std::string path;
  {
    auto s3 = make_strategy(3);
    // Written by s3's processes; every process reads it below.
    path = dir.file("three");
    make_var(s3, "f", tensor::from_vector<float>({2}, {1, 2}),
             synchronization::on_write, aggregation::mean);
    make_var(s3, "n", tensor::scalar<int64_t>(5), synchronization::on_read,
             aggregation::sum);
    auto local = make_var(s3, "local", tensor::scalar<float>(0),
                          synchronization::on_read, aggregation::none);
    set_components(s3, local, {1, 2, 3});
    VS_REQUIRE_OK(save(s3, path));
  }
  auto s = make_strategy(2);
  auto f = make_var(s, "f", tensor::from_vector<float>({2}, {7, 8}),
                    synchronization::on_write, aggregation::mean);
  auto n = make_var(s, "n", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  auto local = make_var(s, "local", tensor::scalar<float>(0),
                        synchronization::on_read, aggregation::none);
  set_components(s, n, {1, 2});
  set_components(s, local, {4, 5});
  auto before = take_snapshot(s);
  SECTION("wrong replica count for per-component entries") {
    VS_CHECK_CODE(restore(s, path), checkpoint_mismatch);
    VS_CHECK_CODE(restore(s, path, {"f", "n", "local"}), checkpoint_mismatch);
  }
  SECTION("dtype") {
    VS_REQUIRE_OK(s.destroy(n));
    make_var(s, "n", tensor::scalar<int32_t>(0), synchronization::on_read,
             aggregation::sum);
    before = take_snapshot(s);
    VS_CHECK_CODE(restore(s, path, {"f", "n"}), checkpoint_mismatch);
  }
  SECTION("shape") {
    VS_REQUIRE_OK(s.destroy(f));
    make_var(s, "f", tensor::from_vector<float>({1, 2}, {7, 8}),
             synchronization::on_write, aggregation::mean);
    before = take_snapshot(s);
    VS_CHECK_CODE(restore(s, path, {"n", "f"}), checkpoint_mismatch);
  }
  SECTION("a name missing from the file or from the strategy") {
    make_var(s, "extra", tensor::scalar<float>(0), synchronization::on_write,
             aggregation::mean);
    before = take_snapshot(s);
    VS_CHECK_CODE(restore(s, path, {"f", "n", "extra"}), checkpoint_mismatch);
    VS_CHECK_CODE(restore(s, path, {"f", "nope"}), checkpoint_mismatch);
  }
  SECTION("per-component entries into a variable with one value") {
    VS_REQUIRE_OK(s.destroy(local));
    make_var(s, "local", tensor::scalar<float>(0), synchronization::on_write,
             aggregation::mean);
    before = take_snapshot(s);
    VS_CHECK_CODE(restore(s, path, {"f", "local"}), checkpoint_mismatch);
  }
  CHECK(same(before, take_snapshot(s)));
}

TEST_CASE("K3: truncated and corrupt files fail with checkpoint_corrupt and "
          "change nothing") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto n = make_var(s, "n", tensor::scalar<int64_t>(0),
                    synchronization::on_read, aggregation::sum);
  make_var(s, "w", tensor::from_vector<float>({3}, {1, 2, 3}),
           synchronization::on_write, aggregation::mean);
  set_components(s, n, {4, 3});
  auto path = dir.file("good");
  VS_REQUIRE_OK(save(s, path));
  auto good = slurp(path);
  set_components(s, n, {1, 1});
  auto before = take_snapshot(s);
  auto bad = dir.file("bad");
  for (size_t len : {size_t{0}, size_t{3}, size_t{8}, size_t{20},
                     good.size() / 2, good.size() - 1}) {
    spit(bad, good.substr(0, len));
    VS_CHECK_CODE(restore(s, bad), checkpoint_corrupt);
  }
  auto garbage = good;
  garbage[8] = '#'; // the header's '{'
  spit(bad, garbage);
  VS_CHECK_CODE(restore(s, bad), checkpoint_corrupt);
  auto huge = good;
  huge[6] = '\x01'; // header length beyond the file
  spit(bad, huge);
  VS_CHECK_CODE(restore(s, bad), checkpoint_corrupt);
  CHECK(same(before, take_snapshot(s)));
  // A missing file is an error too (not a crash).
  CHECK(restore(s, dir.file("missing")));
}

TEST_CASE("K3: save is atomic and leaves no temporary file") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto v = make_var(s, "v", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::mean);
  auto path = dir.file("ckpt.safetensors");
  spit(path, "an older, unrelated file");
  VS_REQUIRE_OK(save(s, path));
  VS_REQUIRE_OK(s.assign(v, 2.0));
  VS_REQUIRE_OK(save(s, path));
  size_t files = 0;
  for (auto& entry : fs::directory_iterator(dir.files())) {
    ++files;
    CHECK(entry.path().filename() == "ckpt.safetensors");
  }
  CHECK(files == 1);
  CHECK(decode_file(path).find("v")->as_double(0) == 2);
  // A directory that does not exist: an error, and nothing left behind.
  CHECK(save(s, dir.file("no/such/dir/ckpt")));
  CHECK(std::distance(fs::directory_iterator(dir.files()),
                      fs::directory_iterator{}) == 1);
}

TEST_CASE("K2: async save / restore and the checkpoint actor") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto v = make_var(s, "v", tensor::scalar<int32_t>(0),
                    synchronization::on_read, aggregation::sum);
  set_components(s, v, {2, 3});
  auto path = dir.file("async");
  std::promise<caf::error> saved;
  save_async(s, path, {}, [&](caf::error err) { saved.set_value(err); });
  VS_REQUIRE_OK(saved.get_future().get());
  set_components(s, v, {0, 0});
  std::promise<caf::error> restored;
  restore_async(s, path, {"v"},
                [&](caf::error err) { restored.set_value(err); });
  VS_REQUIRE_OK(restored.get_future().get());
  CHECK(components(s, v) == std::vector<double>{3, 2});
  // The actor-facing way.
  auto ckpt = spawn_checkpoint_actor(s);
  caf::scoped_actor self{
    varsync::detail::strategy_access::core(s)->system()};
  set_components(s, v, {1, 1});
  caf::error err;
  bool ok = false;
  self->request(ckpt, 20s, checkpoint_save_atom::value, dir.file("actor"),
                std::vector<std::string>{})
    .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { err = e; });
  CHECK(ok);
  VS_REQUIRE_OK(err);
  set_components(s, v, {0, 0});
  ok = false;
  self->request(ckpt, 20s, checkpoint_restore_atom::value, dir.file("actor"),
                std::vector<std::string>{"v"})
    .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { err = e; });
  CHECK(ok);
  VS_REQUIRE_OK(err);
  CHECK(components(s, v) == std::vector<double>{1, 1});
  ok = false;
  self->request(ckpt, 20s, checkpoint_restore_atom::value, dir.file("none"),
                std::vector<std::string>{})
    .receive([&](ok_atom) { ok = true; }, [&](caf::error& e) { err = e; });
  CHECK_FALSE(ok);
  CHECK(err);
  self->send_exit(ckpt, caf::exit_reason::user_shutdown);
}

// -- checkpoint paths and checksums ------------------------------------------------

TEST_CASE("K3: restore from a FIFO fails promptly instead of blocking in "
          "open", "[one-process]") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto v = make_var(s, "v", tensor::scalar<float>(1),
                    synchronization::on_write, aggregation::sum);
  auto fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto before = take_snapshot(s);
  auto done = std::make_shared<std::promise<caf::error>>();
  auto outcome = done->get_future();
  restore_async(s, fifo, {}, [done](caf::error err) { done->set_value(err); });
  REQUIRE(outcome.wait_for(10s) == std::future_status::ready);
  auto err = outcome.get();
  VS_CHECK_CODE(err, invalid_argument);
  CHECK(message_of(err).find("not a regular file") != std::string::npos);
  CHECK(same(before, take_snapshot(s)));
  // The checkpoint actor answers the same.
  auto ckpt = spawn_checkpoint_actor(s);
  caf::scoped_actor self{
    varsync::detail::strategy_access::core(s)->system()};
  caf::error actor_err;
  self->request(ckpt, 10s, checkpoint_restore_atom::value, fifo,
                std::vector<std::string>{})
    .receive([&](ok_atom) {}, [&](caf::error& e) { actor_err = e; });
  VS_CHECK_CODE(actor_err, invalid_argument);
  self->send_exit(ckpt, caf::exit_reason::user_shutdown);
  (void) v;
}

TEST_CASE("K3: save refuses a FIFO, a directory, a socket and a symbolic "
          "link at the path and writes nothing", "[one-process]") {
  temp_dir dir;
  auto s = make_strategy(2);
  make_var(s, "v", tensor::scalar<float>(1), synchronization::on_write,
           aggregation::sum);
  auto fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto sub = dir.file("sub");
  fs::create_directory(sub);
  auto real = dir.file("real.safetensors");
  spit(real, "the link's target, unchanged");
  auto link = dir.file("link.safetensors");
  fs::create_symlink(real, link);
  auto dangling = dir.file("dangling.safetensors");
  fs::create_symlink(dir.file("nowhere"), dangling);
  auto count = [&] {
    return std::distance(fs::directory_iterator(dir.path),
                         fs::directory_iterator{});
  };
  auto files_before = count();
  struct target {
    std::string path;
    std::string says;
  };
  for (auto& t : {target{fifo, "a FIFO"}, target{sub, "a directory"},
                  target{link, "symbolic link"},
                  target{dangling, "symbolic link"}}) {
    INFO("target " << t.path);
    auto err = save(s, t.path);
    VS_CHECK_CODE(err, invalid_argument);
    CHECK(message_of(err).find(t.says) != std::string::npos);
  }
  // A socket. (Device nodes take the same branch; the test never points
  // save at a real one such as /dev/null: a regression would replace it.)
  auto sock_path = dir.file("sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(sock_path.size() < sizeof addr.sun_path);
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ++files_before;
  auto sock_err = save(s, sock_path);
  ::close(fd);
  VS_CHECK_CODE(sock_err, invalid_argument);
  CHECK(message_of(sock_err).find("a socket") != std::string::npos);
  CHECK(fs::is_socket(sock_path));
  CHECK(count() == files_before);
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_directory(sub));
  CHECK(fs::is_empty(sub));
  CHECK(fs::is_symlink(link));
  CHECK(slurp(real) == "the link's target, unchanged");
  // The target of the link itself is a regular file: saving there works.
  VS_REQUIRE_OK(save(s, real));
}

TEST_CASE("K3: a flipped byte in a tensor fails restore with "
          "checkpoint_corrupt naming it, and changes nothing",
          "[one-process]") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::from_vector<float>({3}, {1, 2, 3}),
                    synchronization::on_write, aggregation::sum);
  auto scratch = make_var(s, "scratch", tensor::scalar<int32_t>(0),
                          synchronization::none);
  set_components(s, scratch, {10, 20});
  auto path = dir.file("ckpt");
  VS_REQUIRE_OK(save(s, path));
  auto file = decode_file(path);
  for (auto* entry : {"w", "scratch/replica_0", "scratch/replica_1"})
    CHECK(file.metadata.count(std::string{entry} + ".fnv1a64") == 1);
  VS_REQUIRE_OK(s.assign(w, tensor::from_vector<float>({3}, {7, 8, 9})));
  set_components(s, scratch, {1, 2});
  auto before = take_snapshot(s);
  auto good = slurp(path);
  // The data section is the last 2 * 4 + 3 * 4 bytes: scratch/replica_0,
  // scratch/replica_1, then w (variables in name order).
  struct flip {
    size_t from_end;
    std::string entry;
  };
  for (auto& f : {flip{1, "'w'"}, flip{16, "'scratch/replica_1'"},
                  flip{20, "'scratch/replica_0'"}}) {
    INFO("entry " << f.entry);
    auto bad = good;
    bad[bad.size() - f.from_end] ^= 0x10;
    spit(dir.file("bad"), bad);
    auto err = restore(s, dir.file("bad"));
    VS_CHECK_CODE(err, checkpoint_corrupt);
    CHECK(message_of(err).find(f.entry) != std::string::npos);
    CHECK(same(before, take_snapshot(s)));
  }
  VS_REQUIRE_OK(restore(s, path));
  CHECK(VS_VALUE(s.read(w)).to_vector<float>()
        == std::vector<float>{1, 2, 3});
  CHECK(components(s, scratch) == std::vector<double>{10, 20});
}

TEST_CASE("K3: files without checksums (older files, other tools) still "
          "restore") {
  temp_dir dir;
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::from_vector<float>({2}, {1, 2}),
                    synchronization::on_write, aggregation::sum);
  auto bytes = safetensors::encode(
    {{"w", tensor::from_vector<float>({2}, {5, 6})}},
    {{"format", "varsync-checkpoint"}, {"format_version", "1"}});
  REQUIRE(bytes);
  spit(dir.file("old"), *bytes);
  VS_REQUIRE_OK(restore(s, dir.file("old")));
  CHECK(VS_VALUE(s.read(w)).to_vector<float>() == std::vector<float>{5, 6});
}
