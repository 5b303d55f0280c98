// The etcd transport's draining (ADR 0044), driven deterministically: a small
// HTTP/2 server of the test's own (libnghttp2 on the same libuv loop) answers
// gRPC calls, and sends GOAWAY with a chosen last stream id. The calls up to
// it finish on the old connection, the later ones come back "refused" (never
// processed, safe to send again), and the connection takes no new call; a
// connection whose stream ids run out drains the same way.
#ifdef SIMBA_WITH_ETCD
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <signal.h>
#include <uv.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/etcd/grpc_conn.h"
#include "backend/open_handles.h"
#include "backends/backend_on_loop.h"
#include "backends/etcd_flow.h"
#include "backends/simba_testing.h"

namespace {

using simba::OpenHandles;
using simba::OpenReply;
using simba::Outcome;
using namespace simba::etcd_impl;
using namespace simba_testing;

// The server side of one HTTP/2 client connection (libnghttp2) on a libuv
// loop, for the test servers below: listener, session, reads and writes, and
// gRPC answers (DATA, then grpc-status in the trailers). A second client
// connection is refused.
class H2Server {
 public:
  // An answer being sent: DATA from `out`, then, once `done`, the trailers.
  struct Answer {
    int32_t id = 0;
    std::string out;
    size_t off = 0;
    bool done = false, submitted = false;
    int status = 0;
  };

  explicit H2Server(uv_loop_t* loop) : loop_(loop) {
    uv_tcp_init(loop_, &listener_);
    listener_.data = this;
    struct sockaddr_in a {};
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_bind(&listener_, reinterpret_cast<const struct sockaddr*>(&a), 0);
    uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 4, on_connection);
    int len = sizeof addr_;
    uv_tcp_getsockname(&listener_, reinterpret_cast<struct sockaddr*>(&addr_), &len);
  }
  virtual ~H2Server() {
    if (h2_) nghttp2_session_del(h2_);
  }
  H2Server(const H2Server&) = delete;
  H2Server& operator=(const H2Server&) = delete;
  const struct sockaddr* addr() const { return reinterpret_cast<const struct sockaddr*>(&addr_); }
  int port() const { return ntohs(reinterpret_cast<const struct sockaddr_in*>(&addr_)->sin_port); }
  void close() {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    if (accepted_) uv_close(reinterpret_cast<uv_handle_t*>(&conn_), nullptr);
  }

 protected:
  // The session's callbacks (user data: this object).
  virtual void callbacks(nghttp2_session_callbacks* cb) = 0;
  // After the bytes of a read went through the session.
  virtual void received() {}
  // Once the client connection's session exists (its SETTINGS queued).
  virtual void accepted() {}

