// Services mode's group commit (actors/coordinator/group_commit.hpp).

#include "actors/coordinator/group_commit.hpp"

#include <algorithm>
#include <cstring>

#include "sync/collectives/agreement.hpp"
#include "varsync/error.hpp"

namespace varsync::group_commit {

namespace {

// The statement on the wire: this header, then `count` records.
struct header {
  uint64_t first = 0;
  uint32_t count = 0;
  uint32_t reserved = 0;
};

struct record {
  uint64_t fingerprint = 0;
  uint32_t verdict = 0;
  uint32_t reserved = 0;
};

constexpr size_t statement_bytes(size_t count) {
  return sizeof(header) + count * sizeof(record);
}

static_assert(statement_bytes(max_operations)
              <= cross_process_wire::small_payload_limit);

caf::error bad_statement(size_t process, const std::string& why) {
  return make_error(errc::replica_failed,
                    "process " + std::to_string(process)
                      + " stated a group of updates no process can have "
                        "meant ("
                      + why + "); nothing was changed");
}

} // namespace

std::vector<std::byte> state(uint64_t first, std::span<const entry> entries) {
  const auto n = std::min(entries.size(), max_operations);
  std::vector<std::byte> out(statement_bytes(n));
  header h{first, static_cast<uint32_t>(n), 0};
  std::memcpy(out.data(), &h, sizeof(h));
  for (size_t i = 0; i < n; ++i) {
    record r{entries[i].fingerprint, entries[i].verdict, 0};
    std::memcpy(out.data() + statement_bytes(i), &r, sizeof(r));
  }
  return out;
}

uint64_t fingerprint_of_update(const std::string& variable, update_op op,
                               const tensor& value) {
  std::vector<unsigned char> key(variable.begin(), variable.end());
  key.push_back(0);
  key.push_back(static_cast<unsigned char>(op));
  key.push_back(static_cast<unsigned char>(value.type()));
  for (auto d : value.shape()) {
    unsigned char b[sizeof(d)];
    std::memcpy(b, &d, sizeof(d));
    key.insert(key.end(), b, b + sizeof(d));
  }
  const auto h = fingerprint_of_bytes(key.data(), key.size());
  return h ^ (fingerprint_of_bytes(value.raw(), value.nbytes()) * 31);
}

caf::expected<decision> decide(uint64_t first,
                               const std::vector<std::vector<std::byte>>& all) {
  if (all.empty())
    return make_error(errc::replica_failed,
                      "a group of updates was decided by no process");
  std::vector<header> heads(all.size());
  size_t taken = max_operations;
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p].size() < sizeof(header))
      return bad_statement(p, "too short");
    std::memcpy(&heads[p], all[p].data(), sizeof(header));
    const auto& h = heads[p];
    if (h.count == 0 || h.count > max_operations
        || all[p].size() < statement_bytes(h.count))
      return bad_statement(p, std::to_string(h.count) + " updates");
    if (h.first != first)
      return bad_statement(p, "it starts at update " + std::to_string(h.first)
                                + ", this process at "
                                + std::to_string(first));
    taken = std::min<size_t>(taken, h.count);
  }
  auto at = [&all](size_t p, size_t i) {
    record r;
    std::memcpy(&r, all[p].data() + statement_bytes(i), sizeof(r));
    return r;
  };
  decision d;
  d.taken = taken;
  d.outcomes.resize(taken);
  for (size_t i = 0; i < taken; ++i) {
    auto& o = d.outcomes[i];
    for (size_t p = 0; p < all.size() && o.code == 0; ++p) {
      const auto r = at(p, i);
      if (r.verdict > static_cast<uint32_t>(errc::fenced))
        return bad_statement(p, "the unknown error code "
                                  + std::to_string(r.verdict));
      if (r.verdict != 0)
        o = {r.verdict, static_cast<int>(p)};
    }
    for (size_t p = 1; p < all.size() && o.code == 0; ++p)
      if (at(p, i).fingerprint != at(0, i).fingerprint)
        o = {static_cast<uint32_t>(errc::mismatched_replica_updates),
             static_cast<int>(p)};
  }
  return d;
}

caf::error failed_elsewhere(const outcome& o, const std::string& what) {
  const auto code = static_cast<errc>(o.code);
  if (code == errc::mismatched_replica_updates)
    return make_error(code, "the processes hold different updates in one "
                            "place of the order: process "
                              + std::to_string(o.process) + " and process 0 ("
                              + what + " here); nothing was changed");
  std::string text = "process ";
  text.append(std::to_string(o.process))
    .append(" failed ")
    .append(what)
    .append(" (")
    .append(to_string(code))
    .append("); nothing was changed");
  return make_error(code, std::move(text));
}

} // namespace varsync::group_commit
