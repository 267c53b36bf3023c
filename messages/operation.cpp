#include "messages/operation.hpp"

namespace varsync {

namespace {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

} // namespace

const char* name_of(const operation& op) {
  return std::visit([](const auto& x) { return x.name; }, op);
}

size_t tensor_bytes(const operation& op) {
  return std::visit(
    overloaded{
      [](const ops::create& x) { return x.spec.initial_value.nbytes(); },
      [](const ops::update& x) { return x.value.nbytes(); },
      [](const ops::scatter& x) {
        return x.slices.values.nbytes()
               + x.slices.indices.size() * sizeof(int64_t);
      },
      [](const ops::all_reduce& x) {
        size_t bytes = 0;
        for (auto& row : x.values)
          for (auto& t : row)
            bytes += t.nbytes();
        return bytes;
      },
      [](const auto&) { return size_t{0}; },
    },
    op);
}

bool sequenceable(const operation& op) {
  return std::visit(
    overloaded{
      [](const ops::create&) { return true; },
      [](const ops::lookup&) { return true; },
      [](const ops::list&) { return true; },
      [](const ops::destroy&) { return true; },
      [](const ops::read&) { return true; },
      [](const ops::update&) { return true; },
      [](const ops::scatter&) { return true; },
      [](const ops::local_values&) { return true; },
      [](const ops::all_values&) { return true; },
      [](const ops::barrier&) { return true; },
      [](const ops::metrics_of_processes&) { return true; },
      [](const auto&) { return false; },
    },
    op);
}

} // namespace varsync