  static std::string frame(const std::string& m) {
    std::string out(5, '\0');
    for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>((m.size() >> (24 - 8 * i)) & 0xff);
    return out + m;
  }
  // Sends what `a` has now: headers the first time, else more DATA.
  void answer(Answer* a) {
    if (!a->submitted) {
      a->submitted = true;
      static const char kStatus[] = ":status", k200[] = "200", kType[] = "content-type",
                        kGrpc[] = "application/grpc";
      const nghttp2_nv hdrs[] = {nv(kStatus, k200), nv(kType, kGrpc)};
      nghttp2_data_provider p;
      p.source.ptr = a;
      p.read_callback = read_answer;
      nghttp2_submit_response(h2_, a->id, hdrs, 2, &p);
    } else {
      nghttp2_session_resume_data(h2_, a->id);
    }
    flush();
  }
  void start_reading() {
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&conn_),
        [](uv_handle_t*, size_t, uv_buf_t* b) {
          static thread_local char mem[65536];
          *b = uv_buf_init(mem, sizeof mem);
        },
        on_read);
  }
  void flush() {
    if (!h2_) return;
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(h2_, &data);
      if (n <= 0) break;
      auto* req = static_cast<uv_write_t*>(std::malloc(sizeof(uv_write_t) + n));
      char* copy = reinterpret_cast<char*>(req + 1);
      std::memcpy(copy, data, static_cast<size_t>(n));
      uv_buf_t b = uv_buf_init(copy, static_cast<unsigned>(n));
      if (uv_write(req, reinterpret_cast<uv_stream_t*>(&conn_), &b, 1,
                   [](uv_write_t* r, int) { std::free(r); }) != 0) {
        std::free(req);
      }
    }
  }

  uv_loop_t* loop_;
  uv_tcp_t listener_, conn_;
  bool accepted_ = false;
  bool paused_ = false;  // reads nothing until start_reading()
  nghttp2_session* h2_ = nullptr;

 private:
  static nghttp2_nv nv(const char* n, const char* v) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
            reinterpret_cast<uint8_t*>(const_cast<char*>(v)), std::strlen(n), std::strlen(v),
            NGHTTP2_NV_FLAG_NONE};
  }
  static ssize_t read_answer(nghttp2_session* h2, int32_t id, uint8_t* buf, size_t len,
                             uint32_t* flags, nghttp2_data_source* src, void*) {
    auto* a = static_cast<Answer*>(src->ptr);
    const size_t n = std::min(len, a->out.size() - a->off);
    std::memcpy(buf, a->out.data() + a->off, n);
    a->off += n;
    if (n > 0) return static_cast<ssize_t>(n);
    if (!a->done) return NGHTTP2_ERR_DEFERRED;
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    static const char kName[] = "grpc-status";
    static const char* const kCodes[] = {"0", "1",  "2",  "3",  "4",  "5",  "6",  "7", "8",
                                         "9", "10", "11", "12", "13", "14", "15", "16"};
    const nghttp2_nv t[] = {nv(kName, kCodes[a->status >= 0 && a->status <= 16 ? a->status : 2])};
    nghttp2_submit_trailer(h2, id, t, 1);
    return 0;
  }
  static void on_connection(uv_stream_t* l, int) {
    auto* self = static_cast<H2Server*>(l->data);
    if (self->accepted_) {
      auto* t = new uv_tcp_t;
      uv_tcp_init(self->loop_, t);
      uv_accept(l, reinterpret_cast<uv_stream_t*>(t));
      uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) { delete h; });
      return;
    }
    uv_tcp_init(self->loop_, &self->conn_);
    self->conn_.data = self;
    uv_accept(l, reinterpret_cast<uv_stream_t*>(&self->conn_));
    self->accepted_ = true;
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    self->callbacks(cb);
    nghttp2_session_server_new(&self->h2_, cb, self);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(self->h2_, NGHTTP2_FLAG_NONE, nullptr, 0);
    self->accepted();
    if (!self->paused_) self->start_reading();
    self->flush();
  }
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* self = static_cast<H2Server*>(s->data);
    if (n < 0) {
      uv_read_stop(s);
      return;
    }
    nghttp2_session_mem_recv(self->h2_, reinterpret_cast<const uint8_t*>(buf->base),
                             static_cast<size_t>(n));
    self->received();
    self->flush();
  }

  struct sockaddr_storage addr_ {};
};

// FNV-1a of `s`, and its size.
std::string digest(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return std::to_string(s.size()) + ":" + std::to_string(h);
}

// Answers each whole request with its own message and grpc-status 0 (its
// digest above 1 MiB), except
// that once `goaway_after` requests came, it first sends
// GOAWAY(`last_stream_id`) and then answers only the streams up to it.
class TinyServer : public H2Server {
 public:
  TinyServer(uv_loop_t* loop, int goaway_after, int32_t last_stream_id)
      : H2Server(loop), goaway_after_(goaway_after), last_stream_id_(last_stream_id) {}
  // Grants the client 1 GiB of flow-control window and reads nothing until
  // read(): the client's writes fill the socket.
  void stall() { paused_ = true; }
  void read() { start_reading(); }
  std::vector<int32_t> answered;  // stream ids, in order
  std::vector<int32_t> requests;  // whole requests received

