#include "backend/redis/redis_url.h"

#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

constexpr int kSentinelPort = 26379;

bool prefix_ok(const std::string& p) {
  if (p.empty() || p.size() > 64) return false;
  for (char c : p) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != ':') {
      return false;
    }
  }
  return true;
}

// One host[:port] ("[v6]:port" for IPv6): false with `error` set otherwise.
bool parse_host_port(const std::string& hostport, const std::string& shown, RedisUrl::Host* out,
                     std::string* error) {
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) {
      *error = "redis URL " + shown + ": unterminated [IPv6 address]";
      return false;
    }
    out->first = hostport.substr(1, close - 1);
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        *error = "redis URL " + shown + ": unexpected text after the IPv6 address";
        return false;
      }
      port = after.substr(1);
      if (port.empty()) {
        *error = "redis URL " + shown + ": empty port";
        return false;
      }
    }
  } else {
    const size_t colon = hostport.find(':');
    out->first = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) {
        *error = "redis URL " + shown + ": empty port";
        return false;
      }
    }
  }
  if (out->first.empty()) {
    *error = "redis URL " + shown + " has no host";
    return false;
  }
  for (char c : out->first) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%') {
      *error = "redis URL " + shown + ": invalid character in the host";
      return false;
    }
  }
  if (!port.empty() && !parse_decimal(port, 1, 65535, &out->second)) {
    *error = "redis URL " + shown + ": the port must be a number from 1 to 65535";
    return false;
  }
  return true;
}

