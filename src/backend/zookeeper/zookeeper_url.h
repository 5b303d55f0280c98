// zookeeper://host[:port][,host[:port]...][/chroot][?auth=digest:user:password]:
// the parsed form.
#ifndef SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_URL_H
#define SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_URL_H

#include <string>
#include <vector>

namespace simba {

struct ZookeeperHost {
  std::string host;  // a name, an IPv4 or an IPv6 address (without brackets)
  int port = 2181;
};

struct ZookeeperUrl {
  std::vector<ZookeeperHost> hosts;  // at least one
  std::string chroot = "/simba";     // an absolute path, never "/" nor ending in '/'
  bool has_auth = false;             // digest authentication (auth=digest:user:password)
  std::string user;
  std::string password;  // never logged nor shown
};

// Parses `url` (which must start with "zookeeper://"). On failure returns false
// and sets `error` to a message that never contains the password.
bool parse_zookeeper_url(const std::string& url, ZookeeperUrl* out, std::string* error);

}  // namespace simba

#endif
