#pragma once
// Optimizers (rows O1-O5): SGD (momentum, Nesterov), Adam and AdamW over
// ON_WRITE variables, with their slot variables (moments, the step count)
// created as ON_WRITE variables beside each weight, so that checkpoints and
// every rule of the table cover them.
//
//   optim::adam opt{1e-3};
//   opt.build(s, {w, b});                       // cross-replica, once
//   s.run([&](replica_context& ctx) -> step_task<> {
//     std::vector<optim::gradient> grads{{w, gw}, {b, gb}}; // this replica's
//     auto norm = co_await opt.apply_gradients(ctx, std::move(grads));
//     if (!norm) throw std::runtime_error(describe(norm.error()));
//   });
//
// apply_gradients all-reduces every gradient of the step in one collective
// inside the step (docs/coroutine-steps.md), clips them by their global norm
// if asked, and computes the update on every replica alike; the new weights
// and slots are recorded with update_mirrored and applied with the step's
// other updates, all or none.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/replica_context.hpp"
#include "varsync/step_task.hpp"
#include "varsync/synchronization.hpp"
#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"

namespace varsync {

class strategy;

namespace optim {

/// One variable's gradient in a step (an element of TF's grads_and_vars).
struct gradient {
  variable var;
  /// This replica's gradient: the variable's dtype and shape, host memory.
  tensor grad;
};

/// What apply_gradients does when clipping meets a global norm that is not
/// finite (a NaN or infinite gradient element, rule O5).
enum class nonfinite_gradients : uint8_t {
  /// The step's apply_gradients fails with invalid_argument naming the
  /// variable and element, and records nothing (torch's
  /// clip_grad_norm_(error_if_nonfinite=True)).
  fail,
  /// As tf.clip_by_global_norm: every gradient element becomes NaN, and so
  /// do the weights it updates.
  as_tensorflow,
};

std::string_view to_string(nonfinite_gradients x);

struct optimizer_options {
  /// The optimizer's name (empty: "sgd", "adam", "adamw"): two optimizers
  /// on one strategy need different names (their step counts are
  /// variables).
  std::string name;
  /// How the replicas' gradients combine: `sum` (TensorFlow's: scale each
  /// replica's loss by the global batch size) or `mean`.
  reduce_op reduction = reduce_op::sum;
  /// Clip the combined gradients to this global norm, as
  /// tf.clip_by_global_norm (0: no clipping).
  double clip_global_norm = 0;
  /// With clipping, a global norm that is not finite (O5).
  nonfinite_gradients nonfinite = nonfinite_gradients::fail;
};

/// SGD's hyperparameters by name (Keras' defaults), for example
/// `optim::sgd opt{{.momentum = 0.9, .common = {.clip_global_norm = 1}}};`
struct sgd_options {
  double learning_rate = 0.01;
  double momentum = 0;
  bool nesterov = false;
  optimizer_options common = {};
};

/// Adam's hyperparameters by name (Keras' defaults).
struct adam_options {
  double learning_rate = 1e-3;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  optimizer_options common = {};
};

/// AdamW's hyperparameters by name (Keras' defaults).
struct adamw_options {
  double learning_rate = 1e-3;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  optimizer_options common = {};
};

/// What every optimizer shares: its slots, the step count, apply_gradients.
class optimizer {
public:
  virtual ~optimizer() = default;

  /// The optimizer's name; its step count is the variable "<name>/iterations".
  const std::string& name() const { return name_; }

  /// Creates the slot variables of `vars` (cross-replica context, before
  /// the first apply_gradients): for each slot of the optimizer an
  /// ON_WRITE variable "<var name>/<slot>" of the variable's dtype and
  /// shape, zeros, aggregation only_first_replica, not trainable; and
  /// "<name>/iterations" (int64, once). The variables must be ON_WRITE with
  /// a floating dtype (invalid_argument otherwise, nothing created); a name
  /// taken already is already_exists. Not thread-safe against concurrent
  /// apply_gradients: build before training.
  caf::error build(const strategy& s, const std::vector<variable>& vars);

