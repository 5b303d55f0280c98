// etcd[s]://[user:password@]host[:port][,host[:port]...][/prefix][?tls options]:
// the parsed form (issue 38, ADR 0045).
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
  std::string user;                     // empty: no Authenticate
  std::string password;                 // never logged nor shown
  bool tls = false;                     // etcds://
  std::string tls_ca;                   // PEM file of the CAs to trust; "" = the system's store
  std::string tls_cert;                 // client certificate (PEM chain), with tls_key
  std::string tls_key;                  // its private key (PEM)
  std::string tls_key_password;         // the key's passphrase; never logged nor shown
  std::string tls_server_name;          // the name the certificate must carry; "" = host
};

// Parses `url` (etcd:// or etcds://). On failure returns false and sets
// `error`, which never holds a password. Query parameters (etcds:// only):
// tls_ca, tls_cert, tls_key, tls_key_password, tls_server_name.
bool parse_etcd_url(const std::string& url, EtcdUrl* out, std::string* error);

}  // namespace simba

#endif
