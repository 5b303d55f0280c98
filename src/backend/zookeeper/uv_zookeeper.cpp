#include "backend/zookeeper/uv_zookeeper.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace simba {

UvZk::UvZk(uv_loop_t* loop, EventFn on_event) : loop_(loop), on_event_(std::move(on_event)) {
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  uv_timer_init(loop_, &close_timer_);
  close_timer_.data = this;
  handles_ = 2;
}

UvZk* UvZk::open(uv_loop_t* loop, const std::string& hosts, int timeout_ms, EventFn on_event,
                 std::string* error) {
  // The single-threaded library formats its log lines in static buffers shared
  // by every handle of the process; with one loop thread per client they would
  // race. Its logging is off (process-wide); the backend logs what matters.
  zoo_set_debug_level(static_cast<ZooLogLevel>(0));
  auto* z = new UvZk(loop, std::move(on_event));
  z->zh_ = zookeeper_init(hosts.c_str(), &UvZk::on_watch, timeout_ms, nullptr, z, 0);
  if (!z->zh_) {
    *error = std::string("zookeeper_init failed: ") + strerror(errno);
    z->close(nullptr);
    return nullptr;
  }
  // The hosts are addresses: re-resolving them before every connect attempt
  // only costs time (PITFALLS.md).
  zoo_set_servers_resolution_delay(z->zh_, -1);
  z->pump();
  return z;
}

void UvZk::on_watch(zhandle_t*, int type, int state, const char* path, void* ctx) {
  auto* self = static_cast<UvZk*>(ctx);
  if (!self || self->closing_ || !self->on_event_) return;
  self->on_event_(type, state, path ? std::string(path) : std::string());
}

void UvZk::kick() {
  if (closing_ || !zh_) return;
  if (depth_ > 0) {
    kicked_ = true;  // the call under way re-reads the interest when it returns
    return;
  }
  pump();
}

// Asks the library what to wait for and arms the poll and the timer. The
// library may run completions from zookeeper_interest() too (a connection it
// finds dead), and those may queue requests: ask again until nothing changed.
void UvZk::pump() {
  for (int round = 0; round < 4 && !closing_ && zh_; ++round) {
    kicked_ = false;
    int fd = -1, interest = 0;
    struct timeval tv = {0, 0};
    int rc;
    ++depth_;
    rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    --depth_;
    if (closing_) return;
    // After an error the fd may name a socket the library already closed.
    if (rc != ZOK) fd = -1;
    int events = 0;
    if (interest & ZOOKEEPER_READ) events |= UV_READABLE;
    if (interest & ZOOKEEPER_WRITE) events |= UV_WRITABLE;
    set_poll(fd, events);
    if (rc == ZINVALIDSTATE) {
      // Expired or authentication failed: the library will do nothing more.
      uv_timer_stop(&timer_);
      return;
    }
    int64_t ms = static_cast<int64_t>(tv.tv_sec) * 1000 + (tv.tv_usec + 999) / 1000;
    if (ms < 0) ms = 0;
    uv_timer_start(
        &timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<UvZk*>(t->data);
          // Pings and connect timeouts are handled inside zookeeper_interest;
          // process with no events runs what it queued.
          self->process(0);
        },
        static_cast<uint64_t>(ms), 0);
    if (!kicked_) return;
  }
}

void UvZk::process(int events) {
  if (closing_ || !zh_) return;
  ++depth_;
  zookeeper_process(zh_, events);
  --depth_;
  pump();
}

void UvZk::set_poll(int fd, int events) {
  if (fd < 0 || events == 0) {
    if (fd < 0) {
      drop_poll();
    } else if (poll_ && poll_events_ != 0) {
      uv_poll_stop(poll_);
      poll_events_ = 0;
    }
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    drop_poll();
    return;
  }
  if (poll_ && (fd != poll_fd_ || st.st_ino != poll_ino_)) drop_poll();
  if (!poll_) {
    poll_ = new uv_poll_t;
    // uv_poll_stop (in drop_poll) already freed the loop's slot for this fd
    // number, so a new socket with the old number can be polled at once.
    if (uv_poll_init(loop_, poll_, fd) != 0) {
      delete poll_;
      poll_ = nullptr;
      return;
    }
    poll_->data = this;
    ++handles_;
    // The C client opens its sockets without close-on-exec: a program the host
    // executes must not inherit the connection.
    fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    poll_fd_ = fd;
    poll_ino_ = st.st_ino;
    poll_events_ = 0;
  }
  if (events == poll_events_) return;
  poll_events_ = events;
  uv_poll_start(poll_, events, [](uv_poll_t* p, int status, int ev) {
    auto* self = static_cast<UvZk*>(p->data);
    int zev = 0;
    if (status < 0) {
      // Let the library see the error.
      zev = ZOOKEEPER_READ | ZOOKEEPER_WRITE;
    } else {
      if (ev & UV_READABLE) zev |= ZOOKEEPER_READ;
      if (ev & UV_WRITABLE) zev |= ZOOKEEPER_WRITE;
    }
    self->process(zev);
  });
}

void UvZk::drop_poll() {
  if (!poll_) return;
  uv_poll_stop(poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) {
    auto* self = static_cast<UvZk*>(h->data);
    delete reinterpret_cast<uv_poll_t*>(h);
    self->handle_closed();
  });
  poll_ = nullptr;
  poll_fd_ = -1;
  poll_events_ = 0;
}

void UvZk::abort_connection() {
  if (!zh_ || poll_fd_ < 0) return;
  // Only the socket we poll: the library may have closed it since, and its
  // number may now name another file of the process.
  struct stat st;
  if (fstat(poll_fd_, &st) != 0 || st.st_ino != poll_ino_) return;
  // The fd is the library's; shutdown() leaves it open for the library to
  // close, but every send on it fails at once.
  shutdown(poll_fd_, SHUT_RDWR);
}

void UvZk::close(std::function<void()> done) {
  if (closing_) return;
  closing_ = true;
  done_ = std::move(done);
  uv_timer_stop(&timer_);
  if (poll_) uv_poll_stop(poll_);
  // On a later loop turn: never inside a completion or watcher of this handle.
  uv_timer_start(
      &close_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<UvZk*>(t->data);
        if (self->zh_) {
          zookeeper_close(self->zh_);
          self->zh_ = nullptr;
        }
        self->drop_poll();
        auto on_closed = [](uv_handle_t* h) { static_cast<UvZk*>(h->data)->handle_closed(); };
        uv_close(reinterpret_cast<uv_handle_t*>(&self->timer_), on_closed);
        uv_close(reinterpret_cast<uv_handle_t*>(&self->close_timer_), on_closed);
      },
      0, 0);
}

void UvZk::handle_closed() {
  if (--handles_ == 0 && closing_) {
    auto done = std::move(done_);
    delete this;
    if (done) done();
  }
}

}  // namespace simba