  /// Applies one step of the optimizer, in a coroutine step on every
  /// replica (co_await it). Every gradient's dtype and shape must be its
  /// variable's, and every variable built (invalid_argument otherwise,
  /// returned before any collective: nothing changes). One all_reduce
  /// combines all gradients (optimizer_options::reduction); the global
  /// norm of the combined gradients is returned (before clipping). The new
  /// weights, slots and step count are recorded as the step's updates.
  /// With clipping and a norm that is not finite: invalid_argument and
  /// nothing recorded, unless optimizer_options::nonfinite says to follow
  /// TensorFlow (O5).
  step_task<caf::expected<double>> apply_gradients(replica_context& ctx,
                                                   std::vector<gradient> grads);

  /// The number of applied steps (int64 scalar); valid after build.
  const variable& iterations() const { return iterations_; }

  /// The slot variable `slot` of `var` (after build), or invalid_argument.
  caf::expected<variable> slot(const variable& var,
                               const std::string& slot) const;

protected:
  optimizer(std::string name, std::vector<std::string> slots,
            optimizer_options options);

  /// One variable's update at step t (1 for the first), in double: the
  /// weights `w` and this optimizer's slots (slots()[k] points at slot k),
  /// `n` elements each, from the combined and clipped gradient `g`.
  virtual void update(double* w, double* const* slots, const double* g,
                      int64_t n, int64_t t) const = 0;

  /// What is wrong with the hyperparameters, or empty (checked by build).
  virtual std::string invalid_hyperparameters() const = 0;

private:
  struct built {
    variable weight;
    std::vector<variable> slots;
  };

  std::string name_;
  std::vector<std::string> slot_names_;
  optimizer_options options_;
  std::unordered_map<uint64_t, built> built_;
  variable iterations_;
};

/// Stochastic gradient descent, as Keras' SGD: w -= lr g; with momentum m,
/// a velocity v = m v - lr g and w += v (Nesterov: w += m v - lr g). The
/// slot "momentum" holds Keras' velocity v, which is -lr times torch's
/// momentum buffer (b = m b + g, w -= lr b) while lr stays the same.
class sgd final : public optimizer {
public:
  explicit sgd(double learning_rate, double momentum = 0,
               bool nesterov = false, optimizer_options options = {});
  explicit sgd(sgd_options options);

protected:
  void update(double* w, double* const* slots, const double* g, int64_t n,
              int64_t t) const override;
  std::string invalid_hyperparameters() const override;

private:
  double lr_;
  double momentum_;
  bool nesterov_;
};

/// Adam (Kingma and Ba), as Keras' Adam: moments m and v, bias-corrected
/// step lr sqrt(1 - b2^t) / (1 - b1^t), w -= lr_t m / (sqrt(v) + epsilon).
class adam : public optimizer {
public:
  explicit adam(double learning_rate = 1e-3, double beta_1 = 0.9,
                double beta_2 = 0.999, double epsilon = 1e-7,
                optimizer_options options = {});
  explicit adam(adam_options options);

protected:
  adam(std::string name, double learning_rate, double beta_1, double beta_2,
       double epsilon, double weight_decay, optimizer_options options);

  void update(double* w, double* const* slots, const double* g, int64_t n,
              int64_t t) const override;
  std::string invalid_hyperparameters() const override;

private:
  double lr_;
  double beta_1_;
  double beta_2_;
  double epsilon_;
  double weight_decay_;
};

/// AdamW (Loshchilov and Hutter), as Keras' AdamW: Adam with the weights
/// decayed first, w -= lr weight_decay w.
class adamw final : public adam {
public:
  explicit adamw(double learning_rate = 1e-3, double weight_decay = 0.004,
                 double beta_1 = 0.9, double beta_2 = 0.999,
                 double epsilon = 1e-7, optimizer_options options = {});
  explicit adamw(adamw_options options);
};

} // namespace optim

} // namespace varsync