 private:
  void callbacks(nghttp2_session_callbacks* cb) override {
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
  }
  void accepted() override {
    if (!paused_) return;
    const nghttp2_settings_entry window{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 30};
    nghttp2_submit_settings(h2_, NGHTTP2_FLAG_NONE, &window, 1);
    nghttp2_submit_window_update(h2_, NGHTTP2_FLAG_NONE, 0, (1 << 30) - 65535);
  }
  void received() override {
    const bool goaway = goaway_after_ > 0 && static_cast<int>(requests.size()) >= goaway_after_;
    if (goaway && !goaway_sent_) {
      nghttp2_submit_goaway(h2_, NGHTTP2_FLAG_NONE, last_stream_id_, NGHTTP2_NO_ERROR, nullptr, 0);
      goaway_sent_ = true;
    } else if (goaway_after_ > 0 && !goaway) {
      return;  // the requests wait for the GOAWAY
    }
    for (int32_t id : requests) {
      Answer& a = answers_[id];
      if (a.submitted || (goaway_sent_ && id > last_stream_id_)) continue;
      answered.push_back(id);
      a.id = id;
      a.done = true;
      // A big request is answered with its digest (an echo would take long).
      if (a.out.size() > (1 << 20)) a.out = frame(digest(a.out.substr(5)));
      answer(&a);
    }
  }
  static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* ud) {
    static_cast<TinyServer*>(ud)->answers_[id].out.append(reinterpret_cast<const char*>(d), n);
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* f, void* ud) {
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      static_cast<TinyServer*>(ud)->requests.push_back(f->hd.stream_id);
    }
    return 0;
  }

  int goaway_after_;
  int32_t last_stream_id_;
  bool goaway_sent_ = false;
  std::map<int32_t, Answer> answers_;  // echo: the request's gRPC frames, sent back
};

struct Result {
  int status = 99;  // not closed yet
  std::string message, error;
};

