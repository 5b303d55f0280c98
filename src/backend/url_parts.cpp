#include "backend/url_parts.h"

#include <string.h>

#include <cctype>

namespace simba {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<QueryParam> query_params(const std::string& query) {
  std::vector<QueryParam> out;
  size_t start = 0;
  while (start < query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string::npos) amp = query.size();
    std::string kv = query.substr(start, amp - start);
    start = amp + 1;
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    QueryParam p;
    p.key = kv.substr(0, eq);
    p.value = eq == std::string::npos ? std::string() : kv.substr(eq + 1);
    p.text = std::move(kv);
    out.push_back(std::move(p));
  }
  return out;
}

bool percent_decode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

bool decode_tls_parameter(const std::string& key, const std::string& value, std::string* out,
                          std::string* why) {
  if (!percent_decode(value, out) || out->empty() || out->find('\0') != std::string::npos) {
    *why = key + " must be a non-empty value (%-escapes allowed)";
    return false;
  }
  if (key == "tls_server_name") {
    for (char c : *out) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':') {
        *why = "tls_server_name must be a host name or address";
        return false;
      }
    }
  }
  return true;
}

bool parse_decimal(const std::string& s, long lo, long hi, int* out) {
  if (s.empty() || s.size() > 9) return false;
  long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_host_port(const std::string& hostport, std::string* host, int* port, std::string* why) {
  std::string p;
  bool has_port = false;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) {
      *why = "unterminated [IPv6 address]";
      return false;
    }
    *host = hostport.substr(1, close - 1);
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':' || after.size() == 1) {
        *why = "expected :port after the IPv6 address";
        return false;
      }
      p = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = hostport.find(':');
    *host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      p = hostport.substr(colon + 1);
      has_port = true;
      if (p.empty()) {
        *why = "empty port";
        return false;
      }
    }
  }
  if (host->empty()) {
    *why = hostport.empty() ? "an empty host" : "no host";
    return false;
  }
  if (host->size() > 255) {
    *why = "a host name longer than 255 characters";
    return false;
  }
  for (char c : *host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':' && c != '%') {
      *why = "invalid character in the host";
      return false;
    }
  }
  if (has_port && !parse_decimal(p, 1, 65535, port)) {
    *why = "the port must be a number from 1 to 65535";
    return false;
  }
  return true;
}

void wipe_secret(std::string* secret) {
  if (!secret->empty()) explicit_bzero(secret->data(), secret->size());
  secret->clear();
}

}  // namespace simba
