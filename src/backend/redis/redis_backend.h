// redis://[user:password@]host[:port][/db][?prefix=NAME] (and rediss://, TLS
// through tls_pump.h): the Redis backend (hiredis async on the client's libuv loop). Data model:
// docs in redis_backend_impl.h and /work/shared/design/BACKENDS.md.
#ifndef SIMBA_BACKEND_REDIS_REDIS_BACKEND_H
#define SIMBA_BACKEND_REDIS_REDIS_BACKEND_H

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/redis/redis_url.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace simba {

// nullptr with `error` set when the URL's TLS files cannot be used (rediss://).
std::unique_ptr<Backend> make_redis_backend(const BackendContext& ctx, const RedisUrl& url,
                                            std::string* error);

}  // namespace simba

#endif
