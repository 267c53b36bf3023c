#include "sync/collectives/agreement.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "varsync/error.hpp"

namespace varsync {

using namespace cross_process_wire;

namespace {

// FNV-1a, then a final mix: the processes compare these, nothing secret.
struct hasher {
  uint64_t h = 1469598103934665603ull;
  void add(const void* data, size_t n) {
    auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  }
  template <class T>
  void add_value(T v) {
    add(&v, sizeof(v));
  }
};

void put_text(agreement_record& r, const std::string& s) {
  auto n = std::min(s.size(), sizeof(r.text) - 1);
  std::memcpy(r.text, s.data(), n);
  r.text[n] = '\0';
}

} // namespace

caf::error agreement_round(const collective_plan& plan, process_group& group,
                           std::span<const std::byte> payload,
                           std::vector<agreement_message>& all,
                           const caf::error& local_error) {
  agreement_message mine_msg{};
  auto& mine = mine_msg.record;
  if (!payload.empty())
    std::memcpy(mine_msg.payload, payload.data(),
                std::min(payload.size(), small_payload_limit));
  mine.fingerprint = fingerprint_of(plan);
  mine.busy_micros = group.rounds().busy_micros();
  if (local_error) {
    auto code = code_of(local_error);
    mine.code = static_cast<uint32_t>(code == errc::none ? errc::replica_failed
                                                         : code);
    put_text(mine, code == errc::none ? caf::to_string(local_error)
                                      : message_of(local_error));
  } else {
    put_text(mine, plan.description);
  }
  std::vector<agreement_message> msgs(static_cast<size_t>(group.size()));
  const auto arrived = std::chrono::steady_clock::now();
  if (auto err = group.transport().all_gather(&mine_msg, msgs.data(),
                                              sizeof(mine_msg)))
    return err;
  std::vector<uint32_t> busy;
  for (auto& m : msgs)
    busy.push_back(m.record.busy_micros);
  group.rounds().record(busy, group.rank(),
                        std::chrono::steady_clock::now() - arrived,
                        plan.description);
  all = std::move(msgs);
  std::vector<agreement_record*> recs;
  for (auto& m : all) {
    m.record.text[sizeof(m.record.text) - 1] = '\0';
    recs.push_back(&m.record);
  }
  auto at = [&recs](size_t r) -> agreement_record& { return *recs[r]; };
  // A local failure first: this process's own error is the best one here.
  if (local_error)
    return local_error;
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).code > static_cast<uint32_t>(errc::fenced))
      return make_error(errc::replica_failed,
                        "process " + std::to_string(r)
                          + " sent an agreement record with the unknown "
                            "error code "
                          + std::to_string(at(r).code) + " for "
                          + plan.description + "; nothing was changed");
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).code != 0)
      return make_error(static_cast<errc>(at(r).code),
                        "process " + std::to_string(r) + " failed "
                          + plan.description + ": " + at(r).text
                          + "; nothing was changed");
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).fingerprint != at(0).fingerprint)
      return make_error(errc::mismatched_replica_updates,
                        "the processes issued different operations: process "
                          + std::to_string(r) + " issued " + at(r).text
                          + " while process 0 issued " + at(0).text
                          + "; nothing was changed");
  return {};
}


caf::error agree_across_processes(const collective_plan& plan,
                                  process_group& group,
                                  const caf::error& local) {
  std::vector<agreement_message> all;
  return agreement_round(plan, group, {}, all,
                         local ? local : plan.local_error);
}

caf::error agree_stating(const collective_plan& plan, process_group& group) {
  auto& stated = *plan.stated;
  if (stated.mine.size() > small_payload_limit)
    return make_error(errc::invalid_argument,
                      plan.description + ": a statement of "
                        + std::to_string(stated.mine.size())
                        + " bytes does not fit the agreement round");
  std::vector<agreement_message> all;
  if (auto err = agreement_round(plan, group, stated.mine, all,
                                 plan.local_error))
    return err;
  stated.all.clear();
  for (auto& m : all)
    stated.all.emplace_back(m.payload, m.payload + small_payload_limit);
  return {};
}

caf::error vote_across_processes(const caf::error& local, process_group& group,
                                 const std::string& what) {
  struct commit_record {
    uint32_t code = 0; // errc, 0: can apply
    char text[124] = {};
  };
  commit_record mine;
  if (local) {
    auto code = code_of(local);
    mine.code = static_cast<uint32_t>(code == errc::none ? errc::replica_failed
                                                         : code);
    auto msg = code == errc::none ? caf::to_string(local) : message_of(local);
    auto n = std::min(msg.size(), sizeof(mine.text) - 1);
    std::memcpy(mine.text, msg.data(), n);
  }
  std::vector<commit_record> all(static_cast<size_t>(group.size()));
  if (auto err = group.transport().all_gather(&mine, all.data(), sizeof(mine)))
    return local ? local : err;
  if (local)
    return local;
  for (size_t r = 0; r < all.size(); ++r) {
    auto& v = all[r];
    if (v.code == 0)
      continue;
    v.text[sizeof(v.text) - 1] = '\0';
    const auto code = v.code > static_cast<uint32_t>(errc::fenced)
                        ? errc::replica_failed
                        : static_cast<errc>(v.code);
    return make_error(code, "process " + std::to_string(r) + " could not "
                              "complete " + what + ": " + v.text
                              + "; nothing was changed");
  }
  return {};
}

uint64_t fingerprint_of_bytes(const void* data, size_t bytes) {
  hasher h;
  // Eight bytes at a time: values may be large.
  auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h.h = (h.h ^ w) * 0x100000001b3ull;
    h.h ^= h.h >> 29;
  }
  h.add(p + i, bytes - i);
  h.add_value(bytes);
  return h.h;
}

uint64_t fingerprint_of(const collective_plan& plan) {
  hasher h;
  h.add(plan.description.data(), plan.description.size());
  h.add_value(plan.items.size());
  for (auto& item : plan.items) {
    h.add(item.name.data(), item.name.size());
    h.add_value(static_cast<uint8_t>(item.type));
    // A scatter's rows are this process's own (S1): what must agree is the
    // op and the row length, not how many rows each process names.
    h.add_value(item.scatter ? item.row_elems : item.count);
    h.add_value(item.scatter);
    h.add_value(static_cast<uint8_t>(item.sop));
    h.add_value(static_cast<uint8_t>(item.rop));
    h.add_value(item.first_only);
    h.add_value(item.require_equal);
    h.add_value(item.gather);
    h.add_value(item.from_process);
    h.add_value(static_cast<uint8_t>(item.uop));
    h.add_value(static_cast<uint8_t>(item.source));
    h.add_value(static_cast<uint8_t>(item.target));
  }
  return h.h;
}

} // namespace varsync
