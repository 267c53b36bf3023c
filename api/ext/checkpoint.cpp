#include "varsync/checkpoint.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "api/ext/safetensors_format.hpp"
#include "varsync/error.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

namespace {

namespace st = safetensors;

/// Largest per-component count a file may claim.
constexpr long long max_replicas_in_file = 1 << 20;

caf::error io_error(const std::string& what, const std::string& path,
                    int err) {
  return make_error(errc::invalid_argument, "checkpoint: cannot " + what
                                              + " '" + path
                                              + "': " + std::strerror(err));
}

constexpr uint64_t fnv_prime = 1099511628211ull;
constexpr uint64_t fnv_basis = 14695981039346656037ull;

// FNV-1a 64 of `n` bytes.
uint64_t fnv1a64(const void* data, size_t n) {
  uint64_t h = fnv_basis;
  auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= fnv_prime;
  }
  return h;
}

// FNV-1a 64 of a tensor's bytes as the file stores them (little-endian).
uint64_t fnv1a64(const tensor& t) {
  if constexpr (std::endian::native == std::endian::little) {
    return fnv1a64(t.raw(), t.nbytes());
  } else {
    constexpr uint64_t prime = fnv_prime;
    uint64_t h = fnv_basis;
    auto* p = static_cast<const unsigned char*>(t.raw());
    size_t n = t.nbytes();
    size_t w = size_of(t.type());
    for (size_t i = 0; i + w <= n; i += w)
      for (size_t b = w; b-- > 0;) {
        h ^= p[i + b];
        h *= prime;
      }
    return h;
  }
}

std::string hex64(uint64_t x) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, x >>= 4)
    out[static_cast<size_t>(i)] = digits[x & 0xf];
  return out;
}

/// Metadata key of an entry's checksum.
std::string checksum_key(const std::string& entry) {
  return entry + ".fnv1a64";
}

// save renames over `path`: only a missing path or a regular file may be
// replaced. A symbolic link is refused: rename would replace the link, not
// the file it points to.
caf::error check_save_target(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT)
      return {};
    return io_error("inspect", path, errno);
  }
  if (S_ISLNK(info.st_mode))
    return make_error(errc::invalid_argument,
                      "checkpoint: '" + path
                        + "' is a symbolic link; save replaces the path "
                          "itself, not the link's target: pass the target's "
                          "path");
  if (!S_ISREG(info.st_mode)) {
    const char* kind = S_ISDIR(info.st_mode)    ? "a directory"
                       : S_ISFIFO(info.st_mode) ? "a FIFO"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                       : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)
                         ? "a device node"
                         : "not a regular file";
    return make_error(errc::invalid_argument,
                      "checkpoint: '" + path + "' exists and is " + kind
                        + "; save only replaces regular files");
  }
  return {};
}

// Across processes the processes agree on an outcome (P15): every process
// returns `local` or the error of the process that failed. In one process,
// and in services mode (where the calling process alone saves): `local`.
caf::error agree_across(const strategy& s, std::string what,
                        caf::error local) {
  if (s.num_processes() <= 1)
    return local;
  return s.agree(std::move(local), std::move(what));
}

caf::error mismatch(std::string what) {
  return make_error(errc::checkpoint_mismatch,
                    "checkpoint: " + std::move(what));
}

// The variables that `names` select (all of them when empty). Unknown names
// fail with `unknown_code` naming the variable.
caf::expected<std::vector<variable>>
select_variables(const strategy& s, const std::vector<std::string>& names,
                 errc unknown_code) {
  if (names.empty())
    return s.variables();
  std::vector<variable> out;
  for (auto& name : names) {
    auto v = s.lookup(name);
    if (!v) {
      if (has_code(v.error(), errc::unknown_variable))
        return make_error(unknown_code, "checkpoint: variable '" + name
                                          + "' does not exist in the "
                                            "strategy");
      return v.error();
    }
    out.push_back(std::move(*v));
  }
  return out;
}

caf::error write_all(int fd, const std::string& bytes,
                     const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return io_error("write", path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

// Writes `bytes` to a temporary file next to `path`, fsyncs it, renames it
// over `path` and fsyncs the directory.
caf::error write_atomically(const std::string& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  auto tmp = path + ".tmp-" + std::to_string(::getpid()) + "-"
             + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error("create", tmp, errno);
  auto fail = [&](caf::error err) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    return err;
  };
  if (auto err = write_all(fd, bytes, tmp))
    return fail(std::move(err));
  if (::fsync(fd) != 0)
    return fail(io_error("fsync", tmp, errno));
  if (::close(fd) != 0) {
    fd = -1;
    return fail(io_error("close", tmp, errno));
  }
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail(io_error("rename onto", path, errno));
  auto dir = std::filesystem::path{path}.parent_path();
  if (dir.empty())
    dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    // The file is complete either way; a failing directory fsync only
    // weakens durability, so it is reported.
    int rc = ::fsync(dfd);
    int e = errno;
    ::close(dfd);
    if (rc != 0 && e != EINVAL)
      return io_error("fsync directory of", path, e);
  }
  return {};
}

