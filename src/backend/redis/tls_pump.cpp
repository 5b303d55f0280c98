// Built only with OpenSSL (SIMBA_WITH_REDIS_TLS, top-level CMakeLists.txt).
#ifdef SIMBA_WITH_REDIS_TLS
#include "backend/redis/tls_pump.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "backend/backend_parts.h"

namespace simba {
namespace {

constexpr size_t kChunk = 16 * 1024;
constexpr size_t kMaxBuffered = 256 * 1024;  // per direction, before backpressure

// OpenSSL's error queue as one line (and emptied).
std::string ssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

int password_cb(char* buf, int size, int, void* userdata) {
  const auto* pw = static_cast<const std::string*>(userdata);
  if (!pw || pw->empty() || size <= 0) return 0;
  const int n = static_cast<int>(std::min<size_t>(pw->size(), static_cast<size_t>(size)));
  std::memcpy(buf, pw->data(), static_cast<size_t>(n));
  return n;
}

}  // namespace

std::shared_ptr<SSL_CTX> make_tls_context(const std::string& scheme, const TlsFiles& url,
                                          std::string* error) {
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (!raw) {
    *error = scheme + ": cannot make a TLS context: " + ssl_errors();
    return nullptr;
  }
  std::shared_ptr<SSL_CTX> ctx(raw, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ERR_clear_error();
  if (!url.ca.empty()) {
    if (SSL_CTX_load_verify_locations(raw, url.ca.c_str(), nullptr) != 1) {
      *error = scheme + " URL: cannot load the CA certificates of tls_ca=" + url.ca + ": " +
               ssl_errors();
      return nullptr;
    }
  } else if (SSL_CTX_set_default_verify_paths(raw) != 1) {
    *error = scheme + ": cannot load the system's CA certificates: " + ssl_errors();
    return nullptr;
  }
  if (url.cert.empty() != url.key.empty()) {
    *error = scheme + " URL: tls_cert and tls_key go together (a client certificate and its key)";
    return nullptr;
  }
  if (!url.cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(raw, url.cert.c_str()) != 1) {
      *error = scheme + " URL: cannot load the client certificate tls_cert=" + url.cert + ": " +
               ssl_errors();
      return nullptr;
    }
    // The key's passphrase is used here only: the decrypted key lives in the
    // context, the passphrase in no buffer of ours once this returns.
    std::string pw = url.key_password;
    SSL_CTX_set_default_passwd_cb(raw, password_cb);
    SSL_CTX_set_default_passwd_cb_userdata(raw, &pw);
    const int ok = SSL_CTX_use_PrivateKey_file(raw, url.key.c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_set_default_passwd_cb_userdata(raw, nullptr);
    SSL_CTX_set_default_passwd_cb(raw, nullptr);
    OPENSSL_cleanse(pw.data(), pw.size());
    if (ok != 1) {
      *error = scheme + " URL: cannot load the client key tls_key=" + url.key +
               (url.key_password.empty() ? "" : " (with tls_key_password)") + ": " + ssl_errors();
      return nullptr;
    }
    if (SSL_CTX_check_private_key(raw) != 1) {
      *error = scheme + " URL: tls_key does not match tls_cert: " + ssl_errors();
      return nullptr;
    }
  }
  return ctx;
}

std::shared_ptr<SSL_CTX> make_redis_tls_context(const RedisUrl& url, std::string* error) {
  TlsFiles files{url.tls_ca, url.tls_cert, url.tls_key, url.tls_key_password};
  auto ctx = make_tls_context("rediss", files, error);
  OPENSSL_cleanse(files.key_password.data(), files.key_password.size());
  return ctx;
}

std::string openssl_errors() { return ssl_errors(); }

std::string tls_failure_reason(SSL* ssl, const char* what, int rc, const std::string& name) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    return std::string("TLS: the server's certificate was refused: ") +
           X509_verify_cert_error_string(verify) + " (verifying " + name + ")";
  }
  const int err = SSL_get_error(ssl, rc);
  std::string detail = ssl_errors();
  if (detail.empty() && (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)) {
    detail = "the server closed the connection";
  }
  if (detail.empty()) detail = "SSL error " + std::to_string(err);
  return std::string("TLS: ") + what + ": " + detail;
}

