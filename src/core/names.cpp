#include "core/names.h"

#include <cstdio>

namespace simba {

namespace {

constexpr size_t kMaxNameLength = 128;
constexpr const char* kRule = "1-128 characters of [A-Za-z0-9._:-], other than \".\" and \"..\"";

bool allowed(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

// The character as it appears in a message: 'c' when printable, else \xNN.
std::string show_char(unsigned char c) {
  if (c == '\'') return "'\\''";
  if (c == '\\') return "'\\\\'";
  if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", c);
  return buf;
}

}  // namespace

std::string check_lease_name(std::string_view name) {
  if (name.empty()) return std::string("lease name is empty (must be ") + kRule + ")";
  if (name.size() > kMaxNameLength) {
    return "lease name is " + std::to_string(name.size()) + " characters long (at most " +
           std::to_string(kMaxNameLength) + "; must be " + kRule + ")";
  }
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c == '\0') {
      return "lease name has a NUL byte at index " + std::to_string(i) + " (must be " + kRule + ")";
    }
    if (!allowed(c)) {
      return "lease name has character " + show_char(c) + " at index " + std::to_string(i) +
             " (must be " + kRule + ")";
    }
  }
  if (name == "." || name == "..") {
    return "lease name \"" + std::string(name) + "\" is not allowed (must be " + kRule + ")";
  }
  return "";
}

}  // namespace simba
