// gRPC over one HTTP/2 connection (libnghttp2 on a uv_tcp_t of the client's
// loop, no thread of its own; ADR 0044): unary calls and bidirectional
// streams, each an HTTP/2 stream. Messages are protobuf bytes; the caller
// encodes and decodes them (etcd_rpc.pb-c.h).
//
// etcds://: TLS with OpenSSL on memory BIOs between nghttp2 and the socket
// (ALPN "h2", the certificate checked against the CA and the host name), as
// the Redis TLS pump does (ADR 0019), still on the loop with no thread.
//
// Callbacks never run inside a method of this class: they come from the
// socket's callbacks, or from a timer when the connection breaks.
#ifndef SIMBA_BACKEND_ETCD_GRPC_CONN_H
#define SIMBA_BACKEND_ETCD_GRPC_CONN_H

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/open_handles.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct bio_st BIO;

namespace simba::etcd_impl {

// grpc-status of a stream the connection lost (never a real gRPC code).
constexpr int kGrpcBroken = -1;
// grpc-status of a stream the server did not process (RST_STREAM
// REFUSED_STREAM, above a GOAWAY's last stream id, or never sent): it can go
// out again on another connection without the caller seeing it (RFC 9113
// 8.7).
constexpr int kGrpcRefused = -2;
// Client stream ids are odd and end at 2^31-1: a connection past this takes
// no new stream and drains (about 1.07 billion calls).
constexpr uint32_t kMaxStreamId = 0x7fffffff;
// gRPC codes the backend tells apart.
constexpr int kGrpcNotFound = 5;

class GrpcConn {
 public:
  // One whole message of a stream.
  using MessageFn = std::function<void(const uint8_t* data, size_t len)>;
  // The stream ended: its grpc-status (0 OK, kGrpcBroken when the connection
  // was lost or the server reset the stream) and the server's or our words.
  using CloseFn = std::function<void(int status, const std::string& error)>;

  // Connects to `addr` at once; the calls started meanwhile wait in nghttp2.
  // `on_broken` runs once (on a later loop turn) after the connection broke
  // and every stream's CloseFn ran; the owner then calls close(). With `tls`,
  // the server's certificate must carry `verify_name` (a name or an address).
  // `max_stream_id` lower than kMaxStreamId only in tests (replacements
  // every few calls).
  GrpcConn(uv_loop_t* loop, OpenHandles* handles, const struct sockaddr* addr,
           std::string authority, std::function<void(GrpcConn*, const std::string&)> on_broken,
           std::shared_ptr<SSL_CTX> tls = nullptr, std::string verify_name = "",
           uint32_t max_stream_id = kMaxStreamId);
  GrpcConn(const GrpcConn&) = delete;
  GrpcConn& operator=(const GrpcConn&) = delete;

  // Starts a stream on `path` ("/etcdserverpb.KV/Txn") with `message` as its
  // first message. A unary call half-closes after it; a bidirectional stream
  // stays open for send(). Returns the stream id, or 0 when the connection is
  // broken or draining (its callbacks then never run).
  int32_t start(const char* path, const std::string& message, bool unary, MessageFn on_message,
                CloseFn on_close);
  // One more message on an open bidirectional stream.
  void send(int32_t stream, const std::string& message);
  // The caller no longer wants `stream`: it is reset, its callbacks never run.
  void cancel(int32_t stream);
  // Half-closes an open bidirectional stream: the server answers what it
  // was sent and ends it (LeaseKeepAlive does); its callbacks still run.
  void finish(int32_t stream);

  // etcd's auth token, sent as `token` metadata on every stream started
  // from now on ("": none).
  void set_token(std::string token) { token_ = std::move(token); }
  const std::string& token() const { return token_; }
  // Runs once the TLS handshake is done, with what was agreed (for the log).
  void on_secure(std::function<void(const std::string&)> fn) { on_secure_ = std::move(fn); }

