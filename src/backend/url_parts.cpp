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

void wipe_secret(std::string* secret) {
  if (!secret->empty()) explicit_bzero(secret->data(), secret->size());
  secret->clear();
}

}  // namespace simba
