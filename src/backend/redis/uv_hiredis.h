// Our own libuv adapter for a hiredis 0.14 async context (not hiredis'
// adapters/libuv.h, which ignores the poll status: after a refused connect or a
// reset its callbacks never run). On a poll error every watched event is handed
// to hiredis as ready, so that it reads or writes, sees the error and
// disconnects.
//
// hiredis asks for the writable event with every command and drops it once
// the command is written, which the backend does in the same loop turn. Each
// uv_poll_start costs an epoll_ctl DEL and ADD, three per command, so the
// adapter records what hiredis wants and applies it just before the loop
// polls (a prepare handle): the request and its withdrawal cancel out. While
// a change waits for it, an idle handle is active, so that uv_backend_timeout()
// reads 0: a loop driven through uv_backend_fd() (EXTERNAL mode, or a caller
// that borrowed the loop) runs the loop again before it sleeps, instead of
// sleeping on a stale watch.
#ifndef SIMBA_BACKEND_REDIS_UV_HIREDIS_H
#define SIMBA_BACKEND_REDIS_UV_HIREDIS_H

#include <hiredis/async.h>
#include <uv.h>

#include <functional>

namespace simba {

struct UvHiredis {
  uv_poll_t poll;
  uv_prepare_t apply;               // sets the poll to `wanted` before the loop polls
  uv_idle_t pending;                // active while `wanted` differs from `events`
  redisAsyncContext* ac = nullptr;  // null once hiredis cleaned up
  int wanted = 0;                   // UV_READABLE | UV_WRITABLE as hiredis asked
  int events = 0;                   // what the poll watches
  int open_handles = 3;
  bool cleaned = false;
  // Runs once, when hiredis tears the context down, just before it frees it.
  // hiredis 0.14 has run the pending replies' callbacks with NULL by then
  // (__redisAsyncFree); meanwhile the context refuses new commands, being
  // marked disconnecting (an error) or freeing (redisAsyncFree).
  std::function<void(UvHiredis*)> on_gone;
  // Runs once the handles are closed; the adapter is deleted right after.
  std::function<void()> on_closed;
};

// Attaches a new adapter to `ac`; returns it, or nullptr (with `ac` untouched)
// when the poll cannot be set up. The adapter deletes itself after its
// handles closed (following hiredis' cleanup hook).
UvHiredis* uv_hiredis_attach(uv_loop_t* loop, redisAsyncContext* ac);

// redisAsyncHandleWrite without SIGPIPE: hiredis writes with write(2), which
// raises SIGPIPE in the host when the peer is gone (at once on the TLS pump's
// socketpair, whose other end the pump closes when TLS fails). A library must
// not kill its host. On a connected context the buffered command goes out by
// send(2) with MSG_NOSIGNAL, as libpq writes; whatever hiredis still has to
// write itself (a full socket buffer, an error, a connect in progress) is
// written with the signal blocked on this thread, and one it raised is taken
// back. A SIGPIPE pending before the call stays pending. Every write of
// hiredis goes through here.
void uv_hiredis_write(redisAsyncContext* ac);

}  // namespace simba

#endif
