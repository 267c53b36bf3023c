// Optimizers (O1-O5): slot variables, apply_gradients and the update rules.

#include "varsync/ext/optim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "varsync/error.hpp"
#include "varsync/strategy.hpp"

namespace varsync::optim {

// optim's own to_string hides varsync's (for shapes) from the code here.
using varsync::to_string;

namespace {

// The update runs in double over chunks of this many elements: no copy of
// a whole variable in double, and the dtype switch once per chunk.
constexpr int64_t chunk = 2048;

void load_chunk(dtype type, const void* src, int64_t at, int64_t n,
                double* out) {
  switch (type) {
    case dtype::float32: {
      auto* p = static_cast<const float*>(src) + at;
      for (int64_t i = 0; i < n; ++i)
        out[i] = p[i];
      return;
    }
    case dtype::float64: {
      auto* p = static_cast<const double*>(src) + at;
      for (int64_t i = 0; i < n; ++i)
        out[i] = p[i];
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i)
        out[i] = load_double(type, src, at + i);
  }
}

void store_chunk(dtype type, void* dst, int64_t at, int64_t n,
                 const double* in) {
  switch (type) {
    case dtype::float32: {
      auto* p = static_cast<float*>(dst) + at;
      for (int64_t i = 0; i < n; ++i)
        p[i] = static_cast<float>(in[i]);
      return;
    }
    case dtype::float64: {
      auto* p = static_cast<double*>(dst) + at;
      for (int64_t i = 0; i < n; ++i)
        p[i] = in[i];
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i)
        store_double(type, dst, at + i, in[i]);
  }
}

std::string quoted(const variable& v) {
  return "'" + v.name() + "'";
}

/// O5: why the global norm is not finite: the first element that is not,
/// or the sum of squares overflowing.
std::string nonfinite_cause(const std::vector<tensor>& combined,
                            const std::vector<gradient>& grads) {
  for (size_t k = 0; k < combined.size(); ++k)
    for (int64_t i = 0; i < combined[k].size(); ++i)
      if (double x = combined[k].as_double(i); !std::isfinite(x))
        return "the combined gradient of " + quoted(grads[k].var) + " is "
               + (std::isnan(x) ? std::string{"nan"}
                                : std::string{x > 0 ? "inf" : "-inf"})
               + " at element " + std::to_string(i);
  return "the sum of the squared gradients overflows double";
}

/// Checks every gradient against the variables build() prepared (the
/// same on every replica, before the collective); collects each one's
/// built entry and tensor. Built: optimizer's map of built variables.
template <class Built, class Entry>
caf::error check_gradients(const std::string& who,
                           const std::vector<gradient>& grads,
                           const Built& built_vars,
                           std::vector<const Entry*>& entries,
                           std::vector<tensor>& mine) {
  std::unordered_set<uint64_t> seen;
  for (size_t k = 0; k < grads.size(); ++k) {
    auto& [v, g] = grads[k];
    auto i = v.valid() ? built_vars.find(v.info().id) : built_vars.end();
    if (i == built_vars.end())
      return make_error(errc::invalid_argument,
                        who + ": gradient " + std::to_string(k) + " is for "
                          + (v.valid() ? "variable " + quoted(v)
                                       : std::string{"an empty handle"})
                          + ", which build() did not prepare");
    if (!seen.insert(v.info().id).second)
      return make_error(errc::invalid_argument,
                        who + ": variable " + quoted(v)
                          + " has two gradients");
    if (g.type() != v.type())
      return make_error(errc::dtype_mismatch,
                        who + ": the gradient of " + quoted(v) + " is "
                          + std::string{to_string(g.type())}
                          + " but the variable is "
                          + std::string{to_string(v.type())});
    if (g.shape() != v.shape())
      return make_error(errc::shape_mismatch,
                        who + ": the gradient of " + quoted(v)
                          + " has shape " + to_string(g.shape())
                          + " but the variable has "
                          + to_string(v.shape()));
    entries.push_back(&i->second);
    mine.push_back(g);
  }
  return caf::none;
}

/// The global norm of the combined gradients, read in chunks through buf.
double global_norm(const std::vector<tensor>& combined, double* buf) {
  double squares = 0;
  for (auto& g : combined)
    for (int64_t at = 0; at < g.size(); at += chunk) {
      const auto len = std::min(chunk, g.size() - at);
      load_chunk(g.type(), g.raw(), at, len, buf);
      for (int64_t i = 0; i < len; ++i)
        squares += buf[static_cast<size_t>(i)] * buf[static_cast<size_t>(i)];
    }
  return std::sqrt(squares);
}

/// The factor clipping applies to every gradient (1: none).
double clip_scale(bool clip, double norm, double clip_global_norm) {
  if (clip && !std::isfinite(norm))
    return std::numeric_limits<double>::quiet_NaN(); // TensorFlow's
  if (clip && norm > clip_global_norm)
    return clip_global_norm / norm;
  return 1.0;
}

/// The data of each slot's view in ctx.
caf::error read_slots(replica_context& ctx, const std::vector<variable>& slots,
                      std::vector<const void*>& out) {
  for (auto& sv : slots) {
    auto view = ctx.read(sv);
    if (!view)
      return std::move(view.error());
    out.push_back(view->data);
  }
  return caf::none;
}

} // namespace

std::string_view to_string(nonfinite_gradients x) {
  switch (x) {
    case nonfinite_gradients::fail: return "fail";
    case nonfinite_gradients::as_tensorflow: return "as_tensorflow";
  }
  return "invalid";
}

optimizer::optimizer(std::string name, std::vector<std::string> slots,
                     optimizer_options options)
  : name_(options.name.empty() ? std::move(name) : options.name),
    slot_names_(std::move(slots)), options_(std::move(options)) {
}

caf::error optimizer::build(const strategy& s,
                            const std::vector<variable>& vars) {
  const std::string who = "optimizer '" + name_ + "': build";
  if (options_.reduction != reduce_op::sum
      && options_.reduction != reduce_op::mean)
    return make_error(errc::invalid_argument,
                      who + ": gradients combine by sum or mean, not "
                        + std::string{to_string(options_.reduction)});
  if (!(options_.clip_global_norm >= 0)
      || !std::isfinite(options_.clip_global_norm))
    return make_error(errc::invalid_argument,
                      who + ": clip_global_norm must be finite and >= 0 (0: "
                            "no clipping)");
  if (options_.nonfinite != nonfinite_gradients::fail
      && options_.nonfinite != nonfinite_gradients::as_tensorflow)
    return make_error(errc::invalid_argument,
                      who + ": nonfinite must be fail or as_tensorflow");
  if (auto what = invalid_hyperparameters(); !what.empty())
    return make_error(errc::invalid_argument, who + ": " + what);
  // Every variable checked before anything is created.
  std::unordered_set<uint64_t> seen;
  for (auto& v : vars) {
    if (!v.valid())
      return make_error(errc::invalid_argument, who + ": an empty handle");
    if (v.synchronization() != synchronization::on_write)
      return make_error(errc::invalid_argument,
                        who + ": variable " + quoted(v) + " is "
                          + std::string{to_string(v.synchronization())}
                          + "; an optimizer updates on_write variables");
    if (!is_floating(v.type()))
      return make_error(errc::invalid_argument,
                        who + ": variable " + quoted(v) + " is "
                          + std::string{to_string(v.type())}
                          + "; an optimizer updates floating variables");
    if (!seen.insert(v.info().id).second || built_.count(v.info().id) > 0)
      return make_error(errc::already_exists,
                        who + ": variable " + quoted(v)
                          + " is built already");
  }
  std::vector<variable> made;
  auto undo = [&](caf::error err) {
    for (auto& v : made)
      (void) s.destroy(v);
    return err;
  };
  auto make = [&](std::string name, tensor initial) -> caf::expected<variable> {
    variable_spec spec;
    spec.name = std::move(name);
    spec.initial_value = std::move(initial);
    spec.sync = synchronization::on_write;
    spec.agg = aggregation::only_first_replica;
    spec.trainable = false;
    auto v = s.create_variable(std::move(spec));
    if (v)
      made.push_back(*v);
    return v;
  };
  variable iterations = iterations_;
  if (!iterations.valid()) {
    auto v = make(name_ + "/iterations", tensor::scalar<int64_t>(0));
    if (!v)
      return undo(std::move(v.error()));
    iterations = *v;
  }
  std::unordered_map<uint64_t, built> added;
  for (auto& v : vars) {
    built b{v, {}};
    for (auto& slot : slot_names_) {
      auto sv = make(v.name() + "/" + slot, tensor::zeros(v.type(), v.shape()));
      if (!sv)
        return undo(std::move(sv.error()));
      b.slots.push_back(*sv);
    }
    added.emplace(v.info().id, std::move(b));
  }
  iterations_ = iterations;
  built_.merge(added);
  return {};
}

caf::expected<variable> optimizer::slot(const variable& var,
                                        const std::string& name) const {
  auto i = var.valid() ? built_.find(var.info().id) : built_.end();
  if (i != built_.end())
    for (size_t k = 0; k < slot_names_.size(); ++k)
      if (slot_names_[k] == name)
        return i->second.slots[k];
  return make_error(errc::invalid_argument,
                    "optimizer '" + name_ + "': no slot '" + name + "' for "
                      + (var.valid() ? quoted(var) : "an empty handle"));
}

step_task<caf::expected<double>>
optimizer::apply_gradients(replica_context& ctx, std::vector<gradient> grads) {
  const std::string who = "optimizer '" + name_ + "': apply_gradients";
  std::vector<const built*> entries;
  std::vector<tensor> mine;
  if (auto err = check_gradients(who, grads, built_, entries, mine))
    co_return err;
  // Every gradient of the step in one collective. `grads` keeps the
  // variables for the messages below.
  auto combined = co_await ctx.all_reduce(options_.reduction, std::move(mine));
  std::vector<double> buf(static_cast<size_t>(chunk) * (2 + slot_names_.size()));
  const double norm = global_norm(combined, buf.data());
  const bool clip = options_.clip_global_norm > 0;
  // O5: NaN > c is false, so without this a NaN would switch clipping off.
  // Every replica combined the same gradients: all decide alike.
  if (clip && !std::isfinite(norm)
      && options_.nonfinite == nonfinite_gradients::fail)
    co_return make_error(
      errc::invalid_argument,
      who + ": the global norm of the gradients is "
        + (std::isnan(norm) ? "nan" : "inf") + " ("
        + nonfinite_cause(combined, grads)
        + "), so clip_global_norm cannot bound the step; the optimizer "
          "recorded nothing (optimizer_options::nonfinite = as_tensorflow "
          "makes every gradient NaN instead, as tf.clip_by_global_norm)");
  const double scale = clip_scale(clip, norm, options_.clip_global_norm);
  auto count = ctx.read(iterations_);
  if (!count)
    co_return std::move(count.error());
  const int64_t t = static_cast<int64_t>(load_double(dtype::int64,
                                                     count->data, 0)) + 1;
  // Chunk buffers: the gradient, the weights, then each slot.
  double* g = buf.data();
  double* w = g + chunk;
  std::vector<double*> slot_chunks;
  for (size_t j = 0; j < slot_names_.size(); ++j)
    slot_chunks.push_back(w + chunk * static_cast<int64_t>(j + 1));
  for (size_t k = 0; k < entries.size(); ++k) {
    auto& e = *entries[k];
    const auto type = e.weight.type();
    const auto& shape = e.weight.shape();
    const auto n = combined[k].size();
    auto w_view = ctx.read(e.weight);
    if (!w_view)
      co_return std::move(w_view.error());
    std::vector<const void*> slot_in;
    if (auto err = read_slots(ctx, e.slots, slot_in))
      co_return err;
    auto w_out = tensor::empty(type, shape);
    std::vector<tensor> slot_out;
    for (size_t j = 0; j < e.slots.size(); ++j)
      slot_out.push_back(tensor::empty(type, shape));
    for (int64_t at = 0; at < n; at += chunk) {
      const auto len = std::min(chunk, n - at);
      load_chunk(combined[k].type(), combined[k].raw(), at, len, g);
      if (scale != 1.0)
        for (int64_t i = 0; i < len; ++i)
          g[i] *= scale;
      load_chunk(type, w_view->data, at, len, w);
      for (size_t j = 0; j < slot_in.size(); ++j)
        load_chunk(type, slot_in[j], at, len, slot_chunks[j]);
      update(w, slot_chunks.data(), g, len, t);
      store_chunk(type, w_out.mutable_raw(), at, len, w);
      for (size_t j = 0; j < slot_out.size(); ++j)
        store_chunk(type, slot_out[j].mutable_raw(), at, len, slot_chunks[j]);
    }
    if (auto err = ctx.update_mirrored(e.weight, update_op::assign,
                                       std::move(w_out)))
      co_return err;
    for (size_t j = 0; j < slot_out.size(); ++j)
      if (auto err = ctx.update_mirrored(e.slots[j], update_op::assign,
                                         std::move(slot_out[j])))
        co_return err;
  }
  if (auto err = ctx.update_mirrored(iterations_, update_op::assign,
                                     tensor::scalar<int64_t>(t)))
    co_return err;
  co_return norm;
}

// -- the update rules -----------------------------------------------------------

sgd::sgd(double learning_rate, double momentum, bool nesterov,
         optimizer_options options)
  : optimizer("sgd",
              momentum != 0 ? std::vector<std::string>{"momentum"}
                            : std::vector<std::string>{},
              std::move(options)),
    lr_(learning_rate), momentum_(momentum), nesterov_(nesterov) {
}

sgd::sgd(sgd_options options)
  : sgd(options.learning_rate, options.momentum, options.nesterov,
        std::move(options.common)) {
}

void sgd::update(double* w, double* const* slots, const double* g, int64_t n,
                 int64_t) const {
  if (momentum_ == 0) {
    for (int64_t i = 0; i < n; ++i)
      w[i] -= lr_ * g[i];
    return;
  }
  double* v = slots[0];
  for (int64_t i = 0; i < n; ++i) {
    v[i] = momentum_ * v[i] - lr_ * g[i];
    w[i] += nesterov_ ? momentum_ * v[i] - lr_ * g[i] : v[i];
  }
}

std::string sgd::invalid_hyperparameters() const {
  if (!std::isfinite(lr_) || lr_ < 0)
    return "the learning rate must be finite and >= 0";
  if (!std::isfinite(momentum_) || momentum_ < 0)
    return "the momentum must be finite and >= 0";
  if (nesterov_ && momentum_ == 0)
    return "Nesterov momentum needs a momentum > 0";
  return {};
}

adam::adam(double learning_rate, double beta_1, double beta_2, double epsilon,
           optimizer_options options)
  : adam("adam", learning_rate, beta_1, beta_2, epsilon, 0,
         std::move(options)) {
}

adam::adam(adam_options options)
  : adam(options.learning_rate, options.beta_1, options.beta_2,
         options.epsilon, std::move(options.common)) {
}

adam::adam(std::string name, double learning_rate, double beta_1,
           double beta_2, double epsilon, double weight_decay,
           optimizer_options options)
  : optimizer(std::move(name), {"m", "v"}, std::move(options)),
    lr_(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon),
    weight_decay_(weight_decay) {
}

void adam::update(double* w, double* const* slots, const double* g, int64_t n,
                  int64_t t) const {
  double* m = slots[0];
  double* v = slots[1];
  const double td = static_cast<double>(t);
  const double lr_t = lr_ * std::sqrt(1 - std::pow(beta_2_, td))
                      / (1 - std::pow(beta_1_, td));
  for (int64_t i = 0; i < n; ++i) {
    if (weight_decay_ != 0)
      w[i] -= w[i] * weight_decay_ * lr_;
    m[i] += (g[i] - m[i]) * (1 - beta_1_);
    v[i] += (g[i] * g[i] - v[i]) * (1 - beta_2_);
    w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + epsilon_);
  }
}

std::string adam::invalid_hyperparameters() const {
  if (!std::isfinite(lr_) || lr_ < 0)
    return "the learning rate must be finite and >= 0";
  if (!(beta_1_ >= 0 && beta_1_ < 1) || !(beta_2_ >= 0 && beta_2_ < 1))
    return "beta_1 and beta_2 must be in [0, 1)";
  if (!std::isfinite(epsilon_) || epsilon_ <= 0)
    return "epsilon must be finite and > 0";
  if (!std::isfinite(weight_decay_) || weight_decay_ < 0)
    return "the weight decay must be finite and >= 0";
  return {};
}

adamw::adamw(double learning_rate, double weight_decay, double beta_1,
             double beta_2, double epsilon, optimizer_options options)
  : adam("adamw", learning_rate, beta_1, beta_2, epsilon, weight_decay,
         std::move(options)) {
}

adamw::adamw(adamw_options options)
  : adamw(options.learning_rate, options.weight_decay, options.beta_1,
          options.beta_2, options.epsilon, std::move(options.common)) {
}

} // namespace varsync::optim