caf::expected<std::vector<std::byte>> read_file(const strategy& s,
                                                const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; non-regular files are refused before any read.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return io_error("open", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return make_error(errc::invalid_argument,
                      "checkpoint: '" + path + "' is not a regular file");
  }
  // The file's bytes and the tensors decoded from them (about as many),
  // checked against the strategy's budget before either exists: a file
  // larger than memory is out_of_memory, not a process the kernel kills.
  auto size = static_cast<uint64_t>(info.st_size);
  const auto twice = size > std::numeric_limits<uint64_t>::max() / 2
                       ? std::numeric_limits<uint64_t>::max()
                       : size * 2;
  if (auto err = s.check_host_memory(twice, "checkpoint: restoring '" + path
                                              + "'")) {
    ::close(fd);
    return err;
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    ::close(fd);
    return io_error("read", path, e);
  }
  std::vector<std::byte> out;
  try {
    out.resize(static_cast<size_t>(info.st_size));
  } catch (const std::exception&) {
    ::close(fd);
    return make_error(errc::out_of_memory,
                      "checkpoint: cannot hold '" + path + "' in memory");
  }
  size_t done = 0;
  while (done < out.size()) {
    auto n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      ::close(fd);
      return io_error("read", path, e);
    }
    if (n == 0)
      break; // shrank while reading: decode sees a truncated file
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

// What a file holds for one variable: one value, or one per component.
struct stored_value {
  bool per_component = false;
  std::vector<tensor> values;
};

caf::expected<stored_value> find_stored(const st::decoded_file& file,
                                        const std::string& name) {
  stored_value out;
  if (auto* t = file.find(name)) {
    out.values.push_back(*t);
    return out;
  }
  out.per_component = true;
  auto lost = file.metadata.find(name + ".missing_replicas");
  if (lost != file.metadata.end())
    return mismatch("variable '" + name
                    + "' was saved from surviving replicas only: components "
                    + lost->second
                    + " are missing; restore the other variables by name");
  auto meta = file.metadata.find(name + ".replicas");
  if (meta != file.metadata.end()) {
    long long n = -1;
    try {
      size_t used = 0;
      n = std::stoll(meta->second, &used);
      if (used != meta->second.size())
        n = -1;
    } catch (const std::exception&) {
      n = -1;
    }
    if (n < 1 || n > max_replicas_in_file)
      return make_error(errc::checkpoint_corrupt,
                        "checkpoint: metadata '" + name + ".replicas' = '"
                          + meta->second + "' is not a replica count");
    for (int r = 0; r < static_cast<int>(n); ++r) {
      auto* t = file.find(component_entry_name(name, r));
      if (!t)
        return make_error(errc::checkpoint_corrupt,
                          "checkpoint: variable '" + name + "' has "
                            + std::to_string(n) + " components but entry '"
                            + component_entry_name(name, r) + "' is missing");
      out.values.push_back(*t);
    }
    return out;
  }
  // No metadata (a file written by another tool): consecutive entries.
  for (int r = 0;; ++r) {
    auto* t = file.find(component_entry_name(name, r));
    if (!t)
      break;
    out.values.push_back(*t);
  }
  if (out.values.empty())
    return mismatch("variable '" + name + "' is not in the checkpoint");
  return out;
}

} // namespace

std::string component_entry_name(const std::string& variable, int r) {
  return variable + "/replica_" + std::to_string(r);
}

