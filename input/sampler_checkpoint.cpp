#include "varsync/ext/sampler_checkpoint.hpp"

#include <cstring>
#include <utility>
#include <vector>

#include "varsync/error.hpp"

namespace varsync::input {

namespace {

constexpr int64_t layout_version = 1;

int64_t seed_bits(uint64_t seed) {
  int64_t out;
  std::memcpy(&out, &seed, sizeof out);
  return out;
}

tensor encode(const distributed_sampler& sampler) {
  const auto& o = sampler.options();
  const auto& p = sampler.position();
  return tensor::from_vector<int64_t>(
    {position_fields},
    {layout_version, o.num_items, seed_bits(o.seed), o.shuffle ? 1 : 0,
     p.started ? 1 : 0, p.epoch, p.offset, p.step});
}

caf::error mismatch(const std::string& name, std::string what) {
  return make_error(errc::checkpoint_mismatch,
                    "restore_position: variable '" + name + "' " + std::move(what));
}

// The recorded dataset must be the sampler's: the same items in the same
// epoch orders, or the offset means nothing.
caf::error check_recorded(const std::string& name, const std::vector<int64_t>& f,
                          const sampler_options& o) {
  auto field = [&](const char* what, int64_t got, int64_t want) -> caf::error {
    if (got == want)
      return caf::none;
    return mismatch(name, std::string{"was recorded with "} + what + " "
                            + std::to_string(got) + ", expected "
                            + std::to_string(want) + " (this sampler's)");
  };
  if (f[0] != layout_version)
    return mismatch(name, "has position layout " + std::to_string(f[0])
                            + ", expected " + std::to_string(layout_version));
  if (auto err = field("num_items", f[1], o.num_items))
    return err;
  if (auto err = field("seed (as int64)", f[2], seed_bits(o.seed)))
    return err;
  return field("shuffle", f[3], o.shuffle ? 1 : 0);
}

} // namespace

caf::expected<variable> create_position_variable(const strategy& s,
                                                 const distributed_sampler& sampler,
                                                 std::string name) {
  return s.create_variable(std::move(name), encode(sampler),
                           synchronization::on_write,
                           aggregation::only_first_replica, false);
}

caf::error record_position(const strategy& s, const variable& position,
                           const distributed_sampler& sampler) {
  return s.assign(position, encode(sampler));
}

caf::error restore_position(const strategy& s, const variable& position,
                            distributed_sampler& sampler) {
  auto value = s.read(position);
  if (!value)
    return std::move(value.error());
  const std::string name = position.valid() ? position.name() : std::string{};
  if (value->type() != dtype::int64 || value->rank() != 1
      || value->size() != position_fields)
    return mismatch(name, "is not a sampler position: expected int64 of shape ["
                            + std::to_string(position_fields) + "]");
  const auto f = value->to_vector<int64_t>();
  if (auto err = check_recorded(name, f, sampler.options()))
    return err;
  if (f[4] != 0 && f[4] != 1)
    return make_error(errc::checkpoint_corrupt,
                      "restore_position: variable '" + name + "' has started = "
                        + std::to_string(f[4]) + ", expected 0 or 1");
  return sampler.resume(sampler_position{f[4] == 1, f[5], f[6], f[7]});
}

} // namespace varsync::input
