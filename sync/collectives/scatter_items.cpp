// A sparse update as a collective item (sync/collectives/scatter_items.hpp).

#include "sync/collectives/scatter_items.hpp"

#include <utility>

namespace varsync {

row_update item_row_update(const collective_item& item, void* component,
                           const void* rows) {
  row_update u;
  u.op = item.sop;
  u.type = item.type;
  u.data = component;
  u.row_elems = item.row_elems;
  u.rows = item.rows;
  u.y = rows;
  return u;
}

void fill_scatter_item(collective_item& item, const variable_info& info,
                       scatter_op op, scatter_rows rows, bool mirrored,
                       int num_replicas) {
  item.variable_id = info.id;
  item.name = info.name;
  item.type = info.type;
  item.scatter = true;
  item.sop = op;
  item.row_elems = row_elements(info);
  item.count = static_cast<int64_t>(rows.rows.size()) * item.row_elems;
  item.rows = std::move(rows.rows);
  item.rop = reduce_op::sum;
  item.first_only = true;
  item.uop = update_op::assign; // unused: sop says what happens
  item.mirrored = mirrored;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  item.contributions.assign(static_cast<size_t>(num_replicas), rows.values);
}

} // namespace varsync
