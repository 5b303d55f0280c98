// One libpq connection driven by a libuv loop, never blocking it: connects with
// PQconnectStartParams/PQconnectPoll, sends one query at a time (the others
// wait in a queue), and reads results and notifications as the socket becomes
// readable.
//
// libpq replaces its socket while connecting (another address, an SSL retry,
// the next host of a list), and the new socket often gets the same descriptor
// number. A uv_poll_t is bound to the socket it was made for, so after every
// libpq call that may switch, the poll handle is remade when the descriptor's
// number or inode changed.
#ifndef SIMBA_BACKEND_POSTGRES_UV_PQ_H
#define SIMBA_BACKEND_POSTGRES_UV_PQ_H

#include <libpq-fe.h>
#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace simba {

class UvPq {
 public:
  struct Handlers {
    std::function<void()> on_ready;  // connected; queries can run
    // The (last, or first failed) result of the query sent with `tag`; the
    // result is freed when the handler returns.
    std::function<void(uint64_t tag, const PGresult* result)> on_result;
    // The query sent with `tag` just went on the wire (queries go one at a time).
    std::function<void(uint64_t tag)> on_sent;
    std::function<void(const std::string& channel, const std::string& payload)> on_notify;
    // The connection failed or was lost; runs once, never after close().
    std::function<void(const std::string& why)> on_dead;
    // Everything of the connection is gone from the loop (runs once, after
    // close(); possibly inside close()).
    std::function<void()> on_closed;
  };

  // A new connection object; it frees itself after close(). Call start() next.
  static UvPq* create(uv_loop_t* loop, Handlers handlers);

  // Starts connecting with libpq's keyword/value options. False (with `why`)
  // when libpq refuses at once; on_dead is not called then.
  bool start(const std::vector<std::pair<std::string, std::string>>& options, std::string* why);

  enum class Mode {
    kParams,    // PQsendQueryParams, text parameters (one statement)
    kSimple,    // PQsendQuery: several statements allowed, no parameters
    kPrepared,  // PQsendQueryPrepared: `sql` names a statement prepared on
                // this connection (by an SQL PREPARE sent before)
  };
  // Queues a query. `urgent` queries go ahead of the ordinary ones queued
  // (keep-alives must not wait behind a burst of acquires); among themselves,
  // in order.
  void send(uint64_t tag, const std::string& sql, std::vector<std::string> params,
            Mode mode = Mode::kParams, bool urgent = false);

  // Reads what the socket already holds and delivers it, as a readable event
  // would. libuv runs timers before it polls, so after a long loop turn a
  // call can be abandoned (its caller's timer) while its answer waits in the
  // socket: reading first tells an answer that is late from one that never
  // came.
  void read_now() {
    if (state_ == State::kReady) io(true, false);
  }

  // Ends the connection now (PQfinish); no handler but on_closed runs after.
  void close();

  bool ready() const { return state_ == State::kReady; }
  // Queries sent or queued and not answered yet.
  size_t pending() const { return queue_.size() + (in_flight_ ? 1 : 0); }

 private:
  enum class State { kIdle, kConnecting, kReady, kDead, kClosed };
  struct Query {
    uint64_t tag;
    std::string sql;
    std::vector<std::string> params;
    Mode mode;
    bool urgent;
  };
  struct Poll {
    uv_poll_t handle;
    UvPq* owner;
  };

  UvPq(uv_loop_t* loop, Handlers handlers) : loop_(loop), h_(std::move(handlers)) {}
  ~UvPq();

  static void on_poll(uv_poll_t* handle, int status, int events);
  void connect_step();
  void io(bool readable, bool writable);
  void send_next();
  bool flush();
  void die(const std::string& why);
  bool watch(int events);
  void drop_poll();
  void maybe_free();
  std::string pq_error() const;

  uv_loop_t* loop_;
  Handlers h_;
  PGconn* pg_ = nullptr;
  State state_ = State::kIdle;
  Poll* poll_ = nullptr;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  int events_ = 0;
  int polls_open_ = 0;  // poll handles not yet closed
  bool want_write_ = false;
  std::deque<Query> queue_;
  bool in_flight_ = false;
  uint64_t in_flight_tag_ = 0;
  PGresult* result_ = nullptr;  // kept until the query's last result arrived
};

}  // namespace simba

#endif
