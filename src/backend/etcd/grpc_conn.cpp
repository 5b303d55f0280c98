#include "backend/etcd/grpc_conn.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/backend_parts.h"

#ifdef SIMBA_WITH_REDIS_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "backend/redis/tls_pump.h"
#endif

namespace simba::etcd_impl {

namespace {

nghttp2_nv header(const char* name, const std::string& value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), std::strlen(name),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

GrpcConn::GrpcConn(uv_loop_t* loop, OpenHandles* handles, const struct sockaddr* addr,
                   std::string authority,
                   std::function<void(GrpcConn*, const std::string&)> on_broken,
                   std::shared_ptr<SSL_CTX> tls, std::string verify_name, uint32_t max_stream_id)
    : loop_(loop),
      handles_(handles),
      authority_(std::move(authority)),
      on_broken_(std::move(on_broken)),
      max_stream_id_(max_stream_id),
      tls_(std::move(tls)),
      verify_name_(std::move(verify_name)) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
  nghttp2_session_client_new(&h2_, cb, this);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(h2_, NGHTTP2_FLAG_NONE, nullptr, 0);
  uv_tcp_init(loop_, &tcp_);
  uv_timer_init(loop_, &fail_timer_);
  tcp_.data = this;
  fail_timer_.data = this;
  connect_.data = this;
  open_handles_ = 2;
  handles_->opened(2);
  const int rc = uv_tcp_connect(&connect_, &tcp_, addr, on_connect);
  if (rc < 0) fail(std::string("connect: ") + uv_strerror(rc));
}

GrpcConn::~GrpcConn() {
  if (h2_) nghttp2_session_del(h2_);
  if (wpoll_fd_ >= 0) ::close(wpoll_fd_);
#ifdef SIMBA_WITH_REDIS_TLS
  if (ssl_) SSL_free(ssl_);
#endif
}

std::string GrpcConn::frame(const std::string& message) {
  // gRPC's length-prefixed message: no compression, 4-byte big-endian length.
  const size_t n = message.size();
  std::string out;
  out.reserve(5 + n);
  out.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out += message;
  return out;
}

int32_t GrpcConn::start(const char* path, const std::string& message, bool unary,
                        MessageFn on_message, CloseFn on_close) {
  if (broken_ || closed_ || draining_) return 0;
  auto st = std::make_shared<Stream>();
  st->body = frame(message);
  st->half_close = unary;
  st->on_message = std::move(on_message);
  st->on_close = std::move(on_close);
  const std::string method = "POST", scheme = tls_ ? "https" : "http", type = "application/grpc",
                    te = "trailers", p = path;
  const nghttp2_nv hdrs[] = {header(":method", method),    header(":scheme", scheme),
                             header(":path", p),           header(":authority", authority_),
                             header("content-type", type), header("te", te),
                             header("token", token_)};
  // The token header only when there is one.
  const size_t n_hdrs = sizeof hdrs / sizeof hdrs[0] - (token_.empty() ? 1 : 0);
  nghttp2_data_provider body;
  body.source.ptr = st.get();
  body.read_callback = read_body;
  const int32_t id = nghttp2_submit_request(h2_, nullptr, hdrs, n_hdrs, &body, st.get());
  if (id < 0) {
    // Stream ids used up (2^31 per connection), or nghttp2 out of memory: a
    // new connection starts over.
    fail(std::string("cannot start a stream: ") + nghttp2_strerror(id));
    return 0;
  }
  st->id = id;
  streams_[id] = std::move(st);
  if (!silent_since_) silent_since_ = uv_now(loop_);
  // The last id this connection may use: it drains from now (the same path
  // as a GOAWAY), long before nghttp2 would refuse a stream. The owner sees
  // it by accepting().
  if (nghttp2_session_get_next_stream_id(h2_) > max_stream_id_) {
    drain("stream ids used up");
    drain_told_ = true;
  }
  flush();
  return id;
}

void GrpcConn::send(int32_t stream, const std::string& message) {
  auto it = streams_.find(stream);
  if (broken_ || it == streams_.end() || it->second->half_close) return;
  it->second->body += frame(message);
  if (!silent_since_) silent_since_ = uv_now(loop_);
  nghttp2_session_resume_data(h2_, stream);
  flush();
}

void GrpcConn::cancel(int32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  it->second->cancelled = true;
  if (!broken_) {
    nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
    flush();
  }
}

void GrpcConn::finish(int32_t stream) {
  auto it = streams_.find(stream);
  if (broken_ || it == streams_.end() || it->second->half_close) return;
  it->second->half_close = true;
  nghttp2_session_resume_data(h2_, stream);
  flush();
}

void GrpcConn::drain(const std::string& why) {
  if (draining_) return;
  draining_ = true;
  drain_why_ = why;
}

void GrpcConn::fail(const std::string& why) {
  if (broken_ || closed_) return;
  broken_ = true;
  why_ = why;
  uv_timer_start(&fail_timer_, on_fail_timer, 0, 0);
}

void GrpcConn::on_fail_timer(uv_timer_t* t) { static_cast<GrpcConn*>(t->data)->broke(); }

void GrpcConn::broke() {
  if (closed_) return;
  std::map<int32_t, std::shared_ptr<Stream>> streams;
  streams.swap(streams_);
  for (auto& [id, st] : streams) {
    if (closed_) return;  // a callback closed us
    if (!st->cancelled && st->on_close) st->on_close(kGrpcBroken, why_);
  }
  if (!closed_ && on_broken_) on_broken_(this, why_);
}

void GrpcConn::close() {
  if (closed_) return;
  closed_ = true;
  broken_ = true;
  streams_.clear();
  events_.clear();
  auto closed_cb = [](uv_handle_t* h) {
    auto* self = static_cast<GrpcConn*>(h->data);
    OpenHandles* handles = self->handles_;
    if (--self->open_handles_ == 0) delete self;
    handles->closed();  // may run the backend's shutdown done: last
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&fail_timer_), closed_cb);
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), closed_cb);
  // The dup is closed by the destructor, once libuv let go of it.
  if (wpoll_fd_ >= 0) uv_close(reinterpret_cast<uv_handle_t*>(&wpoll_), closed_cb);
}

