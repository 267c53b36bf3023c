#include "actors/cluster/etcd_arbiter.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "actors/cluster/http_post.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using json = nlohmann::json;

constexpr char b64_chars[]
  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += b64_chars[(acc >> bits) & 63];
    }
  }
  if (bits > 0)
    out += b64_chars[(acc << (6 - bits)) & 63];
  while (out.size() % 4 != 0)
    out += '=';
  return out;
}

std::string unbase64(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const char* at = std::strchr(b64_chars, c);
    if (c == '=' || c == '\0' || at == nullptr)
      break;
    acc = (acc << 6) | static_cast<uint32_t>(at - b64_chars);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// etcd's gateway writes 64-bit integers as strings; absent means 0.
uint64_t number(const json& j, const char* field) {
  if (!j.is_object() || !j.contains(field))
    return 0;
  const auto& v = j[field];
  if (v.is_number_unsigned())
    return v.get<uint64_t>();
  if (v.is_number_integer())
    return static_cast<uint64_t>(std::max<int64_t>(v.get<int64_t>(), 0));
  if (v.is_string()) {
    try {
      return std::stoull(v.get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

} // namespace

struct etcd_arbiter::impl {
  etcd_arbiter_options options;
  std::string key; // base64
  uint64_t held = 0;
  std::string lease; // its id, as etcd writes it

  std::string who() const {
    return "etcd arbiter http://" + options.host + ":"
           + std::to_string(options.port) + " key " + options.lead.path
           + ", process " + std::to_string(options.lead.rank);
  }

  std::chrono::milliseconds call_timeout() const {
    return std::max(options.lead.lease / 3, std::chrono::milliseconds{100});
  }

  caf::expected<json> call(const std::string& path, const json& body) const {
    auto answer = http_post_json(options.host, options.port, path,
                                 body.dump(), call_timeout());
    if (!answer)
      return make_error(errc::replica_failed,
                        who() + ": " + message_of(answer.error()));
    auto j = json::parse(*answer, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return make_error(errc::replica_failed,
                        who() + ": " + path + " answered no JSON object");
    return j;
  }

  // The key's record: {create revision, rank, pid}, or epoch 0 for none.
  caf::expected<lead> read() const {
    auto r = call("/v3/kv/range", {{"key", key}});
    if (!r)
      return std::move(r.error());
    lead out;
    if (!r->contains("kvs") || !(*r)["kvs"].is_array()
        || (*r)["kvs"].empty())
      return out;
    const auto& kv = (*r)["kvs"][0];
    out.epoch = number(kv, "create_revision");
    auto value = json::parse(unbase64(kv.value("value", "")), nullptr, false);
    out.rank = value.is_object() ? value.value("rank", -1) : -1;
    out.pid = value.is_object() ? value.value("pid", 0) : 0;
    out.alive = out.leased = true;
    return out;
  }

  std::string describe_lead(const caf::expected<lead>& l) const {
    if (!l)
      return "unknown (" + message_of(l.error()) + ")";
    if (l->epoch == 0)
      return "held by nobody";
    return "in epoch " + std::to_string(l->epoch) + ", process "
           + std::to_string(l->rank);
  }

  void revoke(const std::string& id) const {
    (void) call("/v3/lease/revoke", {{"ID", id}});
  }
};

caf::expected<std::unique_ptr<etcd_arbiter>>
etcd_arbiter::open(etcd_arbiter_options options) {
  if (options.host.empty() || options.lead.path.empty()
      || options.lead.rank < 0 || options.lead.lease.count() <= 0)
    return make_error(errc::invalid_argument,
                      "etcd arbiter: expected a host, a key, a rank of 0 or "
                      "more and a positive lease (host '"
                        + options.host + "', key '" + options.lead.path
                        + "', rank " + std::to_string(options.lead.rank)
                        + ", lease "
                        + std::to_string(options.lead.lease.count()) + " ms)");
  auto p = std::make_unique<impl>();
  p->options = std::move(options);
  p->key = base64(p->options.lead.path);
  if (auto l = p->read(); !l)
    return std::move(l.error());
  return std::unique_ptr<etcd_arbiter>{new etcd_arbiter(std::move(p))};
}

etcd_arbiter::etcd_arbiter(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

// A lead still held here (a join that failed after taking it) goes at
// once, not when its lease runs out: a process that tries again would
// find it taken.
etcd_arbiter::~etcd_arbiter() {
  if (impl_ && impl_->held != 0)
    impl_->revoke(impl_->lease);
}

const arbiter_options& etcd_arbiter::options() const {
  return impl_->options.lead;
}

caf::expected<arbiter::lead> etcd_arbiter::current() const {
  return impl_->read();
}

caf::expected<uint64_t> etcd_arbiter::try_acquire() {
  auto& d = *impl_;
  if (d.held != 0) {
    if (auto err = renew(d.held); !err)
      return d.held;
  }
  const auto seconds = std::max<int64_t>(
    1, (d.options.lead.lease.count() + 999) / 1000);
  auto granted = d.call("/v3/lease/grant", {{"TTL", seconds}});
  if (!granted)
    return std::move(granted.error());
  const auto id = (*granted).value("ID", std::string{});
  if (id.empty())
    return make_error(errc::replica_failed,
                      d.who() + ": etcd granted no lease: " + granted->dump());
  json value = {{"rank", d.options.lead.rank},
                {"pid", static_cast<int32_t>(getpid())}};
  json txn = {
    {"compare",
     json::array({{{"key", d.key},
                   {"result", "EQUAL"},
                   {"target", "CREATE"},
                   {"create_revision", "0"}}})},
    {"success", json::array({{{"request_put",
                               {{"key", d.key},
                                {"value", base64(value.dump())},
                                {"lease", id}}}}})},
    {"failure", json::array({{{"request_range", {{"key", d.key}}}}})}};
  auto r = d.call("/v3/kv/txn", txn);
  if (!r) {
    d.revoke(id);
    return std::move(r.error());
  }
  if (!r->value("succeeded", false)) {
    d.revoke(id);
    auto holder = d.read();
    return make_error(errc::replica_failed,
                      d.who() + ": the lead is " + d.describe_lead(holder)
                        + ", whose lease runs; nothing was changed");
  }
  d.held = number((*r)["header"], "revision");
  d.lease = id;
  return d.held;
}

caf::error etcd_arbiter::renew(uint64_t epoch) {
  auto& d = *impl_;
  auto fenced = [&](const std::string& why) {
    return make_error(errc::fenced,
                      d.who() + ": fenced: epoch " + std::to_string(epoch)
                        + " " + why + " (the lead is "
                        + d.describe_lead(d.read())
                        + "); it may order nothing under it");
  };
  if (epoch == 0 || epoch != d.held)
    return fenced("is not this process's to renew");
  auto kept = d.call("/v3/lease/keepalive", {{"ID", d.lease}});
  if (!kept)
    return std::move(kept.error()); // unknown: the caller decides
  if (number(kept->value("result", json::object()), "TTL") == 0) {
    d.held = 0;
    return fenced("was dropped by etcd: its lease ran out");
  }
  auto now = d.read();
  if (!now)
    return std::move(now.error());
  if (now->epoch != epoch) {
    d.revoke(d.lease);
    d.held = 0;
    return fenced("moved on");
  }
  return {};
}

void etcd_arbiter::release(uint64_t epoch) {
  auto& d = *impl_;
  if (epoch == 0 || epoch != d.held)
    return;
  d.revoke(d.lease);
  d.held = 0;
}

} // namespace varsync
