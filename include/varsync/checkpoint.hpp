#pragma once
// Checkpoints: save / restore a strategy's variables to / from a file in the
// safetensors layout (docs/checkpoints.md; rules K1-K4 of docs/semantics.md).
//
// Save (K1) writes, per variable: on_write -> the primary component; on_read
// with sum / mean / only_first_replica -> the cross-replica read value; on_read
// with aggregation none and synchronization none -> every component, as
// "<name>/replica_<r>". The file is written to "<path>.tmp-<pid>-<n>",
// fsync'ed, renamed over `path`, and the directory is fsync'ed: a crash never
// leaves a torn checkpoint at `path`.
//
// Restore (K2, K3) reads and validates the whole file and every requested
// variable (present in the strategy and the file, same dtype and shape, N
// per-component entries where the variable is per-component) before it
// changes anything; then on_read + sum splits the value as in R4, per-component
// entries go back to their replicas, everything else is assigned to every
// component.

#include <string>
#include <vector>

#include <caf/error.hpp>

#include "varsync/strategy.hpp"

namespace varsync {

/// Metadata value of key "format" in varsync checkpoints.
inline constexpr const char* checkpoint_format_tag = "varsync-checkpoint";
/// Version of the metadata layout (key "format_version").
inline constexpr const char* checkpoint_format_version = "1";

/// The file's tensor name of component `r` of a per-component variable.
std::string component_entry_name(const std::string& variable, int r);

/// Saves `names` (empty: every variable of `s`) to `path`, atomically, with
/// a checksum of every entry. Errors: unknown_variable,
/// no_cross_replica_value (from reads), invalid_argument (the file cannot be
/// written, or `path` exists and is not a regular file: a directory, FIFO,
/// device node, socket or a symbolic link), timeout, shut_down.
caf::error save(const strategy& s, const std::string& path,
                const std::vector<std::string>& names = {});

/// What save_survivors does where a component is lost.
struct survivor_options {
  /// on_read + sum / mean: store the sum / mean of the surviving components
  /// (marked "<name>.survivors_only" in the metadata) instead of refusing.
  bool aggregate_survivors = false;
};

/// Saves what survives a replica failure (docs/checkpoints.md): like save()
/// where no component of a variable is lost; otherwise on_write -> a live
/// component (they are equal, W7); on_read + only_first_replica -> component
/// 0, replica_failed if it is lost; on_read + sum / mean -> replica_failed
/// (the value is unknown) unless options.aggregate_survivors; per-component
/// variables -> the live components, the lost ones named in
/// "<name>.missing_replicas" (restore refuses such a variable). The file's
/// "missing_replicas" names every lost replica. Nothing is written unless
/// every variable can be saved.
///
/// Across processes (P9) it needs no other process: each process that calls
/// it writes the components of its own replicas that survive to a file of
/// its own, process_file(path, its rank) ("rescue.safetensors" ->
/// "rescue.process2.safetensors"); the other processes' replicas count as
/// missing (so on_read + only_first_replica saves only in process 0, and
/// on_read + sum / mean need options.aggregate_survivors).
caf::error save_survivors(const strategy& s, const std::string& path,
                          const std::vector<std::string>& names = {},
                          survivor_options options = {});

/// The file save_survivors writes in process `rank` of a strategy across
/// processes: `path` with ".process<rank>" before its extension.
std::string process_file(const std::string& path, int rank);

/// Restores `names` (empty: every variable of `s`) from `path`.
/// Errors: checkpoint_corrupt (unreadable layout, or an entry whose bytes do
/// not match its checksum), checkpoint_mismatch (a
/// variable missing from the strategy or the file, another dtype, shape or
/// replica count), invalid_argument (the file cannot be read or is not a
/// regular file; never blocks on a FIFO). Nothing changes unless every check
/// passes.
caf::error restore(const strategy& s, const std::string& path,
                   const std::vector<std::string>& names = {});

/// The same without blocking the caller: the work runs on a thread of its
/// own, `done` gets the outcome there. The thread holds a handle to `s` until
/// the work is done and releases it before `done` runs; when it is the last
/// one, the strategy shuts down (await_strategy_shutdowns).
void save_async(const strategy& s, std::string path,
                std::vector<std::string> names, done_callback done);
void restore_async(const strategy& s, std::string path,
                   std::vector<std::string> names, done_callback done);
void save_survivors_async(const strategy& s, std::string path,
                          std::vector<std::string> names,
                          survivor_options options, done_callback done);

} // namespace varsync