void GrpcConn::flush() {
  // Sent once nghttp2 returned / connected / the TLS handshake is done.
  if (in_recv_ || broken_ || !connected_ || (tls_ && !tls_ready_)) return;
  out_.clear();
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(h2_, &data);
    if (n < 0) return fail(nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) break;
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  // Drained: every stream ended (a reset one ends once its RST_STREAM went).
  if (draining_ && streams_.empty()) fail("drained (" + drain_why_ + ")");
#ifdef SIMBA_WITH_REDIS_TLS
  if (ssl_ && !out_.empty()) {
    // A memory BIO takes all of it: SSL_write never waits here.
    ERR_clear_error();
    const int n = SSL_write(ssl_, out_.data(), static_cast<int>(out_.size()));
    OPENSSL_cleanse(out_.data(), out_.size());  // the token, the password
    out_.clear();
    if (n <= 0) return fail(tls_failure("write failed", n));
    char buf[16384];
    for (int r; (r = BIO_read(wbio_, buf, sizeof buf)) > 0;)
      out_.append(buf, static_cast<size_t>(r));
  }
#endif
  write_raw();
}

// Writes out_ to the socket with send(MSG_NOSIGNAL): a library must never
// raise SIGPIPE in its host, and libuv's own writes (write(2)) do when the
// member is gone. What the socket cannot take now waits for it to be
// writable, on a uv_poll_t of a dup of the socket (the uv_tcp_t reads).
void GrpcConn::write_raw() {
  if (out_.empty()) return;
  if (!unsent_.empty()) {
    unsent_ += out_;  // in order, after what waits already
    return;
  }
  unsent_.swap(out_);
  send_unsent();
}

