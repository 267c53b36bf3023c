// The coordinator's read barrier (actors/coordinator/read_barrier.hpp, W8).

#include "actors/coordinator/read_barrier.hpp"

#include <chrono>

#include "varsync/error.hpp"

namespace varsync {

void pending_read::expire() {
  if (finished)
    return;
  finished = true;
  fail(make_error(errc::timeout,
                  "the read waited for writes of the variable that were "
                  "issued before it and are not yet confirmed by every "
                  "replica, past its deadline; nothing was changed"));
}

void read_barrier::write_done(uint64_t id) {
  auto* e = variables_.any(id);
  if (e == nullptr)
    return;
  if (e->writes_in_flight > 0 && --e->writes_in_flight == 0)
    flush(*e);
}

void read_barrier::flush(variable_entry& e) {
  if (!e.waiting_reads)
    return;
  auto reads = std::move(*e.waiting_reads);
  e.waiting_reads.reset();
  auto now = operation_deadlines::clock::now();
  for (auto& w : reads) {
    if (w->finished)
      continue;
    auto left = w->timeout;
    if (left != caf::timespan::max()) {
      auto waited = std::chrono::duration_cast<caf::timespan>(now - w->since);
      if (waited >= left) {
        w->finished = true;
        if (w->watched)
          deadlines_.unwatch(w->deadline);
        w->fail(make_error(errc::timeout,
                           "the read waited for earlier writes of the "
                           "variable past its deadline; nothing was "
                           "changed"));
        continue;
      }
      left -= waited;
    }
    rerun(*w, left);
  }
}

void read_barrier::release(std::unique_ptr<variable_entry::waiting> reads) {
  if (!reads)
    return;
  for (auto& w : *reads)
    if (!w->finished)
      rerun(*w, w->timeout);
}

void read_barrier::rerun(pending_read& w, caf::timespan left) {
  w.finished = true;
  if (w.watched)
    deadlines_.unwatch(w.deadline);
  auto saved = rerunning_;
  rerunning_ = true;
  w.rerun(left);
  rerunning_ = saved;
}

} // namespace varsync
