// redis://[user:password@]host[:port][/db][?prefix=NAME] and
// rediss://... (TLS, with tls_ca=, tls_cert=, tls_key=, tls_key_password=,
// tls_server_name=): the parsed form.
#ifndef SIMBA_BACKEND_REDIS_REDIS_URL_H
#define SIMBA_BACKEND_REDIS_REDIS_URL_H

#include <string>

namespace simba {

struct RedisUrl {
  std::string user;      // empty: AUTH with the password only (or no AUTH)
  std::string password;  // empty: no AUTH
  bool has_password = false;
  std::string host;      // a name, an IPv4 or an IPv6 address (without brackets)
  int port = 6379;
  int db = 0;
  std::string prefix = "simba";
  // rediss:// only (ADR 0019).
  bool tls = false;
  std::string tls_ca;            // PEM file of the CAs to trust; "" = the system's store
  std::string tls_cert;          // client certificate (PEM chain), with tls_key
  std::string tls_key;           // its private key (PEM)
  std::string tls_key_password;  // the key's passphrase; never logged nor shown
  std::string tls_server_name;   // the name the certificate must carry; "" = host
};

// Parses `url` (which must start with "redis://" or "rediss://"). On failure returns false and
// sets `error` to a message that never contains the password.
bool parse_redis_url(const std::string& url, RedisUrl* out, std::string* error);

}  // namespace simba

#endif
