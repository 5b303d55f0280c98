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

// One etcds:// query parameter: false with `error` set when it is unknown or
// its value not allowed (as rediss://, ADR 0019).
bool apply_parameter(const std::string& key, const std::string& value, const std::string& where,
                     EtcdUrl* r, std::string* error) {
  std::string* field = key == "tls_ca"             ? &r->tls_ca
                       : key == "tls_cert"         ? &r->tls_cert
                       : key == "tls_key"          ? &r->tls_key
                       : key == "tls_key_password" ? &r->tls_key_password
                       : key == "tls_server_name"  ? &r->tls_server_name
                                                   : nullptr;
  if (!field) {
    *error = where + ": unknown parameter \"" + key + "\" (known: " +
             (r->tls ? "tls_ca, tls_cert, tls_key, tls_key_password, tls_server_name)"
                     : "none without etcds://)");
    return false;
  }
  if (!r->tls) {
    *error = where + ": " + key + " needs an etcds:// URL (TLS)";
    return false;
  }
  std::string decoded, why;
  if (!decode_tls_parameter(key, value, &decoded, &why)) {
    *error = where + ": " + why;
    return false;
  }
  *field = std::move(decoded);
  return true;
}

}  // namespace

bool parse_etcd_url(const std::string& url, EtcdUrl* out, std::string* error) {
  static const std::string kScheme = "etcd://", kTlsScheme = "etcds://";
  // A URL with userinfo is never shown: a malformed one may hide a password
  // where redact_url would not look.
  const std::string hidden = "etcd URL (not shown: it may hold a password)";
  const std::string where =
      url.find('@') == std::string::npos ? "etcd URL \"" + redact_url(url) + "\"" : hidden;
  EtcdUrl r;
  std::string rest;
  if (url.compare(0, kScheme.size(), kScheme) == 0) {
    rest = url.substr(kScheme.size());
  } else if (url.compare(0, kTlsScheme.size(), kTlsScheme) == 0) {
    rest = url.substr(kTlsScheme.size());
    r.tls = true;
  } else {
    *error = where + ": expected etcd[s]://[user:password@]host[:port][,host[:port]...][/prefix]";
    return false;
  }
  // The userinfo runs to the last '@' (write '@' elsewhere as %40): no
  // password is left in what follows, which messages may quote.
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (userinfo.find('@') != std::string::npos || colon == std::string::npos) {
      *error = hidden + ": the part before '@' must be user:password (write '@' as %40)";
      return false;
    }
    if (!percent_decode(userinfo.substr(0, colon), &r.user) ||
        !percent_decode(userinfo.substr(colon + 1), &r.password) || r.user.empty() ||
        r.password.empty()) {
      wipe_secret(&r.password);
      *error = hidden + ": user and password must both be non-empty (%-escapes allowed)";
      return false;
    }
    rest = rest.substr(at + 1);
  }
  std::string query;
  if (const size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
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
    r.prefix = path;
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
    r.endpoints.push_back(e);
    if (comma == hostport.size()) break;
    start = comma + 1;
  }
  for (const QueryParam& p : query_params(query)) {
    if (!apply_parameter(p.key, p.value, where, &r, error)) return false;
  }
  if (r.tls_cert.empty() != r.tls_key.empty()) {
    *error = where + ": tls_cert and tls_key go together (a client certificate and its key)";
    return false;
  }
  *out = std::move(r);
  return true;
}

}  // namespace simba
