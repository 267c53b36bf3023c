#pragma once
// A sparse update as a collective item: the rows a scatter names, combined
// by the rules of sync/scatter_update.hpp, applied to every component by a
// collective (a cross-replica scatter, a step's scatters, across processes).

#include "devices/row_update.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/variable.hpp"

namespace varsync {

/// Scatter item `item`'s rows `rows` (its input 0) into one replica's
/// `component`, as devices/row_update applies them.
row_update item_row_update(const collective_item& item, void* component,
                           const void* rows);

/// Makes `item` (from collective_plan::add_item) the scatter of `rows` into
/// every component of `info`: `rows.values` is every replica's input.
void fill_scatter_item(collective_item& item, const variable_info& info,
                       scatter_op op, scatter_rows rows, bool mirrored,
                       int num_replicas);

} // namespace varsync