struct TlsPump::Impl {
  TlsPump* self = nullptr;
  uv_loop_t* loop = nullptr;
  std::shared_ptr<SSL_CTX> ctx;
  // OpenSSL works on memory BIOs; the sockets are ours (recv, and send with
  // MSG_NOSIGNAL: a library must never raise SIGPIPE in its host).
  SSL* ssl = nullptr;
  BIO* rbio = nullptr;  // bytes from the server, for OpenSSL (owned by ssl)
  BIO* wbio = nullptr;  // bytes from OpenSSL, for the server (owned by ssl)
  int tcp_fd = -1;
  int plain_fd = -1;  // our end of the socketpair
  uv_poll_t tcp_poll;
  uv_poll_t plain_poll;
  int tcp_events = 0;
  int plain_events = 0;
  enum class State { kConnecting, kHandshake, kOpen, kClosed } state = State::kConnecting;
  bool plain_eof = false;
  std::string to_server;  // plaintext from hiredis, not yet taken by SSL_write
  std::string to_client;  // plaintext from the server, not yet written to hiredis
  std::string tls_out;    // TLS records not yet sent to the server
  Callbacks cb;
  int open_handles = 0;
  std::string name;

  void fail(const std::string& why) {
    if (state == State::kClosed) return;
    auto on_error = std::move(cb.on_error);
    cb.on_error = nullptr;
    if (on_error) on_error(why);
    shut();
  }

  std::string tls_failure(const char* what, int rc) {
    return tls_failure_reason(ssl, what, rc, name);
  }

  void set_polls() {
    if (state == State::kClosed) return;
    int tcp = 0, plain = 0;
    if (state == State::kConnecting) {
      tcp = UV_WRITABLE;
    } else {
      if (to_client.size() < kMaxBuffered) tcp |= UV_READABLE;
      if (!tls_out.empty()) tcp |= UV_WRITABLE;
      if (state == State::kOpen && !to_client.empty()) plain |= UV_WRITABLE;
    }
    // Read hiredis' side in every state: its commands wait in to_server until
    // the handshake is done, and its end of the connection (a context freed
    // while the server still answers nothing) ends the pump at once.
    if (to_server.size() < kMaxBuffered && !plain_eof) plain |= UV_READABLE;
    if (tcp != tcp_events) {
      tcp_events = tcp;
      if (tcp) {
        uv_poll_start(&tcp_poll, tcp, on_tcp);
      } else {
        uv_poll_stop(&tcp_poll);
      }
    }
    if (plain != plain_events) {
      plain_events = plain;
      if (plain) {
        uv_poll_start(&plain_poll, plain, on_plain);
      } else {
        uv_poll_stop(&plain_poll);
      }
    }
  }

  // A connection the server reset: the alert it sent first, if it came in (in
  // TLS 1.3 a refused client certificate is only told after the handshake,
  // e.g. "tlsv13 alert certificate required"), else `fallback`.
  std::string server_alert(const std::string& fallback) {
    char buf[kChunk];
    for (;;) {
      const ssize_t n = ::recv(tcp_fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      BIO_write(rbio, buf, static_cast<int>(n));
    }
    ERR_clear_error();
    const int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0 && SSL_get_error(ssl, n) == SSL_ERROR_SSL) {
      const std::string alert = ssl_errors();
      if (!alert.empty()) return "TLS: the server ended the connection: " + alert;
    }
    return "TLS: " + fallback;
  }

  // Moves what OpenSSL wrote to the server's socket; false once failed.
  bool send_tls() {
    char buf[kChunk];
    for (;;) {
      const int n = BIO_read(wbio, buf, sizeof buf);
      if (n <= 0) break;
      tls_out.append(buf, static_cast<size_t>(n));
    }
    while (!tls_out.empty()) {
      const ssize_t n = ::send(tcp_fd, tls_out.data(), tls_out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        tls_out.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      const std::string why = std::strerror(errno);
      fail(server_alert("cannot send to the server: " + why));
      return false;
    }
    return true;
  }

  // Hands what the server sent to OpenSSL; false once failed. At the end of
  // the stream OpenSSL's next read reports it.
  bool recv_tls() {
    char buf[kChunk];
    for (;;) {
      const ssize_t n = ::recv(tcp_fd, buf, sizeof buf, 0);
      if (n > 0) {
        BIO_write(rbio, buf, static_cast<int>(n));
        continue;
      }
      if (n == 0) {
        BIO_set_mem_eof_return(rbio, 0);
        return true;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      const std::string why = std::strerror(errno);
      fail(server_alert("connection to the server lost: " + why));
      return false;
    }
  }

  void handshake() {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl);
    if (!send_tls()) return;
    if (rc == 1) {
      state = State::kOpen;
      if (cb.on_ready) {
        cb.on_ready(std::string(SSL_get_version(ssl)) + " " + SSL_get_cipher_name(ssl) +
                    ", certificate verified for " + name);
      }
      if (state == State::kOpen) flow();
      return;
    }
    const int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      set_polls();
      return;
    }
    fail(tls_failure("handshake failed", rc));
  }