// A Sentinel master name: what `sentinel monitor` accepts in practice.
bool master_name_ok(const std::string& n) {
  if (n.empty() || n.size() > 128) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

// One query parameter: false with `error` set when it is unknown here or its
// value is not allowed.
bool apply_parameter(const std::string& key, const std::string& value, const std::string& shown,
                     RedisUrl* r, std::string* error) {
  if (key == "prefix") {
    if (!prefix_ok(value)) {
      *error = "redis URL " + shown + ": prefix must be 1-64 characters of [A-Za-z0-9._:-]";
      return false;
    }
    r->prefix = value;
    return true;
  }
  if (key == "tls_ca" || key == "tls_cert" || key == "tls_key" || key == "tls_key_password" ||
      key == "tls_server_name") {
    if (!r->tls) {
      *error = "redis URL " + shown + ": " + key + " needs a rediss:// URL (TLS)" +
               (r->sentinel ? "; redis+sentinel:// has no TLS yet" : "");
      return false;
    }
    std::string decoded, why;
    if (!decode_tls_parameter(key, value, &decoded, &why)) {
      *error = "redis URL " + shown + ": " + why;
      return false;
    }
    std::string* field = key == "tls_ca"             ? &r->tls_ca
                         : key == "tls_cert"         ? &r->tls_cert
                         : key == "tls_key"          ? &r->tls_key
                         : key == "tls_key_password" ? &r->tls_key_password
                                                     : &r->tls_server_name;
    *field = decoded;
    return true;
  }
  if (r->sentinel && (key == "sentinel_user" || key == "sentinel_password")) {
    std::string decoded;
    if (!percent_decode(value, &decoded) || decoded.empty()) {
      *error = "redis URL " + shown + ": " + key + " must be a non-empty value (%-escapes allowed)";
      return false;
    }
    (key == "sentinel_user" ? r->sentinel_user : r->sentinel_password) = decoded;
    return true;
  }
  if (r->sentinel && key == "wait_replicas") {
    if (!parse_decimal(value, 0, 100, &r->wait_replicas)) {
      *error = "redis URL " + shown + ": wait_replicas must be a number from 0 to 100";
      return false;
    }
    return true;
  }
  if (r->sentinel && key == "wait_timeout_ms") {
    if (!parse_decimal(value, 1, 600000, &r->wait_timeout_ms)) {
      *error = "redis URL " + shown + ": wait_timeout_ms must be a number from 1 to 600000";
      return false;
    }
    return true;
  }
  const char* known = r->sentinel ? "prefix, sentinel_user, sentinel_password, wait_replicas, "
                                    "wait_timeout_ms"
                      : r->tls    ? "prefix, tls_ca, tls_cert, tls_key, tls_key_password, "
                                    "tls_server_name"
                                  : "prefix";
  *error = "redis URL " + shown + ": unknown parameter \"" + key + "\" (known: " + known + ")";
  return false;
}

// The length of `url`'s scheme, setting r->tls or r->sentinel; 0 with `error` set if unknown.
size_t parse_scheme(const std::string& url, const std::string& shown, RedisUrl* r,
                    std::string* error) {
  static const std::string kScheme = "redis://";
  static const std::string kTlsScheme = "rediss://";
  static const std::string kSentinelScheme = "redis+sentinel://";
  if (url.compare(0, kScheme.size(), kScheme) == 0) return kScheme.size();
  if (url.compare(0, kTlsScheme.size(), kTlsScheme) == 0) {
    r->tls = true;
    return kTlsScheme.size();
  }
  if (url.compare(0, kSentinelScheme.size(), kSentinelScheme) == 0) {
    r->sentinel = true;
    return kSentinelScheme.size();
  }
  *error = "redis URL " + shown + " must start with redis://, rediss:// or redis+sentinel://";
  return 0;
}

// The userinfo (user:password or :password) into r's user and password: false with `error` set.
bool parse_userinfo(const std::string& userinfo, const std::string& shown, RedisUrl* r,
                    std::string* error) {
  const size_t colon = userinfo.find(':');
  if (colon == std::string::npos) {
    *error =
        "redis URL: the part before '@' must be user:password or :password (URL not shown, "
        "it may hold a password)";
    return false;
  }
  if (!percent_decode(userinfo.substr(0, colon), &r->user) ||
      !percent_decode(userinfo.substr(colon + 1), &r->password)) {
    *error = "redis URL " + shown + ": malformed %-escape in the user or password";
    return false;
  }
  r->has_password = true;
  if (r->password.empty()) {
    *error = "redis URL " + shown + ": empty password";
    return false;
  }
  return true;
}

// The comma-separated Sentinels, in order, into r->sentinels: false with `error` set at a bad one.
bool parse_sentinels(const std::string& hostport, const std::string& shown, RedisUrl* r,
                     std::string* error) {
  size_t from = 0;
  while (true) {
    const size_t comma = hostport.find(',', from);
    RedisUrl::Host h{"", kSentinelPort};
    if (!parse_host_port(hostport.substr(from, comma - from), shown, &h, error)) return false;
    r->sentinels.push_back(h);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return true;
}

// MASTER of the Sentinel path MASTER[/db] into r->master_name, db left in `path`: false if bad.
bool take_master_name(std::string* path, const std::string& shown, RedisUrl* r,
                      std::string* error) {
  const size_t db_slash = path->find('/');
  r->master_name = path->substr(0, db_slash);
  *path = db_slash == std::string::npos ? std::string() : path->substr(db_slash + 1);
  if (!master_name_ok(r->master_name)) {
    *error = "redis URL " + shown +
             ": redis+sentinel:// needs the master's name as its path (/NAME, 1-128 "
             "characters of [A-Za-z0-9._-]), as in `sentinel monitor NAME ...`";
    return false;
  }
  return true;
}

}  // namespace

bool parse_redis_url(const std::string& url, RedisUrl* out, std::string* error) {
  // The URL is quoted in messages with any password hidden; a userinfo without a
  // colon might be a password, so the messages about it never quote the URL.
  const std::string shown = "\"" + redact_url(url) + "\"";
  RedisUrl r;
  const size_t scheme_len = parse_scheme(url, shown, &r, error);
  if (scheme_len == 0) return false;
  std::string rest = url.substr(scheme_len);
  // Query.
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  // Path: /db, or /MASTER[/db] with Sentinels.
  std::string path;
  const size_t at_pos = rest.rfind('@');
  if (at_pos != std::string::npos && rest.find('@') != at_pos) {
    *error =
        "redis URL: more than one '@' (write '@' in a password as %40; URL not shown, "
        "it may hold a password)";
    return false;
  }
  const size_t slash = rest.find('/', at_pos == std::string::npos ? 0 : at_pos + 1);
  if (slash != std::string::npos) {
    path = rest.substr(slash + 1);
    rest.resize(slash);
  }
  // Userinfo.
  std::string hostport = rest;
  if (at_pos != std::string::npos && at_pos < rest.size()) {
    hostport = rest.substr(at_pos + 1);
    if (!parse_userinfo(rest.substr(0, at_pos), shown, &r, error)) return false;
  }
  // Host and port, or the Sentinels' hosts and ports.
  if (!r.sentinel) {
    RedisUrl::Host h{"", r.port};
    if (!parse_host_port(hostport, shown, &h, error)) return false;
    r.host = h.first;
    r.port = h.second;
  } else if (!parse_sentinels(hostport, shown, &r, error) ||
             !take_master_name(&path, shown, &r, error)) {
    return false;
  }
  if (!path.empty() && !parse_decimal(path, 0, 1000000, &r.db)) {
    *error = "redis URL " + shown + ": the path must be a database number (e.g. /0)";
    return false;
  }
  for (const QueryParam& p : query_params(query)) {
    if (!apply_parameter(p.key, p.value, shown, &r, error)) return false;
  }
  if (r.tls && r.tls_cert.empty() != r.tls_key.empty()) {
    *error = "redis URL " + shown + ": tls_cert and tls_key go together";
    return false;
  }
  *out = std::move(r);
  return true;
}

}  // namespace simba
