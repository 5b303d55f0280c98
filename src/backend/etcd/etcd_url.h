// etcd://host[:port][,host[:port]...][/prefix]: the parsed form (issue 38, ADR 0045).
#ifndef SIMBA_BACKEND_ETCD_ETCD_URL_H
#define SIMBA_BACKEND_ETCD_ETCD_URL_H

#include <string>
#include <vector>

namespace simba {

struct EtcdEndpoint {
  std::string host;  // a name or an IP address (IPv6 without brackets)
  int port = 2379;   // etcd's client port
};

struct EtcdUrl {
  std::vector<EtcdEndpoint> endpoints;  // at least one, in the URL's order
  std::string prefix = "/simba";        // every key starts with it; never ends in '/'
};

// Parses `url` (which must start with "etcd://"). On failure returns false and
// sets `error`. Not yet supported, and refused by name rather than ignored:
// etcds:// (TLS), user:password@ and query parameters.
bool parse_etcd_url(const std::string& url, EtcdUrl* out, std::string* error);

}  // namespace simba

#endif
