// Pieces every backend's URL parser needs: the query's parameters,
// percent-decoding and bounded decimal numbers.
#ifndef SIMBA_BACKEND_URL_PARTS_H
#define SIMBA_BACKEND_URL_PARTS_H

#include <string>
#include <vector>

namespace simba {

// One key[=value] of a query, as written (no %-decoding): `text` is the whole
// piece, for a parser that passes unknown ones on.
struct QueryParam {
  std::string key, value, text;
};
// The pieces of `query` (the part after '?') split at '&', empty ones skipped.
std::vector<QueryParam> query_params(const std::string& query);

// %XX decoding; false on a malformed escape.
bool percent_decode(const std::string& in, std::string* out);

// A decimal number of at most 9 digits in [lo, hi]; false otherwise.
bool parse_decimal(const std::string& s, long lo, long hi, int* out);

// One host[:port] of a URL ("[v6]:port" for IPv6; the host without brackets):
// `host` and `port` (left as is when the URL gives none). False with `why` set
// (a reason without the URL, for the caller to prefix) when malformed.
bool parse_host_port(const std::string& hostport, std::string* host, int* port, std::string* why);

// The value of a TLS query parameter (tls_ca, tls_cert, ... of rediss:// and
// etcds://): %-decoded, non-empty, no NUL; tls_server_name a host name or
// address. False with `why` set (a reason for the caller to prefix).
bool decode_tls_parameter(const std::string& key, const std::string& value, std::string* out,
                          std::string* why);

// Overwrites the characters of `secret` (the compiler may not skip it) and
// empties it: a parsed URL's copy of a password is not left in freed memory
// (a core dump) once the backend took what it keeps.
void wipe_secret(std::string* secret);

}  // namespace simba

#endif
