#include "backend/postgres/postgres_url.h"

#include <libpq-fe.h>

#include <cctype>

#include "backend/backend.h"
#include "backend/url_parts.h"

namespace simba {
namespace {

// A schema name we can quote without escaping, and whose release channel
// ("{schema}_simba_released") still fits PostgreSQL's 63-byte identifiers.
bool schema_ok(const std::string& s) {
  if (s.empty() || s.size() > 48) return false;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool parse_bool(const std::string& v, bool* out) {
  std::string l;
  for (char c : v) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (l == "true" || l == "1" || l == "yes" || l == "on") {
    *out = true;
  } else if (l == "false" || l == "0" || l == "no" || l == "off") {
    *out = false;
  } else {
    return false;
  }
  return true;
}

// The length of `url`'s scheme (postgresql:// or postgres://); 0 for any other.
size_t scheme_length(const std::string& url) {
  size_t scheme_len = 0;
  for (const char* s : {"postgresql://", "postgres://"}) {
    const std::string scheme = s;
    if (url.compare(0, scheme.size(), scheme) == 0) scheme_len = scheme.size();
  }
  return scheme_len;
}

// Where the userinfo (if any) ends, its raw password added to `secrets`.
size_t skip_userinfo(const std::string& url, size_t scheme_len, std::vector<std::string>* secrets) {
  size_t after_userinfo = scheme_len;
  const size_t userinfo_end = url.find_first_of("@/", scheme_len);
  if (userinfo_end != std::string::npos && url[userinfo_end] == '@') {
    after_userinfo = userinfo_end + 1;
    const std::string userinfo = url.substr(scheme_len, userinfo_end - scheme_len);
    if (size_t colon = userinfo.find(':'); colon != std::string::npos) {
      secrets->push_back(userinfo.substr(colon + 1));
    } else {
      secrets->push_back(userinfo);  // might be a password written without a user
    }
  }
  return after_userinfo;
}

// schema= and create= into r, the other parameters appended to `kept`: false with `error` set.
bool take_own_parameters(const std::string& query, const std::string& shown, PostgresUrl* r,
                         std::string* kept, std::vector<std::string>* secrets, std::string* error) {
  for (const QueryParam& p : query_params(query)) {
    const std::string& key = p.key;
    const std::string& raw = p.value;
    const std::string& kv = p.text;
    std::string value;
    if (key == "schema") {
      if (!percent_decode(raw, &value) || !schema_ok(value)) {
        *error = "postgresql URL " + shown +
                 ": schema must be 1-48 characters of [A-Za-z0-9_], not starting with a digit";
        return false;
      }
      r->schema = value;
    } else if (key == "create") {
      if (!percent_decode(raw, &value) || !parse_bool(value, &r->create)) {
        *error = "postgresql URL " + shown + ": create must be true or false";
        return false;
      }
    } else {
      if (key == "password") secrets->push_back(raw);
      *kept += (kept->empty() ? "?" : "&") + kv;
    }
  }
  return true;
}

// Adds the %-decoded form of each secret that has one.
void add_decoded_secrets(std::vector<std::string>* secrets) {
  for (size_t i = 0, n = secrets->size(); i < n; ++i) {
    std::string decoded;
    if (percent_decode((*secrets)[i], &decoded) && decoded != (*secrets)[i]) {
      secrets->push_back(decoded);
    }
  }
}

// libpq's options from `conninfo` into r: false with `error` set (`secrets` scrubbed) otherwise.
bool parse_with_libpq(const std::string& conninfo, const std::string& shown,
                      const std::vector<std::string>& secrets, PostgresUrl* r, std::string* error) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (!opts) {
    std::string why = err ? err : "out of memory";
    if (err) PQfreemem(err);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    for (const std::string& s : secrets) why = scrub_secret(std::move(why), s);
    *error = "postgresql URL " + shown + ": " + why;
    return false;
  }
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (o->val && *o->val) r->options.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(opts);
  return true;
}

// Each entry of the comma-separated `ports` empty or 1-65535: false with `error` set otherwise.
bool check_ports(const std::string& ports, const std::string& shown, std::string* error) {
  for (size_t start = 0; !ports.empty() && start <= ports.size();) {
    size_t comma = ports.find(',', start);
    if (comma == std::string::npos) comma = ports.size();
    const std::string p = ports.substr(start, comma - start);
    int port = 0;  // an empty entry means libpq's default port
    if (!p.empty() && !parse_decimal(p, 1, 65535, &port)) {
      *error = "postgresql URL " + shown + ": a port must be a number from 1 to 65535";
      return false;
    }
    start = comma + 1;
  }
  return true;
}

}  // namespace

std::string scrub_secret(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3)) {
    text.replace(at, secret.size(), "***");
  }
  return text;
}

std::string PostgresUrl::option(const std::string& key) const {
  for (const auto& kv : options) {
    if (kv.first == key) return kv.second;
  }
  return {};
}

std::string PostgresUrl::where() const {
  std::string host = option("host");
  if (host.empty()) host = option("hostaddr");
  if (host.empty()) return "local socket";
  const std::string port = option("port");
  return port.empty() ? host : host + ":" + port;
}

bool parse_postgres_url(const std::string& url, PostgresUrl* out, std::string* error) {
  const std::string shown = "\"" + redact_url(url) + "\"";
  const size_t scheme_len = scheme_length(url);
  if (scheme_len == 0) {
    *error = "postgresql URL " + shown + " must start with postgresql:// or postgres://";
    return false;
  }
  PostgresUrl r;
  // The raw secrets, to scrub from libpq's own messages (which quote the text
  // they could not parse).
  std::vector<std::string> secrets;
  // Split where libpq does: its userinfo runs to the first '@' before any
  // '/' (a password may hold '?'), and the query starts at the first '?' after
  // it. Splitting at the URL's first '?' instead would take our parameters out
  // of a password, and hand libpq a different one than the URL shows.
  const size_t after_userinfo = skip_userinfo(url, scheme_len, &secrets);
  std::string base = url, query;
  if (size_t q = url.find('?', after_userinfo); q != std::string::npos) {
    base = url.substr(0, q);
    query = url.substr(q + 1);
  }
  // Our parameters out, the rest kept for libpq as written.
  std::string kept;
  if (!take_own_parameters(query, shown, &r, &kept, &secrets, error)) return false;
  add_decoded_secrets(&secrets);
  if (!parse_with_libpq(base + kept, shown, secrets, &r, error)) return false;
  r.password = r.option("password");
  // libpq checks ports only when it connects: refuse a bad one now.
  if (!check_ports(r.option("port"), shown, error)) return false;
  *out = std::move(r);
  return true;
}

}  // namespace simba
