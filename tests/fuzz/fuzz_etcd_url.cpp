// etcd:// and etcds:// URLs: the parser never crashes, accepts only what it documents
// (hosts, ports, a prefix that is a clean key path) and never shows a password.
#include "backend/backend.h"
#include "backend/etcd/etcd_url.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  simba::EtcdUrl u;
  std::string error;
  if (!simba::parse_etcd_url(url, &u, &error)) {
    FUZZ_CHECK(!error.empty(), "refused without a message");
    // The message never shows the password of user:password@.
    const size_t at = url.find('@'), colon = url.find(':', 7);
    if (at != std::string::npos && colon != std::string::npos && colon < at && at - colon > 4) {
      const std::string pw = url.substr(colon + 1, at - colon - 1);
      if (pw.find_first_of("*@/?&") == std::string::npos && fuzz::count(url, pw) == 1) {
        FUZZ_CHECK(error.find(pw) == std::string::npos, "error shows the password: %s",
                   error.c_str());
      }
    }
    return 0;
  }
  FUZZ_CHECK(u.user.empty() == u.password.empty(), "a user without a password or back");
  FUZZ_CHECK(u.tls || (u.tls_ca.empty() && u.tls_cert.empty()), "TLS files without etcds://");
  FUZZ_CHECK(!u.endpoints.empty(), "accepted without a host");
  for (const auto& e : u.endpoints) {
    FUZZ_CHECK(!e.host.empty(), "empty host");
    FUZZ_CHECK(e.port >= 1 && e.port <= 65535, "port %d", e.port);
  }
  FUZZ_CHECK(u.prefix.size() >= 2 && u.prefix[0] == '/' && u.prefix.back() != '/', "prefix %s",
             u.prefix.c_str());
  FUZZ_CHECK(u.prefix.find("//") == std::string::npos, "prefix %s", u.prefix.c_str());
  return 0;
}
