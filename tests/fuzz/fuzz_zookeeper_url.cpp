// zookeeper:// URLs: the parser never crashes, accepts only what it documents
// (hosts, ports, chroot), and never shows the digest password.
#include "backend/backend.h"
#include "backend/zookeeper/zookeeper_url.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  simba::ZookeeperUrl z;
  std::string error;
  const std::string shown = simba::redact_url(url);
  if (!simba::parse_zookeeper_url(url, &z, &error)) {
    FUZZ_CHECK(!error.empty(), "refused without a message");
    return 0;
  }
  FUZZ_CHECK(!z.hosts.empty(), "accepted without a host");
  for (const auto& h : z.hosts) {
    FUZZ_CHECK(!h.host.empty(), "empty host");
    FUZZ_CHECK(h.port >= 1 && h.port <= 65535, "port %d", h.port);
  }
  FUZZ_CHECK(z.chroot.size() >= 2 && z.chroot[0] == '/' && z.chroot.back() != '/', "chroot %s",
             z.chroot.c_str());
  FUZZ_CHECK(z.chroot.find("//") == std::string::npos, "chroot %s", z.chroot.c_str());
  if (z.has_auth) {
    FUZZ_CHECK(!z.user.empty() && !z.password.empty(), "auth without user or password");
    const std::string& pw = z.password;
    if (pw.size() >= 4 && pw.find_first_of("*Q") == std::string::npos &&
        fuzz::count(url, pw) == 1) {
      FUZZ_CHECK(shown.find(pw) == std::string::npos, "redact_url shows the password");
      if (pw.size() >= 8) {
        const std::string bad = url + "&zz9=1";
        simba::ZookeeperUrl ignored;
        std::string err2, err3;
        FUZZ_CHECK(!simba::parse_zookeeper_url(bad, &ignored, &err2), "unknown parameter accepted");
        (void)simba::parse_zookeeper_url(fuzz::without_secret(bad, pw), &ignored, &err3);
        FUZZ_CHECK(fuzz::count(err2, pw) <= fuzz::count(err3, pw), "error shows the password: %s",
                   err2.c_str());
      }
    }
  }
  return 0;
}
