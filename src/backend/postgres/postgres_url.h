// postgresql://... (or postgres://...): any libpq connection URI, plus Simba's
// own query parameters `schema=` and `create=`, which are taken out before the
// rest goes to libpq.
#ifndef SIMBA_BACKEND_POSTGRES_POSTGRES_URL_H
#define SIMBA_BACKEND_POSTGRES_POSTGRES_URL_H

#include <string>
#include <utility>
#include <vector>

namespace simba {

struct PostgresUrl {
  // libpq's connection options as PQconninfoParse read them from the URI (only
  // those set), for PQconnectStartParams.
  std::vector<std::pair<std::string, std::string>> options;
  std::string schema = "public";  // where the simba_* tables and functions live
  bool create = true;             // create (or migrate) the schema when missing or older
  std::string password;           // also in `options`; kept to scrub it from messages

  // The value of libpq option `key`, or "" when unset.
  std::string option(const std::string& key) const;
  // host[:port] for messages (never the password); "local socket" without a host.
  std::string where() const;
};

// Parses `url` (postgresql:// or postgres://). On failure returns false and sets
// `error` to a message that never contains the password.
bool parse_postgres_url(const std::string& url, PostgresUrl* out, std::string* error);

// `text` with every occurrence of `secret` (when not empty) replaced by "***".
std::string scrub_secret(std::string text, const std::string& secret);

}  // namespace simba

#endif
