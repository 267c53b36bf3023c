#include "actors/coordinator/variable_registry.hpp"

#include <algorithm>

#include "varsync/error.hpp"

namespace varsync {

caf::expected<variable_entry*> variable_registry::find(uint64_t id) {
  auto i = entries_.find(id);
  if (i == entries_.end() || !i->second.ready)
    return make_error(errc::unknown_variable,
                      "no variable with id " + std::to_string(id)
                        + " exists in this strategy (destroyed, or never "
                          "created)");
  return &i->second;
}

variable_entry* variable_registry::any(uint64_t id) {
  auto i = entries_.find(id);
  return i == entries_.end() ? nullptr : &i->second;
}

std::string variable_registry::quoted_name_of(uint64_t id) const {
  auto i = entries_.find(id);
  return i == entries_.end() ? "#" + std::to_string(id)
                             : "'" + i->second.info->name + "'";
}

shared_variable_info variable_registry::shared_info(uint64_t id) const {
  auto i = entries_.find(id);
  return i == entries_.end() ? nullptr : i->second.info;
}

shared_variable_info
variable_registry::existing(const std::string& name) const {
  auto i = names_.find(name);
  if (i == names_.end())
    return nullptr;
  auto& e = entries_.at(i->second);
  return e.ready ? e.info : nullptr;
}

std::vector<variable_info> variable_registry::list() const {
  std::vector<variable_info> out;
  out.reserve(entries_.size());
  for (auto& [id, e] : entries_)
    if (e.ready)
      out.push_back(*e.info);
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

variable_entry& variable_registry::add(shared_variable_info info) {
  const auto id = info->id;
  auto [i, added] = entries_.emplace(id, variable_entry{info});
  names_.emplace(i->second.info->name, id);
  return i->second;
}

void variable_registry::erase(uint64_t id) {
  auto i = entries_.find(id);
  if (i == entries_.end())
    return;
  names_.erase(i->second.info->name); // its key views this name
  entries_.erase(i);
}

} // namespace varsync
