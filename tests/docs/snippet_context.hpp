#pragma once
// What a fragment of the documentation (a C++ block of README.md or docs/
// that is not a whole program, tests/docs/snippets.sh) may use without
// declaring it: the C++ standard library, CAF, and the names below, which
// stand for the reader's own program (a strategy `s`, an actor `self`, the
// gradient of a batch). Everything of varsync comes from the headers the
// fragment, or an earlier block of its document, includes. Fragments are
// only compiled (-fsyntax-only), never linked: these are declarations.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace varsync {
class replica_context;
class strategy;
struct strategy_options;
class tensor;
struct tensor_view;
class variable;
} // namespace varsync

namespace snippets {

// The reader's strategy, its options and variables.
extern varsync::strategy& s;
extern varsync::strategy_options& options;
extern varsync::strategy_options& opts;
extern varsync::variable& v;
extern varsync::variable& w;
extern varsync::variable &w1, &b1, &w2, &b2;
extern varsync::tensor &g_w1, &g_b1, &g_w2, &g_b2;
extern const std::string path;
extern const double lr;

// An event-based actor of the reader's service.
extern caf::event_based_actor* self;

// The reader's model: what a step computes.
varsync::tensor grad_of(int replica, const varsync::tensor_view& weights);
float local_loss(int replica);
varsync::tensor gradient_of_my_batch(varsync::replica_context& ctx);
varsync::tensor scaled(const varsync::tensor& x, double factor);
varsync::tensor squares_of(const varsync::tensor& x);
double total_of(const varsync::tensor& x);
std::vector<int64_t> ids_of_this_batch(int replica);
varsync::tensor gradient_rows(const std::vector<int64_t>& ids);

} // namespace snippets