namespace {

std::string join_indices(const std::vector<int>& xs) {
  std::string out;
  for (auto x : xs)
    out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// The components that survive, by global replica id: across processes
// this process holds first_local_replica() on, and the others' replicas
// count as missing.
caf::error live_components(const strategy& s, const variable& v,
                           std::vector<std::optional<tensor>>& live,
                           std::vector<int>& missing) {
  auto values = s.survivor_values(v);
  if (!values)
    return values.error();
  live.resize(static_cast<size_t>(s.num_replicas()));
  const auto first = static_cast<size_t>(s.first_local_replica());
  for (size_t r = 0; r < values->size() && first + r < live.size(); ++r)
    live[first + r] = std::move((*values)[r]);
  for (size_t r = 0; r < live.size(); ++r)
    if (!live[r])
      missing.push_back(static_cast<int>(r));
  return {};
}

// Every component is there: exactly what save writes.
caf::error add_complete(const strategy& s, const variable& v,
                        std::vector<st::named_tensor>& tensors,
                        std::map<std::string, std::string>& meta) {
  auto& name = v.name();
  if (is_per_component(v)) {
    // Every replica's, from every process (one process: its own).
    auto values = s.all_values(v);
    if (!values)
      return values.error();
    meta[name + ".per_component"] = "true";
    meta[name + ".replicas"] = std::to_string(values->size());
    for (size_t r = 0; r < values->size(); ++r)
      tensors.push_back({component_entry_name(name, static_cast<int>(r)),
                         std::move((*values)[r])});
  } else {
    auto value = s.read(v);
    if (!value)
      return value.error();
    meta[name + ".per_component"] = "false";
    tensors.push_back({name, std::move(*value)});
  }
  return {};
}

// `why` names the variable (value_of_survivors' message).
caf::error lost_error(const strategy& s, const std::vector<int>& missing,
                      const std::string& why) {
  return make_error(errc::replica_failed,
                    "checkpoint: replica(s) " + join_indices(missing)
                      + (s.num_processes() > 1
                           ? " failed or live in other processes: "
                           : " failed: ")
                      + why);
}

// Some components are missing: the live ones (per component) or the value
// the variable's survivor rule allows.
caf::error add_survivors(const strategy& s, const variable& v,
                         const survivor_options& survivors,
                         std::vector<std::optional<tensor>>& live,
                         const std::vector<int>& missing,
                         std::vector<st::named_tensor>& tensors,
                         std::map<std::string, std::string>& meta) {
  auto& name = v.name();
  if (is_per_component(v)) {
    // The live components; the missing ones are named in the metadata and
    // restore refuses the variable.
    meta[name + ".per_component"] = "true";
    meta[name + ".replicas"] = std::to_string(live.size());
    meta[name + ".missing_replicas"] = join_indices(missing);
    for (size_t r = 0; r < live.size(); ++r)
      if (live[r])
        tensors.push_back({component_entry_name(name, static_cast<int>(r)),
                           std::move(*live[r])});
    return {};
  }
  meta[name + ".per_component"] = "false";
  // K6 (value_of_survivors): without aggregating, the value the live
  // components hold; else, where it takes an aggregation, only with
  // aggregate_survivors, and marked.
  auto value = value_of_survivors(v, live, false);
  if (value) {
    tensors.push_back({name, std::move(*value)});
    return {};
  }
  if (!has_code(value.error(), errc::replica_failed))
    return value.error();
  auto aggregated = value_of_survivors(v, live, true);
  if (!aggregated)
    return lost_error(s, missing, message_of(aggregated.error()));
  if (!survivors.aggregate_survivors)
    return lost_error(s, missing,
                      message_of(value.error())
                        + "; set survivor_options::aggregate_survivors to "
                          "store the aggregation of the surviving "
                          "components only");
  std::vector<int> present_ids;
  for (size_t r = 0; r < live.size(); ++r)
    if (live[r])
      present_ids.push_back(static_cast<int>(r));
  meta[name + ".survivors_only"] = "true";
  meta[name + ".aggregated_replicas"] = join_indices(present_ids);
  tensors.push_back({name, std::move(*aggregated)});
  return {};
}

// The entries of one variable: `survivors` set when saving what survives a
// replica failure (save_survivors), empty for a plain save.
caf::error add_variable(const strategy& s, const variable& v,
                        const survivor_options* survivors,
                        std::vector<st::named_tensor>& tensors,
                        std::map<std::string, std::string>& meta,
                        std::vector<int>& missing_anywhere) {
  auto& name = v.name();
  std::vector<std::optional<tensor>> live;
  std::vector<int> missing;
  if (survivors != nullptr)
    if (auto err = live_components(s, v, live, missing))
      return err;
  meta[name + ".synchronization"] = std::string{to_string(v.synchronization())};
  meta[name + ".aggregation"] = std::string{to_string(v.aggregation())};
  meta[name + ".trainable"] = v.trainable() ? "true" : "false";
  if (missing.empty())
    return add_complete(s, v, tensors, meta);
  for (auto r : missing)
    if (std::find(missing_anywhere.begin(), missing_anywhere.end(), r)
        == missing_anywhere.end())
      missing_anywhere.push_back(r);
  return add_survivors(s, v, *survivors, live, missing, tensors, meta);
}

} // namespace

std::string process_file(const std::string& path, int rank) {
  // Before the extension of the last path component, if it has one.
  auto slash = path.find_last_of('/');
  auto dot = path.find_last_of('.');
  auto at = dot == std::string::npos
                || (slash != std::string::npos && dot < slash)
                || dot == (slash == std::string::npos ? 0 : slash + 1)
              ? path.size()
              : dot;
  return path.substr(0, at) + ".process" + std::to_string(rank)
         + path.substr(at);
}

namespace {

caf::error save_impl(const strategy& s, const std::string& path,
                     const std::vector<std::string>& names,
                     const survivor_options* survivors) {
  // Across processes (P9) every process reads (the reads are collectives)
  // and process 0 writes the file; they agree on its outcome. In services
  // mode the calling process alone saves: its reads are ordered operations.
  // save_survivors needs no other process (a lost one ends the group):
  // each process that calls it writes what it holds to a file of its own.
  const bool alone = survivors != nullptr && s.num_processes() > 1;
  const bool writer = s.process_rank() == 0 || s.services_mode() || alone;
  auto agree = [&](const char* what, caf::error local) {
    return alone ? local : agree_across(s, what, std::move(local));
  };
  const std::string target = alone ? process_file(path, s.process_rank())
                                   : path;
  auto vars = select_variables(s, names, errc::unknown_variable);
  // Names need no check here: creation refused any that restore would
  // refuse (C9).
  caf::error checked = vars ? caf::error{} : vars.error();
  if (!checked && writer)
    checked = check_save_target(target);
  if (auto err = agree("save of a checkpoint", std::move(checked)))
    return err;
  std::vector<st::named_tensor> tensors;
  std::map<std::string, std::string> meta;
  meta["format"] = checkpoint_format_tag;
  meta["format_version"] = checkpoint_format_version;
  meta["replicas"] = std::to_string(s.num_replicas());
  if (alone) {
    meta["process_rank"] = std::to_string(s.process_rank());
    meta["process_replicas"]
      = std::to_string(s.first_local_replica()) + ".."
        + std::to_string(s.first_local_replica() + s.num_local_replicas() - 1);
  }
  std::vector<int> missing;
  for (auto& v : *vars)
    if (auto err = add_variable(s, v, survivors, tensors, meta, missing))
      return err;
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    meta["missing_replicas"] = join_indices(missing);
  }
  // Restore verifies each entry's bytes against its checksum.
  for (auto& t : tensors)
    meta[checksum_key(t.name)] = hex64(fnv1a64(t.value));
  auto bytes = st::encode(tensors, meta);
  if (!bytes)
    return bytes.error();
  if (!writer)
    return agree_across(s, "checkpoint written", {});
  // Checked again: the path may have changed while the values were read.
  auto written = check_save_target(target);
  if (!written)
    written = write_atomically(target, *bytes);
  if (s.num_processes() <= 1 || alone)
    return written;
  return agree_across(s, "checkpoint written", std::move(written));
}

template <class F>
void on_own_thread(const strategy& s, std::string path,
                   std::vector<std::string> names, done_callback done, F fn) {
  std::thread{[s = std::optional<strategy>{s}, path = std::move(path),
               names = std::move(names), done = std::move(done),
               fn = std::move(fn)]() mutable {
    auto err = fn(*s, path, names);
    s.reset(); // before `done`: the outcome arrives after the handle is gone
    if (done)
      done(std::move(err));
  }}.detach();
}

} // namespace

