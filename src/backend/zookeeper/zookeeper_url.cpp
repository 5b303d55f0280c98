#include "backend/zookeeper/zookeeper_url.h"

#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

// Each component of the chroot follows the lease-name alphabet, so that the
// chroot is a valid ZooKeeper path that needs no escaping anywhere.
bool chroot_ok(const std::string& p) {
  if (p.size() < 2 || p.size() > 200 || p[0] != '/' || p.back() == '/') return false;
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part == "zookeeper") return false;
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
          c != ':') {
        return false;
      }
    }
    start = end + 1;
  }
  return true;
}

// One host[:port] ("[v6]:port" for IPv6) of the list: false with `error` set otherwise.
bool parse_host(const std::string& hp, const std::string& shown, ZookeeperHost* h,
                std::string* error) {
  std::string why;
  if (parse_host_port(hp, &h->host, &h->port, &why)) return true;
  *error = "zookeeper URL " + shown + ": " + why;
  return false;
}

// The comma-separated host list, in order: false with `error` set at the first bad host.
bool parse_hosts(const std::string& list, const std::string& shown,
                 std::vector<ZookeeperHost>* hosts, std::string* error) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    ZookeeperHost h;
    if (!parse_host(list.substr(start, comma - start), shown, &h, error)) return false;
    start = comma + 1;
    hosts->push_back(h);
    if (comma == list.size()) break;
  }
  return true;
}

// The value of auth= into z's user and password: false with `error` set otherwise.
bool apply_auth(const std::string& value, const std::string& shown, ZookeeperUrl* z,
                std::string* error) {
  // digest:user:password; the password may hold ':' (the user cannot).
  static const std::string kDigest = "digest:";
  const size_t colon = value.find(':', kDigest.size());
  if (value.compare(0, kDigest.size(), kDigest) != 0 || colon == std::string::npos) {
    *error =
        "zookeeper URL: auth must be digest:user:password (URL not shown, it may hold a "
        "password)";
    return false;
  }
  if (!percent_decode(value.substr(kDigest.size(), colon - kDigest.size()), &z->user) ||
      !percent_decode(value.substr(colon + 1), &z->password)) {
    *error = "zookeeper URL " + shown + ": malformed %-escape in the auth user or password";
    return false;
  }
  if (z->user.empty() || z->password.empty() || z->user.find(':') != std::string::npos) {
    *error =
        "zookeeper URL " + shown + ": auth needs a user (without ':') and a non-empty password";
    return false;
  }
  z->has_auth = true;
  return true;
}

// The query's parameters (auth only) into z: false with `error` set at the first bad one.
bool apply_parameters(const std::string& query, const std::string& shown, ZookeeperUrl* z,
                      std::string* error) {
  for (const QueryParam& p : query_params(query)) {
    if (p.key == "auth") {
      if (!apply_auth(p.value, shown, z, error)) return false;
    } else {
      *error = "zookeeper URL " + shown + ": unknown parameter \"" + p.key + "\" (known: auth)";
      return false;
    }
  }
  return true;
}

}  // namespace

bool parse_zookeeper_url(const std::string& url, ZookeeperUrl* out, std::string* error) {
  static const std::string kScheme = "zookeeper://";
  const std::string shown = "\"" + redact_url(url) + "\"";
  if (url.compare(0, kScheme.size(), kScheme) != 0) {
    *error = "zookeeper URL " + shown + " must start with zookeeper://";
    return false;
  }
  ZookeeperUrl z;
  std::string rest = url.substr(kScheme.size());
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  if (rest.find('@') != std::string::npos) {
    *error =
        "zookeeper URL: credentials go in ?auth=digest:user:password, not before '@' (URL not "
        "shown, it may hold a password)";
    return false;
  }
  std::string path;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    path = rest.substr(slash);
    rest.resize(slash);
  }
  // Hosts.
  if (!parse_hosts(rest, shown, &z.hosts, error)) return false;
  // Chroot: "" and "/" mean the default.
  if (!path.empty() && path != "/") {
    if (!chroot_ok(path)) {
      *error = "zookeeper URL " + shown +
               ": the chroot must be an absolute path of components of [A-Za-z0-9._:-] (not . "
               "or .., not /zookeeper, at most 200 characters)";
      return false;
    }
    z.chroot = path;
  }
  // Query parameters: auth only.
  if (!apply_parameters(query, shown, &z, error)) return false;
  *out = std::move(z);
  return true;
}

}  // namespace simba