  // Moves data both ways as far as the sockets allow, then sets the polls.
  void flow() {
    bool progress = true;
    while (progress && state == State::kOpen) {
      progress = false;
      // hiredis -> server
      if (!plain_eof && to_server.size() < kMaxBuffered) {
        char buf[kChunk];
        const ssize_t n = ::recv(plain_fd, buf, sizeof buf, 0);
        if (n > 0) {
          to_server.append(buf, static_cast<size_t>(n));
          progress = true;
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          plain_eof = true;  // hiredis closed its end: done once flushed
        }
      }
      if (!to_server.empty()) {
        ERR_clear_error();
        const int n = SSL_write(ssl, to_server.data(), static_cast<int>(to_server.size()));
        if (n > 0) {
          OPENSSL_cleanse(to_server.data(), static_cast<size_t>(n));  // AUTH passes here
          to_server.erase(0, static_cast<size_t>(n));
          progress = true;
        } else {
          const int err = SSL_get_error(ssl, n);
          if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            fail(tls_failure("write failed", n));
            return;
          }
        }
      }
      // server -> hiredis
      if (to_client.size() < kMaxBuffered) {
        char buf[kChunk];
        ERR_clear_error();
        const int n = SSL_read(ssl, buf, sizeof buf);
        if (n > 0) {
          to_client.append(buf, static_cast<size_t>(n));
          progress = true;
        } else {
          const int err = SSL_get_error(ssl, n);
          if (err == SSL_ERROR_ZERO_RETURN) {
            fail("TLS: the server closed the connection");
            return;
          }
          if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            fail(tls_failure("read failed", n));
            return;
          }
        }
      }
      if (!to_client.empty()) {
        const ssize_t n = ::send(plain_fd, to_client.data(), to_client.size(), MSG_NOSIGNAL);
        if (n > 0) {
          to_client.erase(0, static_cast<size_t>(n));
          progress = true;
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          plain_eof = true;  // hiredis is gone
          to_client.clear();
        }
      }
      if (!send_tls()) return;
    }
    if (state != State::kOpen) return;
    if (plain_eof && to_server.empty()) {
      SSL_shutdown(ssl);  // best effort: a close_notify, no waiting for the answer
      send_tls();
      shut();
      return;
    }
    set_polls();
  }

  static void on_tcp(uv_poll_t* h, int status, int events) {
    Impl* p = static_cast<Impl*>(h->data);
    if (p->state == State::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(p->tcp_fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err == 0 && status < 0) err = ECONNREFUSED;
      if (err != 0) {
        p->fail(std::string("cannot connect: ") + std::strerror(err));
        return;
      }
      p->state = State::kHandshake;
      p->handshake();
      return;
    }
    if (status < 0) events = UV_READABLE | UV_WRITABLE;  // the calls see the error
    if ((events & UV_WRITABLE) && !p->send_tls()) return;
    if ((events & UV_READABLE) && !p->recv_tls()) return;
    if (p->state == State::kHandshake) {
      p->handshake();
    } else {
      p->flow();
    }
  }

  static void on_plain(uv_poll_t* h, int, int) {
    Impl* p = static_cast<Impl*>(h->data);
    if (p->state == State::kOpen) {
      p->flow();
      return;
    }
    char buf[kChunk];
    const ssize_t n = ::recv(p->plain_fd, buf, sizeof buf, 0);
    if (n > 0) {
      p->to_server.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      p->shut();  // hiredis gave up on this connection before it was up
      return;
    }
    p->set_polls();
  }

  // Stops everything; the handles close and then the pump is deleted.
  void shut() {
    if (state == State::kClosed) return;
    state = State::kClosed;
    uv_poll_stop(&tcp_poll);
    uv_poll_stop(&plain_poll);
    // The end of hiredis' connection: it reads EOF and disconnects.
    if (plain_fd >= 0) ::shutdown(plain_fd, SHUT_RDWR);
    auto closed = [](uv_handle_t* h) {
      Impl* p = static_cast<Impl*>(h->data);
      if (--p->open_handles > 0) return;
      auto on_closed = std::move(p->cb.on_closed);
      delete p->self;
      if (on_closed) on_closed();
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_poll), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&plain_poll), closed);
  }
};

