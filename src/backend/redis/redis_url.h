// redis://[user:password@]host[:port][/db][?prefix=NAME],
// rediss://... (TLS, with tls_ca=, tls_cert=, tls_key=, tls_key_password=,
// tls_server_name=) and
// redis+sentinel://[user:password@]host[:port][,host[:port]...]/MASTER[/db]
//   [?prefix=&sentinel_user=&sentinel_password=&wait_replicas=N&wait_timeout_ms=T]
// (the hosts are Sentinels, default port 26379; the userinfo is the data
// nodes'): the parsed form.
#ifndef SIMBA_BACKEND_REDIS_REDIS_URL_H
#define SIMBA_BACKEND_REDIS_REDIS_URL_H

#include <string>
#include <utility>
#include <vector>

namespace simba {

struct RedisUrl {
  using Host = std::pair<std::string, int>;
  std::string user;      // empty: AUTH with the password only (or no AUTH)
  std::string password;  // empty: no AUTH
  bool has_password = false;
  std::string host;  // a name, an IPv4 or an IPv6 address (without brackets)
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
  // redis+sentinel:// only: the primary is whatever the Sentinels name (host
  // and port above are unused).
  bool sentinel = false;
  std::vector<Host> sentinels;  // host, port (default 26379); in the URL's order
  std::string master_name;
  std::string sentinel_user;      // AUTH to the Sentinels (their requirepass)
  std::string sentinel_password;  // empty: no AUTH to the Sentinels
  // Writes that grant or extend a lease (open, keep-alive, acquire) wait for
  // this many replicas' acknowledgement (WAIT) before they count; 0 = no WAIT.
  int wait_replicas = 0;
  int wait_timeout_ms = 0;  // WAIT's own timeout; 0 = half the call's timeout
};

// Parses `url` (which must start with "redis://", "rediss://" or
// "redis+sentinel://"). On failure returns false and
// sets `error` to a message that never contains the password.
bool parse_redis_url(const std::string& url, RedisUrl* out, std::string* error);

}  // namespace simba

#endif