class EtcdGrpcConn : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    uv_timer_init(&loop_, &tick_);
  }
  void TearDown() override {
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  int32_t call(GrpcConn* conn, const std::string& msg, Result* r) {
    return conn->start(
        "/test.Echo/Call", msg, true,
        [r](const uint8_t* d, size_t n) { r->message.assign(reinterpret_cast<const char*>(d), n); },
        [r](int status, const std::string& err) {
          r->status = status;
          r->error = err;
        });
  }
  bool run_until(const std::function<bool()>& done, int64_t limit_ms) {
    return simba_testing::run_loop_until(&loop_, &tick_, done, limit_ms);
  }
  // The connection and the server closed, and their handles let go of
  // (the server's live in the test's frame).
  void finish(GrpcConn* conn, TinyServer* server) {
    conn->close();
    server->close();
    uv_timer_stop(&tick_);
    for (int i = 0; i < 4; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  }

  uv_loop_t loop_;
  uv_timer_t tick_;
  OpenHandles handles_;
};

// GOAWAY(last stream 3) after three calls (streams 1, 3, 5): 1 and 3 are
// answered on this connection after the GOAWAY, 5 comes back refused (the
// server never processed it), the owner is told once before that, no new
// call starts here, and once drained the connection ends as "drained".
TEST_F(EtcdGrpcConn, GoawayFinishesTheStreamsUpToItsLastIdAndRefusesTheRest) {
  TinyServer server(&loop_, 3, 3);
  std::string broken, drained;
  int drains = 0;
  bool refused_after_drain = false;
  Result r[3];
  auto* conn = new GrpcConn(&loop_, &handles_, server.addr(), "127.0.0.1",
                            [&](GrpcConn*, const std::string& why) { broken = why; });
  conn->on_drain([&](GrpcConn* c, const std::string& why) {
    ++drains;
    drained = why;
    EXPECT_FALSE(c->accepting());
    EXPECT_EQ(r[2].status, 99) << "the owner hears of the drain before any refused call";
  });
  EXPECT_EQ(call(conn, "one", &r[0]), 1);
  EXPECT_EQ(call(conn, "two", &r[1]), 3);
  EXPECT_EQ(call(conn, "three", &r[2]), 5);
  ASSERT_TRUE(run_until([&] { return !broken.empty(); }, 5000))
      << "statuses " << r[0].status << " " << r[1].status << " " << r[2].status;
  refused_after_drain = drains == 1;
  EXPECT_TRUE(refused_after_drain);
  EXPECT_NE(drained.find("GOAWAY (error 0, last stream 3)"), std::string::npos) << drained;
  EXPECT_EQ(r[0].status, 0) << r[0].error;
  EXPECT_EQ(r[0].message, "one");
  EXPECT_EQ(r[1].status, 0) << r[1].error;
  EXPECT_EQ(r[1].message, "two");
  EXPECT_EQ(r[2].status, kGrpcRefused) << r[2].error;
  EXPECT_TRUE(r[2].message.empty());
  EXPECT_EQ(server.answered, (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(conn->draining());
  EXPECT_FALSE(conn->accepting());
  Result late;
  EXPECT_EQ(call(conn, "late", &late), 0) << "a draining connection takes no new call";
  EXPECT_NE(broken.find("drained"), std::string::npos) << broken;
  finish(conn, &server);
}

// A connection whose stream ids are used up (here after stream 3) drains
// the same way: its calls are answered, it takes no new one, then ends.
TEST_F(EtcdGrpcConn, UsedUpStreamIdsDrainTheConnection) {
  TinyServer server(&loop_, 0, 0);
  std::string broken;
  int drains = 0;
  auto* conn = new GrpcConn(
      &loop_, &handles_, server.addr(), "127.0.0.1",
      [&](GrpcConn*, const std::string& why) { broken = why; }, nullptr, "", 3);
  conn->on_drain([&](GrpcConn*, const std::string&) { ++drains; });
  Result r[2];
  EXPECT_EQ(call(conn, "one", &r[0]), 1);
  EXPECT_TRUE(conn->accepting());
  EXPECT_EQ(call(conn, "two", &r[1]), 3);
  EXPECT_FALSE(conn->accepting()) << "stream 3 was its last";
  Result late;
  EXPECT_EQ(call(conn, "late", &late), 0);
  ASSERT_TRUE(run_until([&] { return !broken.empty(); }, 5000));
  EXPECT_EQ(r[0].status, 0) << r[0].error;
  EXPECT_EQ(r[0].message, "one");
  EXPECT_EQ(r[1].status, 0) << r[1].error;
  EXPECT_EQ(r[1].message, "two");
  EXPECT_EQ(broken, "drained (stream ids used up)");
  EXPECT_EQ(drains, 0) << "the owner sees it by accepting(): no callback from inside start()";
  finish(conn, &server);
}

// A gRPC proxy in front of a real etcd, on a thread and loop of its own:
// each stream of the client is relayed on a stream of a GrpcConn to etcd.
// goaway() makes it hold the streams that start from then on (never sent to
// etcd) until two are held, then send GOAWAY with the last stream it relayed:
// the calls up to it finish through it, the held ones are the client's to
// send again elsewhere.
struct OwnLoop {
  OwnLoop() { uv_loop_init(&loop); }
  uv_loop_t loop;
};

class GoawayProxy : private OwnLoop, public H2Server {
 public:
  explicit GoawayProxy(const struct sockaddr_in& upstream) : H2Server(&loop), upstream_(upstream) {
    uv_async_init(&loop, &async_, on_async);
    async_.data = this;
    thread_ = std::thread([this] {
      // Its writes to a client that went away must not kill the test (the
      // library's own never raise SIGPIPE: GrpcConn sends with MSG_NOSIGNAL).
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      uv_run(&loop, UV_RUN_DEFAULT);
    });
  }
  ~GoawayProxy() override {
    stop_ = true;
    uv_async_send(&async_);
    thread_.join();
    uv_loop_close(&loop);
  }
  void goaway() {
    hold_ = true;
    uv_async_send(&async_);
  }
  std::atomic<int> held{0};                // streams never relayed (refused by the GOAWAY)
  std::atomic<int> after_goaway{0};        // relayed streams that ended after the GOAWAY
  std::atomic<int32_t> last_stream_id{0};  // of the GOAWAY, once sent

 private:
  struct S {
    Answer a;
    int32_t up = 0;
    std::string path, in, first;
    bool bidi = false, started = false, held = false;
  };

  static void on_async(uv_async_t* h) {
    auto* self = static_cast<GoawayProxy*>(h->data);
    if (!self->stop_) return;
    if (self->up_) self->up_->close();
    self->up_ = nullptr;
    self->close();
    uv_close(reinterpret_cast<uv_handle_t*>(&self->async_), nullptr);
  }
  void callbacks(nghttp2_session_callbacks* cb) override {
    up_ = new GrpcConn(&loop, &handles_, reinterpret_cast<const struct sockaddr*>(&upstream_),
                       "127.0.0.1", [](GrpcConn*, const std::string&) {});
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  }
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* ud) {
    auto& st = static_cast<GoawayProxy*>(ud)->streams_[f->hd.stream_id];
    st = std::make_unique<S>();
    st->a.id = f->hd.stream_id;
    return 0;
  }
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
    S* st = static_cast<GoawayProxy*>(ud)->find(f->hd.stream_id);
    if (!st || std::string(reinterpret_cast<const char*>(name), namelen) != ":path") return 0;
    st->path.assign(reinterpret_cast<const char*>(value), valuelen);
    st->bidi = st->path.find("KeepAlive") != std::string::npos ||
               st->path.find("Watch/Watch") != std::string::npos;
    return 0;
  }
  static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* ud) {
    auto* self = static_cast<GoawayProxy*>(ud);
    S* st = self->find(id);
    if (!st) return 0;
    st->in.append(reinterpret_cast<const char*>(d), n);
    while (st->in.size() >= 5) {
      const auto* p = reinterpret_cast<const uint8_t*>(st->in.data());
      const size_t len = static_cast<size_t>(p[1]) << 24 | static_cast<size_t>(p[2]) << 16 |
                         static_cast<size_t>(p[3]) << 8 | p[4];
      if (st->in.size() < 5 + len) break;
      std::string msg = st->in.substr(5, len);
      st->in.erase(0, 5 + len);
      if (st->held) continue;
      if (!st->started && !st->bidi) {
        st->first = std::move(msg);  // relayed at END_STREAM
      } else if (!st->started) {
        self->relay(*st, msg, false);
      } else if (self->up_) {
        self->up_->send(st->up, msg);
      }
    }
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* f, void* ud) {
    auto* self = static_cast<GoawayProxy*>(ud);
    if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      return 0;
    }
    S* st = self->find(f->hd.stream_id);
    if (!st || st->held) return 0;
    if (!st->bidi && !st->started) {
      self->relay(*st, st->first, true);
    } else if (st->started && self->up_) {
      self->up_->finish(st->up);
    }
    return 0;
  }
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* ud) {
    auto* self = static_cast<GoawayProxy*>(ud);
    auto it = self->streams_.find(id);
    if (it == self->streams_.end()) return 0;
    S& st = *it->second;
    if (st.started && !st.a.done && self->up_) self->up_->cancel(st.up);
    if (self->goaway_sent_ && st.started) ++self->after_goaway;
    self->dead_.push_back(std::move(it->second));  // its data source may still be read
    self->streams_.erase(it);
    return 0;
  }
  // The stream goes to etcd, unless the GOAWAY is coming: then it is held.
  void relay(S& st, const std::string& msg, bool unary) {
    if (hold_ && !goaway_sent_) {
      st.held = true;
      if (++held >= 2) {
        goaway_sent_ = true;
        last_stream_id = last_relayed_;
        nghttp2_submit_goaway(h2_, NGHTTP2_FLAG_NONE, last_relayed_, NGHTTP2_NO_ERROR, nullptr, 0);
      }
      return;
    }
    if (goaway_sent_ || !up_) return;  // above the GOAWAY's last stream: never relayed
    st.started = true;
    last_relayed_ = std::max(last_relayed_, st.a.id);
    const int32_t id = st.a.id;
    st.up = up_->start(
        st.path.c_str(), msg, unary,
        [this, id](const uint8_t* d, size_t n) {
          if (S* s = find(id)) {
            s->a.out += frame(std::string(reinterpret_cast<const char*>(d), n));
            answer(&s->a);
          }
        },
        [this, id](int status, const std::string&) {
          if (S* s = find(id)) {
            s->a.done = true;
            s->a.status = status < 0 ? 14 : status;  // UNAVAILABLE
            answer(&s->a);
          }
        });
  }
  S* find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  struct sockaddr_in upstream_;
  uv_async_t async_;
  std::thread thread_;
  bool goaway_sent_ = false;
  std::atomic<bool> hold_{false}, stop_{false};
  int32_t last_relayed_ = 0;
  OpenHandles handles_;
  GrpcConn* up_ = nullptr;
  std::map<int32_t, std::unique_ptr<S>> streams_;
  std::vector<std::unique_ptr<S>> dead_;
};

