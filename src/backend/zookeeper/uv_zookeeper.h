// One libzookeeper_st handle driven by a libuv loop: zookeeper_interest() says
// which socket to poll, for what, and when to call again; zookeeper_process()
// does the I/O and runs the completions and watchers. No thread of its own.
//
// The client replaces its socket on every reconnect, and the new socket often
// gets the same fd number: the uv_poll_t is re-made whenever the fd number or
// its inode changes (PITFALLS.md). zookeeper_close() may block (it sends a close
// request and waits up to 1.5 s for the answer), so close() runs it on a later
// loop turn, outside every ZooKeeper callback, after abort_connection() when the
// server is not answering.
#ifndef SIMBA_BACKEND_ZOOKEEPER_UV_ZOOKEEPER_H
#define SIMBA_BACKEND_ZOOKEEPER_UV_ZOOKEEPER_H

#include <sys/types.h>
#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <functional>
#include <string>

namespace simba {

class UvZk {
 public:
  // A watcher event: the session's (type ZOO_SESSION_EVENT) or a path's.
  using EventFn = std::function<void(int type, int state, const std::string& path)>;

  // Starts a handle for `hosts` ("ip:port,ip:port", addresses only: the
  // library would resolve names with a blocking call) asking for a session
  // timeout of `timeout_ms`. nullptr on failure (`error` set).
  static UvZk* open(uv_loop_t* loop, const std::string& hosts, int timeout_ms, EventFn on_event,
                    std::string* error);

  zhandle_t* zh() const { return zh_; }
  // The watcher function and context to pass to zoo_aw*() for path watches.
  static watcher_fn watcher() { return &UvZk::on_watch; }
  void* watcher_ctx() { return this; }

  // Call after queuing requests outside a ZooKeeper callback: updates what is
  // polled (a request the library could not write at once needs WRITABLE).
  void kick();
  // Cuts the TCP connection now, so that zookeeper_close() sends nothing and
  // does not wait for a server that is not answering. The session is left to
  // expire on the server.
  void abort_connection();
  // Stops all I/O; on a later loop turn closes the handle (completions the
  // library runs from zookeeper_close() must check their owner's state), then
  // the uv handles, then runs `done` and deletes this object.
  void close(std::function<void()> done);
  bool closing() const { return closing_; }

 private:
  UvZk(uv_loop_t* loop, EventFn on_event);
  ~UvZk() = default;

  void pump();
  void process(int events);
  void set_poll(int fd, int events);
  void drop_poll();
  void handle_closed();
  static void on_watch(zhandle_t* zh, int type, int state, const char* path, void* ctx);

  uv_loop_t* loop_;
  EventFn on_event_;
  zhandle_t* zh_ = nullptr;
  uv_poll_t* poll_ = nullptr;
  int poll_fd_ = -1;
  ino_t poll_ino_ = 0;
  int poll_events_ = 0;
  uv_timer_t timer_;
  uv_timer_t close_timer_;
  int depth_ = 0;        // > 0 while inside zookeeper_interest/process
  bool kicked_ = false;  // a request was queued during a library call
  bool closing_ = false;
  int handles_ = 0;
  std::function<void()> done_;
};

}  // namespace simba

#endif