caf::error save(const strategy& s, const std::string& path,
                const std::vector<std::string>& names) {
  return save_impl(s, path, names, nullptr);
}

caf::error save_survivors(const strategy& s, const std::string& path,
                          const std::vector<std::string>& names,
                          survivor_options options) {
  return save_impl(s, path, names, &options);
}

void save_survivors_async(const strategy& s, std::string path,
                          std::vector<std::string> names,
                          survivor_options options, done_callback done) {
  on_own_thread(s, std::move(path), std::move(names), std::move(done),
                [options](const strategy& s, const std::string& path,
                          const std::vector<std::string>& names) {
                  return save_survivors(s, path, names, options);
                });
}

namespace {

using restore_plan = std::vector<std::pair<variable, stored_value>>;

// Reads and validates everything (K3) before anything changes. `digest`:
// the file's fingerprint, which the processes compare.
caf::error plan_restore(const strategy& s, const std::string& path,
                        const std::vector<std::string>& names,
                        restore_plan& plan, std::string& digest) {
  auto bytes = read_file(s, path);
  if (!bytes)
    return bytes.error();
  digest = hex64(fnv1a64(bytes->data(), bytes->size()));
  auto file = st::decode(std::span<const std::byte>{*bytes});
  if (!file)
    return file.error();
  bytes->clear();
  bytes->shrink_to_fit();
  auto vars = select_variables(s, names, errc::checkpoint_mismatch);
  if (!vars)
    return vars.error();
  for (auto& v : *vars) {
    auto stored = find_stored(*file, v.name());
    if (!stored)
      return stored.error();
    for (size_t r = 0; r < stored->values.size(); ++r) {
      auto& t = stored->values[r];
      auto entry = stored->per_component
                     ? component_entry_name(v.name(), static_cast<int>(r))
                     : v.name();
      if (t.type() != v.type())
        return mismatch("entry '" + entry + "' has dtype "
                        + std::string{to_string(t.type())} + ", variable '"
                        + v.name() + "' has dtype "
                        + std::string{to_string(v.type())});
      if (t.shape() != v.shape())
        return mismatch("entry '" + entry + "' has shape "
                        + to_string(t.shape()) + ", variable '" + v.name()
                        + "' has shape " + to_string(v.shape()));
      // Files without checksums (older ones, other tools) are accepted.
      auto sum = file->metadata.find(checksum_key(entry));
      if (sum != file->metadata.end() && sum->second != hex64(fnv1a64(t)))
        return make_error(errc::checkpoint_corrupt,
                          "checkpoint: entry '" + entry
                            + "': its bytes do not match the checksum "
                              "(fnv1a64 "
                            + sum->second + ") recorded in the file");
    }
    if (stored->per_component) {
      if (!is_per_component(v))
        return mismatch("variable '" + v.name()
                        + "' is stored per component but is "
                        + std::string{to_string(v.synchronization())} + " / "
                        + std::string{to_string(v.aggregation())}
                        + ", which has one value");
      if (static_cast<int>(stored->values.size()) != s.num_replicas())
        return mismatch("variable '" + v.name() + "' has "
                        + std::to_string(stored->values.size())
                        + " components in the checkpoint, the strategy has "
                        + std::to_string(s.num_replicas()) + " replicas");
    }
    plan.emplace_back(v, std::move(*stored));
  }
  return {};
}

} // namespace