// The backend behind GoawayProxy (the URL's first member; the real etcd is
// the second): calls flow, terms are held and a name is watched when the
// proxy sends GOAWAY. The calls it relayed finish through it, the held ones
// are sent again to the next member without the caller seeing them, the
// keep-alive and watch streams move there, and nothing fails.
TEST(EtcdGoaway, CallsFlowAcrossAGracefulGoawayWithNoFailure) {
  const char* url = std::getenv("SIMBA_TEST_ETCD_URL");
  if (!url || !*url) GTEST_SKIP() << "SIMBA_TEST_ETCD_URL is not set (scripts/test.sh sets it)";
  const std::string endpoint = std::string(url).substr(std::string("etcd://").size());
  const size_t colon = endpoint.rfind(':');
  struct sockaddr_in up {};
  ASSERT_EQ(
      uv_ip4_addr(endpoint.substr(0, colon).c_str(), std::atoi(endpoint.c_str() + colon + 1), &up),
      0);
  GoawayProxy proxy(up);
  const std::string prefix = "/etcd-goaway-" + unique_id();
  BackendOnLoop b("etcd://127.0.0.1:" + std::to_string(proxy.port()) + "," + endpoint + prefix);
  ASSERT_TRUE(b) << b.error();
  BackendOnLoop other(std::string(url) + prefix);
  int released = 0;
  b->on_released([&](const std::string& n, const simba::Grant&) { released += n == "watched"; });
  const OpenReply s = open_session(b);
  ASSERT_EQ(s.outcome, Outcome::kOk) << s.error;
  const OpenReply o = open_session(other);
  ASSERT_EQ(o.outcome, Outcome::kOk) << o.error;
  Flow held_by_other(other, o.session_id);
  held_by_other.acquire("watched", true);
  ASSERT_TRUE(other.run_until([&] { return held_by_other.pending == 0; }, 5000));
  b->watch("watched");
  Flow f(b, s.session_id);
  for (int i = 0; i < 5; ++i) f.acquire("held-" + std::to_string(i), true);
  ASSERT_TRUE(b.run_until([&] { return f.pending == 0; }, 10000));
  ASSERT_EQ(f.held.size(), 5u);
  const int64_t start = mono_ns();
  bool sent = false;
  for (int round = 0; mono_ns() - start < 2000 * kMsNs; ++round) {
    for (int i = 0; i < 4; ++i) {
      f.acquire("flow-" + std::to_string(round) + "-" + std::to_string(i), false);
    }
    f.keep_alive();
    if (!sent && mono_ns() - start > 500 * kMsNs) {
      proxy.goaway();
      sent = true;
    }
    b.run_until([&] { return f.pending < 3; }, 10000);
  }
  ASSERT_TRUE(b.run_until([&] { return f.pending == 0; }, 10000)) << f.pending << " unanswered";
  for (const std::string& why : f.failures) ADD_FAILURE() << why;
  EXPECT_TRUE(
      b.logged("GOAWAY (error 0, last stream " + std::to_string(proxy.last_stream_id) + ")"));
  EXPECT_EQ(proxy.held, 2) << "the calls held by the proxy, refused by its GOAWAY";
  EXPECT_GT(proxy.after_goaway, 0) << "calls up to the GOAWAY's last stream finished through it";
  EXPECT_GT(f.keep_alives, 10);
  // The watch lives on, on the new connection (made again there, which
  // reported the name once): a release is delivered.
  const int released_before = released;
  held_by_other.release("watched", held_by_other.held["watched"]);
  ASSERT_TRUE(other.run_until([&] { return held_by_other.pending == 0; }, 5000));
  EXPECT_TRUE(b.run_until([&] { return released > released_before; }, 5000));
  EXPECT_TRUE(held_by_other.failures.empty());
  std::printf("%d calls ok, %d keep-alives, %d held and sent again, %d finished after GOAWAY\n",
              f.ok, f.keep_alives, proxy.held.load(), proxy.after_goaway.load());
}

// More than the socket takes while the server reads nothing (16 MiB, with
// the flow-control window to send it all): the rest waits for the socket to
// be writable, and goes out in order once the server reads.
TEST_F(EtcdGrpcConn, AWriteTheSocketCannotTakeWaitsForIt) {
  TinyServer server(&loop_, 0, 0);
  server.stall();
  std::string broken;
  auto* conn = new GrpcConn(&loop_, &handles_, server.addr(), "127.0.0.1",
                            [&](GrpcConn*, const std::string& why) { broken = why; });
  std::string big(16 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  Result r;
  // The server's window first (its SETTINGS), then the call.
  run_until([] { return false; }, 100);
  EXPECT_EQ(call(conn, big, &r), 1);
  run_until([] { return false; }, 200);
  EXPECT_EQ(r.status, 99);
  server.read();
  ASSERT_TRUE(run_until([&] { return r.status != 99; }, 20000)) << broken;
  EXPECT_EQ(r.status, 0) << r.error;
  EXPECT_EQ(r.message, digest(big)) << "the server read every byte, in order";
  EXPECT_TRUE(broken.empty()) << broken;
  finish(conn, &server);
}

}  // namespace

#endif  // SIMBA_WITH_ETCD
