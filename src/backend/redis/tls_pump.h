// TLS for rediss:// under hiredis 0.14, which has none (ADR 0019). hiredis
// talks plain RESP to one end of a socketpair, put in place of the socket it
// made itself; the pump owns the other end and a TCP connection of its own to
// the server, on which it runs OpenSSL (SSL_connect, SSL_read, SSL_write on the
// non-blocking socket), all on the client's libuv loop: no thread, nothing that
// blocks. The server's certificate is verified against the CA (tls_ca, or the
// system's store) and the host name (or IP address) via X509_VERIFY_PARAM; a
// client certificate is presented when the URL names one.
//
// A failed connect or handshake, a bad certificate or a closed TLS connection
// close the pump's end of the socketpair, so hiredis sees the end of its
// connection as with a plain socket; the reason (OpenSSL's words, e.g.
// "certificate verify failed: certificate has expired") goes to on_error first.
#ifndef SIMBA_BACKEND_REDIS_TLS_PUMP_H
#define SIMBA_BACKEND_REDIS_TLS_PUMP_H

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "backend/redis/redis_url.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace simba {

// The TLS files of a URL (rediss://, etcds://): CA ("" = the system's store),
// client certificate and key, the key's passphrase.
struct TlsFiles {
  std::string ca, cert, key, key_password;
};
// A client context that verifies the server, loaded from `files`; messages
// name the URL by `scheme`. nullptr with `error` set (never the passphrase).
std::shared_ptr<SSL_CTX> make_tls_context(const std::string& scheme, const TlsFiles& files,
                                          std::string* error);
// OpenSSL's error queue as one line (and emptied).
std::string openssl_errors();
// Why a handshake, a read or a write (`what`, its result `rc`) of `ssl` failed,
// in OpenSSL's words; a refused certificate names `name`, what was verified.
std::string tls_failure_reason(SSL* ssl, const char* what, int rc, const std::string& name);

// The TLS settings of a rediss:// URL, loaded once per backend: CA, client
// certificate and key (decrypted with tls_key_password, which is then not kept).
// nullptr with `error` set (never the password) when a file cannot be used.
std::shared_ptr<SSL_CTX> make_redis_tls_context(const RedisUrl& url, std::string* error);

class TlsPump {
 public:
  struct Callbacks {
    std::function<void(const std::string& why)> on_error;   // once, before closing
    std::function<void(const std::string& what)> on_ready;  // the handshake is done
    std::function<void()> on_closed;  // every handle closed; the pump is deleted next
  };

  // Starts a pump to ip:port for `hiredis_fd`, the socket of a redisAsyncContext
  // just made (its connect not completed): that descriptor becomes the pump's
  // socketpair end. `verify_name` is the name (or IP address) the certificate
  // must carry. nullptr with `why` set on failure (the context is untouched).
  static TlsPump* start(uv_loop_t* loop, std::shared_ptr<SSL_CTX> ctx, const std::string& ip,
                        int port, const std::string& verify_name, int hiredis_fd,
                        Callbacks callbacks, std::string* why);

  // Closes both connections now (no on_error); on_closed follows. Idempotent.
  void close();

  TlsPump(const TlsPump&) = delete;
  TlsPump& operator=(const TlsPump&) = delete;

 private:
  TlsPump() = default;
  ~TlsPump();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace simba

#endif