void GrpcConn::send_unsent() {
  uv_os_fd_t fd = -1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&tcp_), &fd) != 0) return fail("write: no socket");
  size_t off = 0;
  while (off < unsent_.size()) {
    const ssize_t n =
        ::send(fd, unsent_.data() + off, unsent_.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      unsent_.clear();
      return fail(std::string("write: ") + std::strerror(n < 0 ? errno : EPIPE));
    }
  }
  unsent_.erase(0, off);
  if (unsent_.empty()) {
    if (wpoll_fd_ >= 0) uv_poll_stop(&wpoll_);
    return;
  }
  if (wpoll_fd_ < 0) {
    wpoll_fd_ = ::dup(fd);
    if (wpoll_fd_ < 0 || uv_poll_init(loop_, &wpoll_, wpoll_fd_) != 0) {
      if (wpoll_fd_ >= 0) ::close(wpoll_fd_);
      wpoll_fd_ = -1;
      return fail("write: cannot wait for the socket");
    }
    wpoll_.data = this;
    ++open_handles_;
    handles_->opened();
  }
  uv_poll_start(&wpoll_, UV_WRITABLE, [](uv_poll_t* p, int status, int) {
    auto* self = static_cast<GrpcConn*>(p->data);
    if (self->closed_ || self->broken_) return;
    if (status < 0) return self->fail(std::string("write: ") + uv_strerror(status));
    self->send_unsent();
  });
}

void GrpcConn::on_connect(uv_connect_t* req, int status) {
  auto* self = static_cast<GrpcConn*>(req->data);
  if (self->closed_) return;
  if (status < 0) return self->fail(std::string("connect: ") + uv_strerror(status));
  self->connected_ = true;
  uv_tcp_nodelay(&self->tcp_, 1);
  uv_os_fd_t fd;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(&self->tcp_), &fd) == 0) enable_keepalive(fd);
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&self->tcp_),
      [](uv_handle_t*, size_t, uv_buf_t* b) {
        static thread_local char mem[65536];
        *b = uv_buf_init(mem, sizeof mem);
      },
      on_read);
  if (self->tls_) return self->handshake();
  self->flush();  // the connection preface, SETTINGS and the calls started meanwhile
}

void GrpcConn::on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<GrpcConn*>(s->data);
  if (self->closed_ || self->broken_) return;
  if (n < 0) {
    return self->fail(n == UV_EOF ? std::string("the server closed the connection")
                                  : std::string("read: ") + uv_strerror(static_cast<int>(n)));
  }
  self->silent_since_ = 0;
  if (self->tls_) {
    self->recv_tls(buf->base, static_cast<size_t>(n));
  } else {
    self->recv_h2(reinterpret_cast<const uint8_t*>(buf->base), static_cast<size_t>(n));
  }
  if (!self->broken_) {
    self->flush();  // SETTINGS and PING acks, WINDOW_UPDATEs
    // Before the streams' callbacks: a refused call sent again must find the
    // owner on another connection already.
    if (self->draining_ && !self->drain_told_) {
      self->drain_told_ = true;
      if (self->on_drain_) self->on_drain_(self, self->drain_why_);
      if (self->closed_) return;
    }
  }
  // Even when this read broke the connection: the streams nghttp2 closed
  // before (answered, or refused) are no longer ours to fail in broke(), so
  // their callbacks run here or never.
  self->dispatch();
}

void GrpcConn::recv_h2(const uint8_t* data, size_t len) {
  in_recv_ = true;
  const ssize_t rc = nghttp2_session_mem_recv(h2_, data, len);
  in_recv_ = false;
  if (rc < 0) fail(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rc)));
}

