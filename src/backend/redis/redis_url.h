// redis://[user:password@]host[:port][/db][?prefix=NAME]: the parsed form.
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
};

// Parses `url` (which must start with "redis://"). On failure returns false and
// sets `error` to a message that never contains the password.
bool parse_redis_url(const std::string& url, RedisUrl* out, std::string* error);

}  // namespace simba

#endif