  bool broken() const { return broken_; }
  // Takes new streams: neither broken nor draining. A draining connection
  // (the server sent GOAWAY, or its stream ids ran out) lets its streams
  // finish, then breaks with `on_broken` ("drained").
  bool accepting() const { return !broken_ && !draining_; }
  bool draining() const { return draining_; }
  // Runs once (from a socket callback) when the server's GOAWAY made it
  // drain, with the reason: the owner moves new calls and long-lived
  // streams to another connection.
  void on_drain(std::function<void(GrpcConn*, const std::string&)> fn) {
    on_drain_ = std::move(fn);
  }
  // Whether the TCP connection (and TLS) was ever up (else nothing of ours
  // was sent: a member with a refused certificate is left like a dead one).
  bool connected() const { return connected_ && (!tls_ || tls_ready_); }
  const std::string& authority() const { return authority_; }
  // How long the connection has read nothing while a message we sent waited
  // (0 when it read something since our last message): a call abandoned
  // after long silence sat on a connection that is likely dead.
  uint64_t silent_ms() const { return silent_since_ ? uv_now(loop_) - silent_since_ : 0; }
  // Breaks the connection now: every stream's CloseFn, then on_broken, run
  // on a later loop turn.
  void fail(const std::string& why);
  // Closes the socket without running any callback; frees itself once the
  // loop let go of its handles.
  void close();

 private:
  struct Stream {
    int32_t id = 0;
    std::string body;  // gRPC frames not yet handed to nghttp2
    size_t body_off = 0;
    bool half_close = false;
    bool cancelled = false;
    bool sent = false;  // its HEADERS went out
    std::string in;     // DATA received, not yet a whole gRPC message
    int grpc_status = kGrpcBroken;
    std::string grpc_message;
    MessageFn on_message;
    CloseFn on_close;
  };
  // What the nghttp2 callbacks saw, run after nghttp2 returned (callbacks may
  // start streams, which nghttp2 does not allow from inside its own).
  struct Event {
    std::shared_ptr<Stream> stream;
    bool closed = false;
    bool refused = false;
    uint32_t h2_error = 0;
    std::string message;
  };

  ~GrpcConn();
  static std::string frame(const std::string& message);
  void flush();
  void write_raw();
  void handshake();
  bool recv_tls(const char* data, size_t len);
  void recv_h2(const uint8_t* data, size_t len);
  std::string tls_failure(const char* what, int rc);
  void dispatch();
  void broke();
  void drain(const std::string& why);
  static void on_connect(uv_connect_t* req, int status);
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  void send_unsent();
  static void on_fail_timer(uv_timer_t* t);
  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                           nghttp2_data_source* source, void*);
  static int on_data(nghttp2_session* s, uint8_t, int32_t sid, const uint8_t* data, size_t len,
                     void* ud);
  static int on_header(nghttp2_session* s, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud);
  static int on_frame(nghttp2_session* s, const nghttp2_frame* frame, void* ud);
  static int on_stream_close(nghttp2_session* s, int32_t sid, uint32_t code, void* ud);
  static int on_frame_send(nghttp2_session* s, const nghttp2_frame* frame, void* ud);
  static int on_frame_not_send(nghttp2_session* s, const nghttp2_frame* frame, int error, void* ud);

  uv_loop_t* loop_;
  OpenHandles* handles_;
  std::string authority_;
  std::function<void(GrpcConn*, const std::string&)> on_broken_;
  uv_tcp_t tcp_;
  uv_connect_t connect_;
  uv_timer_t fail_timer_;
  uv_poll_t wpoll_;  // a dup of the socket, polled while unsent_ waits
  int wpoll_fd_ = -1;
  nghttp2_session* h2_ = nullptr;
  bool connected_ = false;
  bool broken_ = false;
  bool closed_ = false;
  bool in_recv_ = false;
  bool draining_ = false;
  bool drain_told_ = false;  // on_drain_ ran (or is not to run)
  uint32_t max_stream_id_;
  std::string drain_why_;
  std::function<void(GrpcConn*, const std::string&)> on_drain_;
  int open_handles_ = 0;
  uint64_t silent_since_ = 0;  // loop time of our first message since the last read
  std::string why_;
  std::map<int32_t, std::shared_ptr<Stream>> streams_;
  std::vector<Event> events_;
  std::string out_;
  std::string unsent_;  // bytes for the socket it could not take yet
  std::string token_;
  std::shared_ptr<SSL_CTX> tls_;
  std::string verify_name_;
  SSL* ssl_ = nullptr;   // owns both BIOs
  BIO* rbio_ = nullptr;  // bytes from the server, for OpenSSL
  BIO* wbio_ = nullptr;  // bytes from OpenSSL, for the server
  bool tls_ready_ = false;
  std::function<void(const std::string&)> on_secure_;
};

}  // namespace simba::etcd_impl

#endif  // SIMBA_BACKEND_ETCD_GRPC_CONN_H