#ifdef SIMBA_WITH_REDIS_TLS
// Starts (or goes on with) the handshake; once done, HTTP/2 starts.
void GrpcConn::handshake() {
  if (!ssl_) {
    ssl_ = SSL_new(tls_.get());
    rbio_ = BIO_new(BIO_s_mem());
    wbio_ = BIO_new(BIO_s_mem());
    if (!ssl_ || !rbio_ || !wbio_) {
      if (!ssl_) {
        BIO_free(rbio_);
        BIO_free(wbio_);
      } else if (rbio_ && wbio_) {
        SSL_set_bio(ssl_, rbio_, wbio_);
      }
      return fail("TLS: cannot start a connection: " + openssl_errors());
    }
    SSL_set_bio(ssl_, rbio_, wbio_);
    SSL_set_connect_state(ssl_);
    static const unsigned char kAlpn[] = {2, 'h', '2'};
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const char* name = verify_name_.c_str();
    const bool ok =
        SSL_set_alpn_protos(ssl_, kAlpn, sizeof kAlpn) == 0 &&
        (is_ip_literal(verify_name_) ? X509_VERIFY_PARAM_set1_ip_asc(param, name) == 1
                                     : X509_VERIFY_PARAM_set1_host(param, name, 0) == 1 &&
                                           SSL_set_tlsext_host_name(ssl_, name) == 1);
    if (!ok) return fail("TLS: cannot verify the name " + verify_name_ + ": " + openssl_errors());
  }
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  char buf[16384];
  out_.clear();
  for (int r; (r = BIO_read(wbio_, buf, sizeof buf)) > 0;) out_.append(buf, static_cast<size_t>(r));
  write_raw();
  if (rc == 1) {
    const unsigned char* alpn = nullptr;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
    if (alpn_len != 2 || std::memcmp(alpn, "h2", 2) != 0) {
      return fail("TLS: the server did not agree to HTTP/2 (ALPN \"h2\")");
    }
    tls_ready_ = true;
    if (on_secure_) {
      on_secure_(std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_) +
                 ", certificate verified for " + verify_name_);
    }
    return flush();  // the connection preface, SETTINGS and the calls started meanwhile
  }
  const int err = SSL_get_error(ssl_, rc);
  if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
    fail(tls_failure("handshake failed", rc));
  }
}

// Hands what the server sent to OpenSSL, and the plaintext to nghttp2; false
// once failed.
bool GrpcConn::recv_tls(const char* data, size_t len) {
  BIO_write(rbio_, data, static_cast<int>(len));
  if (!tls_ready_) {
    handshake();
    if (!tls_ready_) return !broken_;
  }
  char buf[16384];
  for (;;) {
    ERR_clear_error();
    const int n = SSL_read(ssl_, buf, sizeof buf);
    if (n > 0) {
      recv_h2(reinterpret_cast<const uint8_t*>(buf), static_cast<size_t>(n));
      if (broken_) return false;
      continue;
    }
    const int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
    if (err == SSL_ERROR_ZERO_RETURN) {
      fail("TLS: the server closed the connection");
    } else {
      // A refused client certificate shows here under TLS 1.3 ("tlsv13
      // alert certificate required"): it is told after the handshake.
      fail(tls_failure("read failed", n));
    }
    return false;
  }
}

std::string GrpcConn::tls_failure(const char* what, int rc) {
  return tls_failure_reason(ssl_, what, rc, verify_name_);
}
#else
void GrpcConn::handshake() { fail("TLS: this libsimba is built without OpenSSL"); }
bool GrpcConn::recv_tls(const char*, size_t) { return false; }
std::string GrpcConn::tls_failure(const char*, int) { return "TLS: not built in"; }
#endif

// Runs what the nghttp2 callbacks saw. A callback may close the connection
// (the backend shutting down): nothing of it is touched after that.
void GrpcConn::dispatch() {
  std::vector<Event> events;
  events.swap(events_);
  for (Event& e : events) {
    if (closed_) return;
    Stream& st = *e.stream;
    if (st.cancelled) continue;
    if (!e.closed) {
      if (st.on_message) {
        st.on_message(reinterpret_cast<const uint8_t*>(e.message.data()), e.message.size());
      }
      continue;
    }
    std::string why = st.grpc_message;
    int status = st.grpc_status;
    if (status == kGrpcBroken && e.refused) {
      status = kGrpcRefused;
      why = "the server did not process the call (" +
            (draining_ ? drain_why_ : "HTTP/2 error " + std::to_string(e.h2_error)) + ")";
    } else if (status == kGrpcBroken) {
      why = "stream ended without a grpc-status (HTTP/2 error " + std::to_string(e.h2_error) + ")";
    }
    if (st.on_close) st.on_close(status, why);
  }
}

