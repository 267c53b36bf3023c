#pragma once
// Marks a thread while it runs one of varsync's own actors (a coordinator or
// a replica). User code called from there (async callbacks, replica steps)
// must not make blocking calls on a strategy: they would wait for the very
// actors this thread is running, until the deadline.

namespace varsync::detail {

inline thread_local int varsync_actor_depth = 0;

/// Set while an actor of varsync runs on this thread (around resume()).
class varsync_actor_scope {
public:
  varsync_actor_scope() { ++varsync_actor_depth; }
  ~varsync_actor_scope() { --varsync_actor_depth; }
  varsync_actor_scope(const varsync_actor_scope&) = delete;
  varsync_actor_scope& operator=(const varsync_actor_scope&) = delete;
};

/// True while this thread runs a coordinator or a replica.
inline bool on_varsync_actor_thread() {
  return varsync_actor_depth > 0;
}

} // namespace varsync::detail
