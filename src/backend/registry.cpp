// The URL scheme table: one line per backend.
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/memory/memory_backend.h"
#include "backend/url_parts.h"
#include "core/names.h"
#ifdef SIMBA_WITH_POSTGRES
#include "backend/postgres/postgres_backend.h"
#include "backend/postgres/postgres_schema.h"
#include "backend/postgres/postgres_url.h"
#endif
#ifdef SIMBA_WITH_REDIS
#include "backend/redis/redis_backend.h"
#endif
#ifdef SIMBA_WITH_ZOOKEEPER
#include "backend/zookeeper/zookeeper_backend.h"
#endif
#ifdef SIMBA_WITH_ETCD
#include "backend/etcd/etcd_backend.h"
#endif

namespace simba {

namespace {

// scheme://user:password@host... -> scheme://user:***@host...
//
// Where the userinfo ends depends on who reads it: the redis:// parser takes
// the last '@' before the query (a password may hold '/'), libpq (for
// postgresql:// URLs) the first '@' before any '/' (a password may hold '?').
// The part hidden reaches the later of the two, so that neither reading shows
// a password; hiding too much of a malformed URL is fine.
std::string redact_userinfo(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const size_t auth_start = scheme_end + 3;
  const size_t query = url.find('?', auth_start);
  size_t at = url.rfind('@', query);
  if (at != std::string::npos && at < auth_start) at = std::string::npos;
  const std::string scheme = url.substr(0, scheme_end);
  // (redis:// too: its query can hold no '@', so an '@' after a '?' there
  // means a password with a '?' in it, which its parser refuses quoting the URL.)
  const size_t libpq_at = scheme == "postgresql" || scheme == "postgres" || scheme == "redis" ||
                                  scheme == "redis+sentinel"
                              ? url.find_first_of("@/", auth_start)
                              : std::string::npos;
  if (libpq_at != std::string::npos && url[libpq_at] == '@' &&
      (at == std::string::npos || libpq_at > at)) {
    at = libpq_at;
  }
  if (at == std::string::npos) return url;
  const size_t colon = url.find(':', auth_start);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

// A query parameter whose value is a secret: libpq's password and sslpassword
// (the client key's passphrase), and any other *password.
bool secret_key(const std::string& key) {
  static const std::string kSuffix = "password";
  return key.size() >= kSuffix.size() &&
         key.compare(key.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// Secrets in query parameters: libpq's ...?password=secret -> password=***
// (sslpassword= and any other *password= alike), and
// ZooKeeper's ...?auth=digest:user:password -> auth=digest:user:*** (any other
// form of an auth value is hidden after its scheme, or whole).
std::string redact_query_secrets(const std::string& url) {
  const size_t q = url.find('?');
  if (q == std::string::npos) return url;
  std::string out = url.substr(0, q + 1);
  size_t start = q + 1;
  // Parameters start after any '?' or '&' past the first '?': libpq reads its
  // query after the path, which may follow a '?' of the userinfo. A secret's
  // value runs to the next '&' (it may hold '?').
  while (start <= url.size()) {
    size_t sep = url.find_first_of("&?", start);
    if (sep == std::string::npos) sep = url.size();
    std::string kv = url.substr(start, sep - start);
    const size_t eq = kv.find('=');
    const bool secret = eq != std::string::npos && secret_key(kv.substr(0, eq));
    if (secret || kv.compare(0, 5, "auth=") == 0) {
      sep = url.find('&', start);
      if (sep == std::string::npos) sep = url.size();
      kv = url.substr(start, sep - start);
    }
    if (secret) {
      kv = kv.substr(0, eq) + "=***";
    } else if (kv.compare(0, 5, "auth=") == 0) {
      // ZooKeeper's auth=scheme:user:password. What stays visible is made of
      // plain words only ("digest:alice:"): anything with URL syntax in it
      // might be (part of) a password, or another parameter as libpq would
      // read the URL.
      const std::string value = kv.substr(5);
      static const char kWord[] =
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-";
      std::string shown_part;
      const size_t first = value.find(':');
      if (first != std::string::npos && first > 0 && value.find_first_not_of(kWord) == first) {
        shown_part = value.substr(0, first + 1);
        const size_t second = value.find(':', first + 1);
        if (shown_part == "digest:" && second != std::string::npos && second > first + 1 &&
            value.find_first_not_of(kWord, first + 1) == second) {
          shown_part = value.substr(0, second + 1);
        }
      }
      if (!value.empty()) kv = "auth=" + shown_part + "***";
    }
    out += kv;
    if (sep == url.size()) break;
    out += url[sep];
    start = sep + 1;
  }
  return out;
}

// Why `scheme` has no backend here: unknown, or known but not built in.
std::string unsupported_scheme(const std::string& scheme) {
  if (scheme == "redis" || scheme == "rediss" || scheme == "redis+sentinel" ||
      scheme == "postgresql" || scheme == "postgres" || scheme == "zookeeper" || scheme == "etcd" ||
      scheme == "etcds") {
    return "backend scheme \"" + scheme + "\" is not built into this libsimba";
  }
  return "unknown backend scheme \"" + scheme +
         "\" (expected memory://, redis://, rediss://, redis+sentinel://, postgresql://, "
         "zookeeper://, etcd:// or etcds://)";
}

}  // namespace

std::string redact_url(const std::string& url) {
  return redact_query_secrets(redact_userinfo(url));
}

std::unique_ptr<Backend> make_backend(const BackendContext& ctx, const std::string& url,
                                      BackendError* why, std::string* error) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos || sep == 0) {
    *why = BackendError::kInvalid;
    *error = "backend URL \"" + redact_url(url) + "\" has no scheme (expected e.g. memory://NAME)";
    return nullptr;
  }
  const std::string scheme = url.substr(0, sep);
  const std::string rest = url.substr(sep + 3);
  if (scheme == "memory") {
    // memory://NAME: NAME follows the lease-name rule; empty means "default".
    const std::string name = rest.empty() ? "default" : rest;
    const std::string bad = check_lease_name(name);
    if (!bad.empty()) {
      *why = BackendError::kInvalid;
      *error = "memory:// store name: " + bad;
      return nullptr;
    }
    auto faults = ctx.memory_faults ? ctx.memory_faults : std::make_shared<MemoryFaults>();
    return make_memory_backend(ctx.loop, name, ctx.client_name, std::move(faults));
  }
#ifdef SIMBA_WITH_REDIS
  if (scheme == "redis" || scheme == "rediss" || scheme == "redis+sentinel") {
    RedisUrl parsed;
    if (!parse_redis_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    auto backend = make_redis_backend(ctx, parsed, error);
    wipe_secret(&parsed.password);
    wipe_secret(&parsed.tls_key_password);
    wipe_secret(&parsed.sentinel_password);
    if (!backend) *why = BackendError::kInvalid;  // a TLS file that cannot be used
    return backend;
  }
#endif
#ifdef SIMBA_WITH_POSTGRES
  if (scheme == "postgresql" || scheme == "postgres") {
    PostgresUrl parsed;
    if (!parse_postgres_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    auto backend = make_postgres_backend(ctx, parsed);
    wipe_secret(&parsed.password);
    for (auto& kv : parsed.options) {
      if (kv.first == "password" || kv.first == "sslpassword") wipe_secret(&kv.second);
    }
    return backend;
  }
#endif
#ifdef SIMBA_WITH_ZOOKEEPER
  if (scheme == "zookeeper") {
    ZookeeperUrl parsed;
    if (!parse_zookeeper_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    auto backend = make_zookeeper_backend(ctx, parsed);
    wipe_secret(&parsed.password);
    return backend;
  }
#endif
#ifdef SIMBA_WITH_ETCD
  if (scheme == "etcd" || scheme == "etcds") {
    EtcdUrl parsed;
    if (!parse_etcd_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    auto backend = make_etcd_backend(ctx, parsed, error);
    wipe_secret(&parsed.password);
    wipe_secret(&parsed.tls_key_password);
    if (!backend) *why = BackendError::kInvalid;  // a TLS file that cannot be used
    return backend;
  }
#endif
  *why = BackendError::kUnsupported;
  *error = unsupported_scheme(scheme);
  return nullptr;
}

bool backend_schema_script(const std::string& url, std::string* text, BackendError* why,
                           std::string* error) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos || sep == 0) {
    *why = BackendError::kInvalid;
    *error = "backend URL \"" + redact_url(url) + "\" has no scheme (expected e.g. postgresql://)";
    return false;
  }
  const std::string scheme = url.substr(0, sep);
#ifdef SIMBA_WITH_POSTGRES
  if (scheme == "postgresql" || scheme == "postgres") {
    PostgresUrl parsed;
    if (!parse_postgres_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return false;
    }
    *text = pg_schema_script(parsed.schema);
    return true;
  }
#endif
  *why = BackendError::kUnsupported;
  if (scheme == "memory" || scheme == "redis" || scheme == "rediss" || scheme == "redis+sentinel" ||
      scheme == "zookeeper" || scheme == "etcd" || scheme == "etcds") {
    // These keep their data in keys or nodes they create as they go: there is
    // nothing for a DBA to install.
    *error = "the " + scheme + ":// backend has no schema to install (only postgresql:// has one)";
  } else {
    *error = unsupported_scheme(scheme);
  }
  return false;
}

}  // namespace simba
