// Our own libuv adapter for a hiredis 0.14 async context (not hiredis'
// adapters/libuv.h, which ignores the poll status: after a refused connect or a
// reset its callbacks never run). On a poll error every watched event is handed
// to hiredis as ready, so that it reads or writes, sees the error and
// disconnects.
#ifndef SIMBA_BACKEND_REDIS_UV_HIREDIS_H
#define SIMBA_BACKEND_REDIS_UV_HIREDIS_H

#include <hiredis/async.h>
#include <uv.h>

#include <functional>

namespace simba {

struct UvHiredis {
  uv_poll_t poll;
  redisAsyncContext* ac = nullptr;  // null once hiredis cleaned up
  int events = 0;
  bool cleaned = false;
  // Runs once, when hiredis tears the context down (before it is freed and
  // before the pending replies' callbacks run with NULL).
  std::function<void(UvHiredis*)> on_gone;
  // Runs once the poll handle is closed; the adapter is deleted right after.
  std::function<void()> on_closed;
};

// Attaches a new adapter to `ac`; returns it, or nullptr (with `ac` untouched)
// when the poll cannot be set up. The adapter deletes itself after its poll
// handle closed (following hiredis' cleanup hook).
UvHiredis* uv_hiredis_attach(uv_loop_t* loop, redisAsyncContext* ac);

}  // namespace simba

#endif
