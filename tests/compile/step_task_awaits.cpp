// Compile-time check of step_task (X4): a step awaits only step_tasks and
// replica_context's collectives. Built twice by CTest: as is (it must
// compile), and with -DAWAIT_FOREIGN (it must fail with step_task's message).

#include <coroutine>

#include "varsync/step_task.hpp"

namespace {

varsync::step_task<int> helper() {
  co_return 1;
}

varsync::step_task<> step() {
  int x = co_await helper();
  (void) x;
#ifdef AWAIT_FOREIGN
  // Nothing would resume the step after this.
  co_await std::suspend_always{};
#endif
}

} // namespace

int main() {
  auto t = step();
  t.resume();
  return t.done() ? 0 : 1;
}
