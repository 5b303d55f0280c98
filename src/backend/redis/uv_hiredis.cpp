#include "backend/redis/uv_hiredis.h"

#include <errno.h>
#include <hiredis/sds.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <cstdio>
#include <cstring>

namespace simba {
namespace {

void on_poll(uv_poll_t* handle, int status, int events) {
  auto* a = static_cast<UvHiredis*>(handle->data);
  if (!a->ac) return;
  // A poll error: hand every watched event to hiredis, which then sees the
  // socket's error itself (a refused connect, a reset) and disconnects.
  if (status < 0) events = a->events;
  events &= a->wanted;  // not what hiredis withdrew since the poll was set
  if ((events & UV_READABLE) && a->ac) redisAsyncHandleRead(a->ac);
  if ((events & UV_WRITABLE) && a->ac) uv_hiredis_write(a->ac);
}

void on_prepare(uv_prepare_t* handle) {
  auto* a = static_cast<UvHiredis*>(handle->data);
  // A command queued outside the loop's callbacks (by a caller that borrowed
  // the loop, or an EXTERNAL host) is written now rather than after a
  // writable event: that would cost a loop turn and two epoll_ctl calls.
  if (!a->cleaned && (a->wanted & UV_WRITABLE) && !(a->events & UV_WRITABLE) &&
      (a->ac->c.flags & REDIS_CONNECTED)) {
    uv_hiredis_write(a->ac);  // may end the connection: cleaned then
  }
  if (a->cleaned || a->wanted == a->events) return;
  uv_idle_stop(&a->pending);
  a->events = a->wanted;
  if (a->events) {
    uv_poll_start(&a->poll, a->events, on_poll);
  } else {
    uv_poll_stop(&a->poll);
  }
}

void update(UvHiredis* a, int events) {
  if (a->cleaned) return;
  a->wanted = events;
  if (a->wanted != a->events) {
    uv_idle_start(&a->pending, [](uv_idle_t*) {});  // on_prepare stops it
  } else {
    uv_idle_stop(&a->pending);
  }
}

void add_read(void* p) {
  if (auto* a = static_cast<UvHiredis*>(p)) update(a, a->wanted | UV_READABLE);
}
void del_read(void* p) {
  if (auto* a = static_cast<UvHiredis*>(p)) update(a, a->wanted & ~UV_READABLE);
}
void add_write(void* p) {
  if (auto* a = static_cast<UvHiredis*>(p)) update(a, a->wanted | UV_WRITABLE);
}
void del_write(void* p) {
  if (auto* a = static_cast<UvHiredis*>(p)) update(a, a->wanted & ~UV_WRITABLE);
}

void on_handle_closed(uv_handle_t* h) {
  auto* self = static_cast<UvHiredis*>(h->data);
  if (--self->open_handles > 0) return;
  auto closed = std::move(self->on_closed);
  delete self;
  if (closed) closed();
}

void cleanup(void* p) {
  auto* a = static_cast<UvHiredis*>(p);
  if (!a || a->cleaned) return;
  a->cleaned = true;
  redisAsyncContext* ac = a->ac;
  // hiredis may call the hooks again while it finishes: make them no-ops.
  if (ac) {
    ac->ev.data = nullptr;
    ac->ev.cleanup = nullptr;
  }
  a->ac = nullptr;
  uv_poll_stop(&a->poll);
  uv_prepare_stop(&a->apply);
  uv_idle_stop(&a->pending);
  if (a->on_gone) {
    auto gone = std::move(a->on_gone);
    gone(a);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&a->poll), on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&a->apply), on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&a->pending), on_handle_closed);
}

}  // namespace

void uv_hiredis_write(redisAsyncContext* ac) {
  redisContext* c = &ac->c;
  // A context with an error is hiredis's to end: it writes nothing then.
  if ((c->flags & REDIS_CONNECTED) && !c->err && c->obuf) {
    // What hiredis buffered goes out by send(2) with MSG_NOSIGNAL: no SIGPIPE,
    // so no signal mask to change (four system calls per write, a microsecond
    // each on a paravirtualized host; benchmarks.md). hiredis then finds its
    // buffer empty and only updates its events. A loop turn can also come here
    // with nothing buffered (the command went out in the turn's prepare).
    // hiredis (0.14, and 1.x without its own TLS) writes that buffer to c->fd
    // as it is; rediss:// goes through the TLS pump's socketpair (ADR 0019).
    const size_t len = sdslen(c->obuf);
    if (len > 0) {
      const ssize_t n = send(c->fd, c->obuf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      const int error = n < 0 ? errno : 0;
      if (n > 0) {
        // What went out leaves the buffer, as in hiredis's own write (which
        // also frees a buffer it emptied; this one keeps its allocation). Only
        // sds.h's inline functions: hiredis 0.14 declares the others without C
        // linkage for C++.
        const size_t left = len - static_cast<size_t>(n);
        std::memmove(c->obuf, c->obuf + n, left);
        sdssetlen(c->obuf, left);
        c->obuf[left] = '\0';
      } else if (error != 0 && error != EAGAIN && error != EWOULDBLOCK && error != EINTR &&
                 error != ENOTSOCK) {
        // The connection failed (a reset, a gone peer): recorded as hiredis
        // records a failed write, so that it ends the connection with this
        // reason instead of writing again.
        c->err = REDIS_ERR_IO;
        std::snprintf(c->errstr, sizeof(c->errstr), "%s", std::strerror(error));
      }
    }
    // All sent (hiredis only updates its events) or failed (it ends the
    // connection): either way hiredis writes nothing.
    if (c->err || sdslen(c->obuf) == 0) {
      redisAsyncHandleWrite(ac);
      return;
    }
    // The rest (a full socket buffer, an interrupted send): hiredis writes it
    // itself, below.
  }
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  redisAsyncHandleWrite(ac);
  if (!was_pending) {
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const struct timespec now = {0, 0};
      while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

UvHiredis* uv_hiredis_attach(uv_loop_t* loop, redisAsyncContext* ac) {
  if (ac->ev.data != nullptr) return nullptr;
  auto* a = new UvHiredis;
  if (uv_poll_init(loop, &a->poll, ac->c.fd) != 0) {
    delete a;
    return nullptr;
  }
  a->poll.data = a;
  uv_prepare_init(loop, &a->apply);
  a->apply.data = a;
  uv_prepare_start(&a->apply, on_prepare);
  uv_idle_init(loop, &a->pending);
  a->pending.data = a;
  a->ac = ac;
  ac->ev.addRead = add_read;
  ac->ev.delRead = del_read;
  ac->ev.addWrite = add_write;
  ac->ev.delWrite = del_write;
  ac->ev.cleanup = cleanup;
  ac->ev.data = a;
  return a;
}

}  // namespace simba
