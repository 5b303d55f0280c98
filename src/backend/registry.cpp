// The URL scheme table: one line per backend.
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/memory/memory_backend.h"
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

namespace simba {

namespace {

// scheme://user:password@host... -> scheme://user:***@host...
std::string redact_userinfo(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const size_t auth_start = scheme_end + 3;
  const size_t at = url.find('@', auth_start);
  const size_t slash = url.find('/', auth_start);
  const size_t query = url.find('?', auth_start);
  const size_t end = std::min(slash, query);
  if (at == std::string::npos || (end != std::string::npos && end < at)) return url;
  const size_t colon = url.find(':', auth_start);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

// Secrets in query parameters: libpq's ...?password=secret -> password=***, and
// ZooKeeper's ...?auth=digest:user:password -> auth=digest:user:*** (any other
// form of an auth value is hidden after its first ':', or whole).
std::string redact_query_secrets(const std::string& url) {
  const size_t q = url.find('?');
  if (q == std::string::npos) return url;
  std::string out = url.substr(0, q + 1);
  size_t start = q + 1;
  while (start <= url.size()) {
    size_t amp = url.find('&', start);
    if (amp == std::string::npos) amp = url.size();
    std::string kv = url.substr(start, amp - start);
    if (kv.compare(0, 9, "password=") == 0) {
      kv = "password=***";
    } else if (kv.compare(0, 5, "auth=") == 0) {
      const std::string value = kv.substr(5);
      const size_t first = value.find(':');
      const size_t second = first == std::string::npos ? first : value.find(':', first + 1);
      if (value.compare(0, 7, "digest:") == 0 && second != std::string::npos) {
        kv = "auth=" + value.substr(0, second + 1) + "***";
      } else if (value.compare(0, 7, "digest:") != 0 && !value.empty()) {
        kv = "auth=" + (first == std::string::npos ? std::string() : value.substr(0, first + 1)) +
             "***";
      }
    }
    out += kv;
    if (amp == url.size()) break;
    out += '&';
    start = amp + 1;
  }
  return out;
}

// Why `scheme` has no backend here: unknown, or known but not built in.
std::string unsupported_scheme(const std::string& scheme) {
  if (scheme == "redis" || scheme == "rediss" || scheme == "postgresql" || scheme == "postgres" ||
      scheme == "zookeeper") {
    return "backend scheme \"" + scheme + "\" is not built into this libsimba";
  }
  return "unknown backend scheme \"" + scheme +
         "\" (expected memory://, redis://, postgresql:// or zookeeper://)";
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
  if (scheme == "redis") {
    RedisUrl parsed;
    if (!parse_redis_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    return make_redis_backend(ctx, parsed);
  }
#endif
#ifdef SIMBA_WITH_POSTGRES
  if (scheme == "postgresql" || scheme == "postgres") {
    PostgresUrl parsed;
    if (!parse_postgres_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    return make_postgres_backend(ctx, parsed);
  }
#endif
#ifdef SIMBA_WITH_ZOOKEEPER
  if (scheme == "zookeeper") {
    ZookeeperUrl parsed;
    if (!parse_zookeeper_url(url, &parsed, error)) {
      *why = BackendError::kInvalid;
      return nullptr;
    }
    return make_zookeeper_backend(ctx, parsed);
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
  if (scheme == "memory" || scheme == "redis" || scheme == "rediss" || scheme == "zookeeper") {
    // These keep their data in keys or nodes they create as they go: there is
    // nothing for a DBA to install.
    *error = "the " + scheme + ":// backend has no schema to install (only postgresql:// has one)";
  } else {
    *error = unsupported_scheme(scheme);
  }
  return false;
}

}  // namespace simba
