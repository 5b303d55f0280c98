#include "backend/etcd/etcd_url.h"

#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

bool host_ok(const std::string& h) {
  if (h.empty() || h.size() > 255) return false;
  for (char c : h) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%') {
      return false;
    }
  }
  return true;
}

// Each component follows the lease-name alphabet: the prefix needs no escaping
// in a key, and never ends in '/', so that "{prefix}/l/" is the lease range.
bool prefix_ok(const std::string& p) {
  if (p.size() < 2 || p.size() > 200 || p[0] != '/' || p.back() == '/') return false;
  for (size_t i = 1; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '/' && p[i - 1] == '/') return false;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != ':' && c != '/') {
      return false;
    }
  }
  return true;
}

}  // namespace

bool parse_etcd_url(const std::string& url, EtcdUrl* out, std::string* error) {
  static const std::string kScheme = "etcd://";
  const std::string where = "etcd URL \"" + redact_url(url) + "\"";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    *error = where + ": expected etcd://host[:port][/prefix]";
    return false;
  }
  std::string rest = url.substr(kScheme.size());
  if (rest.find('@') != std::string::npos) {
    *error = where + ": user:password@ is not supported yet (issue 38)";
    return false;
  }
  if (rest.find('?') != std::string::npos) {
    *error = where + ": no query parameters are supported";
    return false;
  }
  const size_t slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) {
    std::string path;
    if (!percent_decode(rest.substr(slash), &path) || !prefix_ok(path)) {
      *error = where +
               ": the prefix must be /part[/part...] of letters, digits, '.', '_', '-' and ':'"
               ", not ending in '/'";
      return false;
    }
    out->prefix = path;
  }
  if (hostport.find(',') != std::string::npos) {
    *error = where + ": several endpoints are not supported yet (issue 38)";
    return false;
  }
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) {
      *error = where + ": unterminated [IPv6 address]";
      return false;
    }
    out->host = hostport.substr(1, close - 1);
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        *error = where + ": expected :port after the IPv6 address";
        return false;
      }
      port = after.substr(1);
      if (port.empty()) {
        *error = where + ": empty port";
        return false;
      }
    }
  } else {
    const size_t colon = hostport.find(':');
    out->host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) {
        *error = where + ": empty port";
        return false;
      }
    }
  }
  if (out->host.empty()) {
    *error = where + ": no host";
    return false;
  }
  if (!host_ok(out->host)) {
    *error = where + ": invalid character in the host";
    return false;
  }
  if (!port.empty() && !parse_decimal(port, 1, 65535, &out->port)) {
    *error = where + ": the port must be a number in 1..65535";
    return false;
  }
  return true;
}

}  // namespace simba