ssize_t GrpcConn::read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                            nghttp2_data_source* source, void*) {
  auto* st = static_cast<Stream*>(source->ptr);
  const size_t left = st->body.size() - st->body_off;
  if (left == 0 && !st->half_close) return NGHTTP2_ERR_DEFERRED;
  const size_t n = left < len ? left : len;
  std::memcpy(buf, st->body.data() + st->body_off, n);
  st->body_off += n;
  if (st->body_off == st->body.size()) {
    st->body.clear();
    st->body_off = 0;
    if (st->half_close) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return static_cast<ssize_t>(n);
}

int GrpcConn::on_data(nghttp2_session*, uint8_t, int32_t sid, const uint8_t* data, size_t len,
                      void* ud) {
  auto* self = static_cast<GrpcConn*>(ud);
  auto it = self->streams_.find(sid);
  if (it == self->streams_.end()) return 0;
  Stream& st = *it->second;
  st.in.append(reinterpret_cast<const char*>(data), len);
  // 1 byte compressed flag, 4 bytes length, the message.
  size_t off = 0;
  while (st.in.size() - off >= 5) {
    const auto* p = reinterpret_cast<const uint8_t*>(st.in.data() + off);
    const size_t n = static_cast<size_t>(p[1]) << 24 | static_cast<size_t>(p[2]) << 16 |
                     static_cast<size_t>(p[3]) << 8 | p[4];
    if (st.in.size() - off - 5 < n) break;
    Event e;
    e.stream = it->second;
    e.message.assign(st.in, off + 5, n);
    self->events_.push_back(std::move(e));
    off += 5 + n;
  }
  st.in.erase(0, off);
  return 0;
}

int GrpcConn::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                        size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
  auto* self = static_cast<GrpcConn*>(ud);
  auto it = self->streams_.find(frame->hd.stream_id);
  if (it == self->streams_.end()) return 0;
  const std::string n(reinterpret_cast<const char*>(name), namelen);
  const std::string v(reinterpret_cast<const char*>(value), valuelen);
  if (n == "grpc-status") {
    it->second->grpc_status = std::atoi(v.c_str());
  } else if (n == "grpc-message") {
    it->second->grpc_message = v;
  }
  return 0;
}

int GrpcConn::on_frame(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
  // The server goes away (a graceful stop, a maximum connection age, etcd's
  // too_many_pings): the streams up to its last stream id finish here;
  // nghttp2 closes the later ones with REFUSED_STREAM (never processed), and
  // takes no new one.
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    static_cast<GrpcConn*>(ud)->drain("the server sent GOAWAY (error " +
                                      std::to_string(frame->goaway.error_code) + ", last stream " +
                                      std::to_string(frame->goaway.last_stream_id) + ")");
  }
  return 0;
}

int GrpcConn::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* self = static_cast<GrpcConn*>(ud);
  auto it = self->streams_.find(frame->hd.stream_id);
  if (it != self->streams_.end()) it->second->sent = true;
  return 0;
}

// A request nghttp2 could not send (a GOAWAY came first): never processed.
int GrpcConn::on_frame_not_send(nghttp2_session* s, const nghttp2_frame* frame, int, void* ud) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  return on_stream_close(s, frame->hd.stream_id, NGHTTP2_REFUSED_STREAM, ud);
}

int GrpcConn::on_stream_close(nghttp2_session*, int32_t sid, uint32_t code, void* ud) {
  auto* self = static_cast<GrpcConn*>(ud);
  auto it = self->streams_.find(sid);
  if (it == self->streams_.end()) return 0;
  Event e;
  e.stream = it->second;
  e.closed = true;
  e.h2_error = code;
  // REFUSED_STREAM (a GOAWAY's later streams, or the server's RST) or never
  // sent: the server did nothing with it.
  e.refused = code == NGHTTP2_REFUSED_STREAM || !it->second->sent;
  self->events_.push_back(std::move(e));
  self->streams_.erase(it);
  return 0;
}

}  // namespace simba::etcd_impl
