#include "sync/collectives/staged_across_processes.hpp"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "sync/collectives/across_processes.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

class staged_across_processes final : public collective_algorithm {
public:
  staged_across_processes(process_membership m,
                          std::vector<std::unique_ptr<device>> devices)
    : across_(make_across_processes(std::move(m))),
      devices_(std::move(devices)) {
    int staged = 0;
    for (auto& d : devices_)
      staged += d != nullptr ? 1 : 0;
    description_ = across_->description() + "; the data of this process's "
                   + std::to_string(staged)
                   + " device replica(s) staged through host memory";
  }

  const std::string& description() const override {
    return description_;
  }

  collective_workers workers() const override {
    return collective_workers::driver;
  }

  bool uses_staging_buffers() const override { return true; }

  caf::error run(const collective_plan& plan, collective_buffers& buffers,
                 int worker, int num_workers) override {
    collective_buffers host = buffers;
    std::vector<tensor> copies; // the host copies, alive for the run
    struct write_back {
      device* dev;
      void* component;
      size_t copy;
    };
    std::vector<write_back> back;
    auto err = stage(plan, buffers, host, copies, back);
    if (!err)
      err = across_->run(plan, host, worker, num_workers);
    if (err)
      return err;
    for (auto& b : back)
      if (auto e = b.dev->upload(b.component, copies[b.copy]))
        return make_error(errc::device_error,
                          plan.description
                            + ": every process applied the result, but "
                              "copying it back to a device replica failed: "
                            + describe(e));
    return {};
  }

private:
  template <class WriteBack>
  caf::error stage(const collective_plan& plan,
                   const collective_buffers& buffers, collective_buffers& host,
                   std::vector<tensor>& copies, std::vector<WriteBack>& back) {
    const auto slots = std::min(devices_.size(),
                                static_cast<size_t>(plan.num_replicas));
    for (size_t r = 0; r < slots; ++r)
      if (devices_[r] && r < buffers.ready_events.size())
        if (auto err = devices_[r]->wait_for_event(buffers.ready_events[r]))
          return err;
    // One host copy per device buffer: a step that updates a variable
    // twice applies both updates to the same copy, in order.
    std::unordered_map<const void*, size_t> copy_of;
    auto host_copy = [&](device& dev, const void* data,
                         const collective_item& item,
                         int64_t count) -> caf::expected<size_t> {
      if (auto i = copy_of.find(data); i != copy_of.end())
        return i->second;
      auto t = dev.download(data, item.type, tensor_shape{count});
      if (!t)
        return std::move(t.error());
      copies.push_back(std::move(*t));
      copy_of.emplace(data, copies.size() - 1);
      return copies.size() - 1;
    };
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      for (size_t r = 0; r < slots; ++r) {
        auto* dev = devices_[r].get();
        if (dev == nullptr)
          continue;
        const bool device_input
          = item.source == collective_source::components
            || (r < item.staged.size() && item.staged[r] != 0);
        if (device_input && buffers.items[k].inputs[r] != nullptr) {
          auto c = host_copy(*dev, buffers.items[k].inputs[r], item,
                             item.count);
          if (!c)
            return std::move(c.error());
          host.items[k].inputs[r] = copies[*c].raw();
        }
        auto* component = buffers.items[k].components[r];
        if (item.target == collective_target::components
            && component != nullptr) {
          // A scatter's rows are known only once the processes exchanged
          // theirs: its components are copied whole.
          int64_t count = item.count;
          if (item.scatter) {
            auto& sizes = buffers.items[k].component_elements;
            count = r < sizes.size() ? sizes[r] : -1;
            if (count < 0)
              return make_error(errc::invalid_argument,
                                plan.description + ": replica "
                                  + std::to_string(r)
                                  + " bound no component size for a scatter");
          }
          const bool first = copy_of.count(component) == 0;
          auto c = host_copy(*dev, component, item, count);
          if (!c)
            return std::move(c.error());
          host.items[k].components[r] = copies[*c].mutable_raw();
          if (first)
            back.push_back({dev, component, *c});
        }
      }
    }
    return {};
  }

  /// The collective across processes, run on the host copies.
  std::shared_ptr<collective_algorithm> across_;
  std::vector<std::unique_ptr<device>> devices_;
  std::string description_;
};

} // namespace

std::shared_ptr<collective_algorithm>
make_staged_across_processes(process_membership membership,
                             std::vector<std::unique_ptr<device>> devices) {
  return std::make_shared<staged_across_processes>(std::move(membership),
                                                   std::move(devices));
}

} // namespace varsync