caf::error restore(const strategy& s, const std::string& path,
                   const std::vector<std::string>& names) {
  restore_plan plan;
  std::string digest;
  auto checked = plan_restore(s, path, names, plan, digest);
  // Across processes every process reads the file (a path all of them
  // see): they agree that each read the same bytes and found them valid.
  if (s.num_processes() > 1) {
    if (auto err = agree_across(
          s, "restore of checkpoint #" + (checked ? std::string{"?"} : digest),
          std::move(checked)))
      return err;
  } else if (checked) {
    return checked;
  }
  // In services mode a step reaches this process's replicas only.
  if (s.services_mode())
    for (auto& [v, stored] : plan)
      if (stored.per_component)
        return make_error(
          errc::invalid_argument,
          "restore: '" + v.name()
            + "' is stored per replica, and services mode cannot set the "
              "components of other processes' replicas (restore in training "
              "mode, where every process calls restore); nothing was "
              "changed");
  // Apply (K2): one value -> assign (on_read + sum splits as in R4, the
  // other policies set every component); per-component entries -> one step.
  std::vector<std::pair<variable, const std::vector<tensor>*>> components;
  for (auto& [v, stored] : plan) {
    if (stored.per_component) {
      components.emplace_back(v, &stored.values);
      continue;
    }
    if (auto err = s.assign(v, stored.values.front()))
      return err;
  }
  if (!components.empty()) {
    std::vector<caf::error> errors(static_cast<size_t>(s.num_replicas()));
    auto err = s.run([&](replica_context& ctx) {
      auto r = static_cast<size_t>(ctx.replica_id());
      for (auto& [v, values] : components)
        if (auto e = ctx.assign(v, (*values)[r])) {
          errors[r] = std::move(e);
          return;
        }
    });
    if (err)
      return err;
    for (auto& e : errors)
      if (e)
        return e;
  }
  return {};
}

void save_async(const strategy& s, std::string path,
                std::vector<std::string> names, done_callback done) {
  on_own_thread(s, std::move(path), std::move(names), std::move(done),
                [](const strategy& s, const std::string& path,
                   const std::vector<std::string>& names) {
                  return save(s, path, names);
                });
}

void restore_async(const strategy& s, std::string path,
                   std::vector<std::string> names, done_callback done) {
  on_own_thread(s, std::move(path), std::move(names), std::move(done),
                [](const strategy& s, const std::string& path,
                   const std::vector<std::string>& names) {
                  return restore(s, path, names);
                });
}

} // namespace varsync
