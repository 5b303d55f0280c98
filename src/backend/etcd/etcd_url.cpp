#include "backend/etcd/etcd_url.h"

#include <algorithm>
#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

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
  // Userinfo is refused, and a malformed URL may hide a password where
  // redact_url would not look: such a URL is never shown.
  const std::string where = url.find('@') == std::string::npos
                                ? "etcd URL \"" + redact_url(url) + "\""
                                : "etcd URL (not shown: it may hold a password)";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    *error = where + ": expected etcd://host[:port][,host[:port]...][/prefix]";
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
  if (slash != std::string::npos && slash + 1 < rest.size()) {  // "/" alone: the default
    std::string path;
    if (!percent_decode(rest.substr(slash), &path) || !prefix_ok(path)) {
      *error = where +
               ": the prefix must be /part[/part...] of letters, digits, '.', '_', '-' and ':'"
               ", not ending in '/'";
      return false;
    }
    out->prefix = path;
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = std::min(hostport.find(',', start), hostport.size());
    EtcdEndpoint e;
    std::string why;
    if (!parse_host_port(hostport.substr(start, comma - start), &e.host, &e.port, &why)) {
      *error = where + ": " + why;
      return false;
    }
    out->endpoints.push_back(e);
    if (comma == hostport.size()) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace simba
