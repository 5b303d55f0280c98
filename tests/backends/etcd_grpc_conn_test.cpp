// The etcd transport's draining (ADR 0044), driven deterministically: a small
// HTTP/2 server of the test's own (libnghttp2 on the same libuv loop) answers
// gRPC calls, and sends GOAWAY with a chosen last stream id. The calls up to
// it finish on the old connection, the later ones come back "refused" (never
// processed, safe to send again), and the connection takes no new call; a
// connection whose stream ids run out drains the same way.
#ifdef SIMBA_WITH_ETCD
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <uv.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/etcd/grpc_conn.h"
#include "backend/open_handles.h"
#include "backends/simba_testing.h"

namespace {

using simba::OpenHandles;
using namespace simba::etcd_impl;
using namespace simba_testing;

// One client connection of the test server: answers each whole request with
// its own message and grpc-status 0, except that once `goaway_after`
// requests came, it first sends GOAWAY(`last_stream_id`) and then answers
// only the streams up to it.
class TinyServer {
 public:
  TinyServer(uv_loop_t* loop, int goaway_after, int32_t last_stream_id)
      : loop_(loop), goaway_after_(goaway_after), last_stream_id_(last_stream_id) {
    uv_tcp_init(loop_, &listener_);
    listener_.data = this;
    struct sockaddr_in a {};
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_bind(&listener_, reinterpret_cast<const struct sockaddr*>(&a), 0);
    uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 4, on_connection);
    int len = sizeof addr_;
    uv_tcp_getsockname(&listener_, reinterpret_cast<struct sockaddr*>(&addr_), &len);
  }
  ~TinyServer() {
    if (h2_) nghttp2_session_del(h2_);
  }
  void close() {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    if (accepted_) uv_close(reinterpret_cast<uv_handle_t*>(&conn_), nullptr);
  }
  const struct sockaddr* addr() const { return reinterpret_cast<const struct sockaddr*>(&addr_); }
  std::vector<int32_t> answered;  // stream ids, in order
  std::vector<int32_t> requests;  // whole requests received

 private:
  struct Request {
    std::string body;  // gRPC frames received
    std::string out;   // the answer's DATA
    size_t off = 0;
  };

  static void on_connection(uv_stream_t* l, int status) {
    auto* self = static_cast<TinyServer*>(l->data);
    ASSERT_EQ(status, 0);
    uv_tcp_init(self->loop_, &self->conn_);
    self->conn_.data = self;
    ASSERT_EQ(uv_accept(l, reinterpret_cast<uv_stream_t*>(&self->conn_)), 0);
    self->accepted_ = true;
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_server_new(&self->h2_, cb, self);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(self->h2_, NGHTTP2_FLAG_NONE, nullptr, 0);
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&self->conn_),
        [](uv_handle_t*, size_t, uv_buf_t* b) {
          static char mem[65536];
          *b = uv_buf_init(mem, sizeof mem);
        },
        on_read);
    self->flush();
  }
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* self = static_cast<TinyServer*>(s->data);
    if (n < 0) {
      uv_read_stop(s);
      return;
    }
    nghttp2_session_mem_recv(self->h2_, reinterpret_cast<const uint8_t*>(buf->base),
                             static_cast<size_t>(n));
    self->respond();
    self->flush();
    // Once GOAWAY went and every stream up to it was answered: close, as
    // grpc-go's graceful stop does.
    if (self->goaway_sent_ && nghttp2_session_want_write(self->h2_) == 0) self->maybe_close();
  }
  void maybe_close() {
    for (int32_t id : requests) {
      if (id <= last_stream_id_ && !answered_set(id)) return;
    }
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&conn_));
    uv_shutdown_t* req = new uv_shutdown_t;
    uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&conn_),
                [](uv_shutdown_t* r, int) { delete r; });
  }
  bool answered_set(int32_t id) const {
    for (int32_t a : answered) {
      if (a == id) return true;
    }
    return false;
  }
  void respond() {
    const bool goaway = goaway_after_ > 0 && static_cast<int>(requests.size()) >= goaway_after_;
    if (goaway && !goaway_sent_) {
      nghttp2_submit_goaway(h2_, NGHTTP2_FLAG_NONE, last_stream_id_, NGHTTP2_NO_ERROR, nullptr, 0);
      goaway_sent_ = true;
    } else if (goaway_after_ > 0 && !goaway) {
      return;  // the requests wait for the GOAWAY
    }
    for (int32_t id : requests) {
      if (answered_set(id) || (goaway_sent_ && id > last_stream_id_)) continue;
      answered.push_back(id);
      Request& r = reqs_[id];
      r.out = r.body;  // echo: the same gRPC frame back
      static const char kStatus[] = ":status", k200[] = "200", kType[] = "content-type",
                        kGrpc[] = "application/grpc";
      const nghttp2_nv hdrs[] = {nv(kStatus, k200), nv(kType, kGrpc)};
      nghttp2_data_provider p;
      p.source.ptr = &r;
      p.read_callback = read_answer;
      nghttp2_submit_response(h2_, id, hdrs, 2, &p);
    }
  }
  static nghttp2_nv nv(const char* n, const char* v) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
            reinterpret_cast<uint8_t*>(const_cast<char*>(v)), std::strlen(n), std::strlen(v),
            NGHTTP2_NV_FLAG_NONE};
  }
  static ssize_t read_answer(nghttp2_session* s, int32_t id, uint8_t* buf, size_t len,
                             uint32_t* flags, nghttp2_data_source* src, void*) {
    auto* r = static_cast<Request*>(src->ptr);
    const size_t n = std::min(len, r->out.size() - r->off);
    std::memcpy(buf, r->out.data() + r->off, n);
    r->off += n;
    if (r->off == r->out.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      static const char kStatus[] = "grpc-status", k0[] = "0";
      const nghttp2_nv t[] = {nv(kStatus, k0)};
      nghttp2_submit_trailer(s, id, t, 1);
    }
    return static_cast<ssize_t>(n);
  }
  static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t n, void* ud) {
    static_cast<TinyServer*>(ud)->reqs_[id].body.append(reinterpret_cast<const char*>(d), n);
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* f, void* ud) {
    auto* self = static_cast<TinyServer*>(ud);
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      self->requests.push_back(f->hd.stream_id);
    }
    return 0;
  }
  void flush() {
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(h2_, &data);
      if (n <= 0) break;
      auto* req = static_cast<uv_write_t*>(std::malloc(sizeof(uv_write_t) + n));
      char* copy = reinterpret_cast<char*>(req + 1);
      std::memcpy(copy, data, static_cast<size_t>(n));
      uv_buf_t b = uv_buf_init(copy, static_cast<unsigned>(n));
      uv_write(req, reinterpret_cast<uv_stream_t*>(&conn_), &b, 1,
               [](uv_write_t* r, int) { std::free(r); });
    }
  }

  uv_loop_t* loop_;
  int goaway_after_;
  int32_t last_stream_id_;
  uv_tcp_t listener_;
  uv_tcp_t conn_;
  bool accepted_ = false;
  bool goaway_sent_ = false;
  struct sockaddr_storage addr_ {};
  nghttp2_session* h2_ = nullptr;
  std::map<int32_t, Request> reqs_;
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
    const int64_t until = mono_ns() + limit_ms * kMsNs;
    while (!done() && mono_ns() < until) {
      uv_timer_start(
          &tick_, [](uv_timer_t*) {}, 5, 0);
      uv_run(&loop_, UV_RUN_ONCE);
    }
    return done();
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

}  // namespace

#endif  // SIMBA_WITH_ETCD
