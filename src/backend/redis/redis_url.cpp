#include "backend/redis/redis_url.h"

#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

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

}  // namespace

bool parse_redis_url(const std::string& url, RedisUrl* out, std::string* error) {
  static const std::string kScheme = "redis://";
  static const std::string kTlsScheme = "rediss://";
  // The URL is quoted in messages with any password hidden; a userinfo without a
  // colon might be a password, so the messages about it never quote the URL.
  const std::string shown = "\"" + redact_url(url) + "\"";
  RedisUrl r;
  size_t scheme_len = 0;
  if (url.compare(0, kScheme.size(), kScheme) == 0) {
    scheme_len = kScheme.size();
  } else if (url.compare(0, kTlsScheme.size(), kTlsScheme) == 0) {
    scheme_len = kTlsScheme.size();
    r.tls = true;
  } else {
    *error = "redis URL " + shown + " must start with redis:// or rediss://";
    return false;
  }
  std::string rest = url.substr(scheme_len);
  // Query.
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  // Path: /db.
  std::string path;
  const size_t at_pos = rest.rfind('@');
  if (at_pos != std::string::npos && rest.find('@') != at_pos) {
    *error = "redis URL: more than one '@' (write '@' in a password as %40; URL not shown, "
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
    const std::string userinfo = rest.substr(0, at_pos);
    hostport = rest.substr(at_pos + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string::npos) {
      *error =
          "redis URL: the part before '@' must be user:password or :password (URL not shown, "
          "it may hold a password)";
      return false;
    }
    if (!percent_decode(userinfo.substr(0, colon), &r.user) ||
        !percent_decode(userinfo.substr(colon + 1), &r.password)) {
      *error = "redis URL " + shown + ": malformed %-escape in the user or password";
      return false;
    }
    r.has_password = true;
    if (r.password.empty()) {
      *error = "redis URL " + shown + ": empty password";
      return false;
    }
  }
  // Host and port.
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) {
      *error = "redis URL " + shown + ": unterminated [IPv6 address]";
      return false;
    }
    r.host = hostport.substr(1, close - 1);
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
    r.host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) {
        *error = "redis URL " + shown + ": empty port";
        return false;
      }
    }
  }
  if (r.host.empty()) {
    *error = "redis URL " + shown + " has no host";
    return false;
  }
  for (char c : r.host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%') {
      *error = "redis URL " + shown + ": invalid character in the host";
      return false;
    }
  }
  if (!port.empty() && !parse_decimal(port, 1, 65535, &r.port)) {
    *error = "redis URL " + shown + ": the port must be a number from 1 to 65535";
    return false;
  }
  if (!path.empty() && !parse_decimal(path, 0, 1000000, &r.db)) {
    *error = "redis URL " + shown + ": the path must be a database number (e.g. /0)";
    return false;
  }
  // Query parameters: prefix only.
  size_t start = 0;
  while (start < query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string::npos) amp = query.size();
    const std::string kv = query.substr(start, amp - start);
    start = amp + 1;
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : kv.substr(eq + 1);
    if (key == "prefix") {
      if (!prefix_ok(value)) {
        *error = "redis URL " + shown +
                 ": prefix must be 1-64 characters of [A-Za-z0-9._:-]";
        return false;
      }
      r.prefix = value;
    } else if (key == "tls_ca" || key == "tls_cert" || key == "tls_key" ||
               key == "tls_key_password" || key == "tls_server_name") {
      if (!r.tls) {
        *error = "redis URL " + shown + ": " + key + " needs a rediss:// URL (TLS)";
        return false;
      }
      std::string decoded;
      if (!percent_decode(value, &decoded) || decoded.empty() ||
          decoded.find('\0') != std::string::npos) {
        *error = "redis URL " + shown + ": " + key + " must be a non-empty value (%-escapes allowed)";
        return false;
      }
      if (key == "tls_ca") r.tls_ca = decoded;
      if (key == "tls_cert") r.tls_cert = decoded;
      if (key == "tls_key") r.tls_key = decoded;
      if (key == "tls_key_password") r.tls_key_password = decoded;
      if (key == "tls_server_name") {
        for (char c : decoded) {
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':') {
            *error = "redis URL " + shown + ": tls_server_name must be a host name or address";
            return false;
          }
        }
        r.tls_server_name = decoded;
      }
    } else {
      *error = "redis URL " + shown + ": unknown parameter \"" + key + "\" (known: prefix" +
               (r.tls ? ", tls_ca, tls_cert, tls_key, tls_key_password, tls_server_name)" : ")");
      return false;
    }
  }
  if (r.tls && r.tls_cert.empty() != r.tls_key.empty()) {
    *error = "redis URL " + shown + ": tls_cert and tls_key go together";
    return false;
  }
  *out = std::move(r);
  return true;
}

}  // namespace simba
