// redis://, rediss:// and redis+sentinel:// URLs: the parser never crashes, accepts only what it
// documents, and never shows the password (in redact_url, or in the message of a URL refused).
#include <cctype>

#include "backend/backend.h"
#include "backend/redis/redis_url.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  simba::RedisUrl r;
  std::string error;
  const std::string shown = simba::redact_url(url);
  if (!simba::parse_redis_url(url, &r, &error)) {
    FUZZ_CHECK(!error.empty(), "refused without a message");
    return 0;
  }
  if (r.sentinel) {
    FUZZ_CHECK(!r.sentinels.empty() && !r.master_name.empty(),
               "Sentinel URL without hosts or master");
    for (const auto& [host, port] : r.sentinels) {
      FUZZ_CHECK(!host.empty(), "accepted a Sentinel without a host");
      FUZZ_CHECK(port >= 1 && port <= 65535, "Sentinel port %d", port);
    }
    FUZZ_CHECK(r.wait_replicas >= 0 && r.wait_timeout_ms >= 0, "negative wait option");
    const std::string& spw = r.sentinel_password;
    if (spw.size() >= 4 && spw.find_first_of("*Q") == std::string::npos &&
        fuzz::count(url, spw) == 1) {
      FUZZ_CHECK(shown.find(spw) == std::string::npos, "redact_url shows the Sentinel password");
    }
  } else {
    FUZZ_CHECK(!r.host.empty(), "accepted without a host");
  }
  FUZZ_CHECK(r.port >= 1 && r.port <= 65535, "port %d", r.port);
  FUZZ_CHECK(r.db >= 0, "db %d", r.db);
  FUZZ_CHECK(!r.prefix.empty() && r.prefix.size() <= 64, "prefix of %zu", r.prefix.size());
  FUZZ_CHECK(!r.has_password || !r.password.empty(), "empty password accepted");
  // The password, when it is long enough to be told from the rest and occurs
  // once in the URL, is in none of what Simba shows.
  const std::string& pw = r.password;
  if (pw.size() >= 4 && pw.find_first_of("*Q") == std::string::npos && fuzz::count(url, pw) == 1) {
    FUZZ_CHECK(shown.find(pw) == std::string::npos, "redact_url shows the password");
    if (pw.size() >= 8) {
      const std::string bad = url + (url.find('?') == std::string::npos ? "?zz9=1" : "&zz9=1");
      simba::RedisUrl ignored;
      std::string err2;
      FUZZ_CHECK(!simba::parse_redis_url(bad, &ignored, &err2), "unknown parameter accepted");
      std::string err3;
      (void)simba::parse_redis_url(fuzz::without_secret(bad, pw), &ignored, &err3);
      FUZZ_CHECK(fuzz::count(err2, pw) <= fuzz::count(err3, pw), "error shows the password: %s",
                 err2.c_str());
    }
  }
  return 0;
}