TlsPump::~TlsPump() {
  if (!impl_) return;
  if (impl_->ssl) SSL_free(impl_->ssl);
  if (impl_->tcp_fd >= 0) ::close(impl_->tcp_fd);
  if (impl_->plain_fd >= 0) ::close(impl_->plain_fd);
  OPENSSL_cleanse(impl_->to_server.data(), impl_->to_server.size());
}

void TlsPump::close() {
  if (impl_) impl_->shut();
}

TlsPump* TlsPump::start(uv_loop_t* loop, std::shared_ptr<SSL_CTX> ctx, const std::string& ip,
                        int port, const std::string& verify_name, int hiredis_fd,
                        Callbacks callbacks, std::string* why) {
  // The server's address.
  struct sockaddr_storage addr = {};
  socklen_t addr_len = 0;
  if (auto* a4 = reinterpret_cast<struct sockaddr_in*>(&addr);
      inet_pton(AF_INET, ip.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *a4;
  } else if (auto* a6 = reinterpret_cast<struct sockaddr_in6*>(&addr);
             inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<uint16_t>(port));
    addr_len = sizeof *a6;
  } else {
    *why = "not an IP address: " + ip;
    return nullptr;
  }
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  const int tcp = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (tcp < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    ::close(sp[0]);
    ::close(sp[1]);
    return nullptr;
  }
  const int on = 1;
  setsockopt(tcp, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  enable_keepalive(tcp);
  if (::connect(tcp, reinterpret_cast<struct sockaddr*>(&addr), addr_len) != 0 &&
      errno != EINPROGRESS) {
    *why = std::string("cannot connect: ") + std::strerror(errno);
    ::close(tcp);
    ::close(sp[0]);
    ::close(sp[1]);
    return nullptr;
  }
  SSL* ssl = SSL_new(ctx.get());
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  if (!ssl || !rbio || !wbio) {
    *why = "TLS: cannot start a connection: " + ssl_errors();
    if (ssl) SSL_free(ssl);
    if (rbio) BIO_free(rbio);
    if (wbio) BIO_free(wbio);
    ::close(tcp);
    ::close(sp[0]);
    ::close(sp[1]);
    return nullptr;
  }
  SSL_set_bio(ssl, rbio, wbio);  // ssl owns both from here
  SSL_set_connect_state(ssl);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const bool ok_name = is_ip_literal(verify_name)
                           ? X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str()) == 1
                           : X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), 0) == 1 &&
                                 SSL_set_tlsext_host_name(ssl, verify_name.c_str()) == 1;
  if (!ok_name) {
    *why = "TLS: cannot verify the name " + verify_name + ": " + ssl_errors();
    SSL_free(ssl);
    ::close(tcp);
    ::close(sp[0]);
    ::close(sp[1]);
    return nullptr;
  }
  // hiredis' socket becomes our socketpair's other end: its connect (to the
  // server's plain port, still in progress) is abandoned, and hiredis, which
  // only ever reads and writes that descriptor, now talks to the pump.
  if (dup2(sp[0], hiredis_fd) < 0) {
    *why = std::string("dup2: ") + std::strerror(errno);
    SSL_free(ssl);
    ::close(tcp);
    ::close(sp[0]);
    ::close(sp[1]);
    return nullptr;
  }
  ::close(sp[0]);
  fcntl(hiredis_fd, F_SETFD, FD_CLOEXEC);

  auto* pump = new TlsPump;
  pump->impl_ = std::make_unique<Impl>();
  Impl* p = pump->impl_.get();
  p->self = pump;
  p->loop = loop;
  p->ctx = std::move(ctx);
  p->ssl = ssl;
  p->rbio = rbio;
  p->wbio = wbio;
  p->tcp_fd = tcp;
  p->plain_fd = sp[1];
  p->cb = std::move(callbacks);
  p->name = verify_name;
  uv_poll_init(loop, &p->tcp_poll, tcp);
  uv_poll_init(loop, &p->plain_poll, sp[1]);
  p->tcp_poll.data = p;
  p->plain_poll.data = p;
  p->open_handles = 2;
  p->set_polls();
  return pump;
}

}  // namespace simba

#endif  // SIMBA_WITH_REDIS_TLS
