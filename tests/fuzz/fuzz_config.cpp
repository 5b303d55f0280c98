// Configuration values and durations: Config::set and simba_config_set take
// any text for any key without crashing, accept a duration exactly when
// parse_duration does, keep every accepted duration in [0, 1e12] ms, and
// parse_duration's result reads back from its decimal form.
#include <string>

#include "core/config.h"
#include "fuzz_common.h"
#include "simba.h"

namespace {

const char* const kKeys[] = {
    "session.lease-duration",
    "session.renew-interval",
    "session.drift",
    "session.margin",
    "session.retry-jitter",
    "session.min-backoff",
    "callback.executor",
    "callback.threads",
    "loop.mode",
    "client.name",
};
constexpr size_t kKeyCount = sizeof kKeys / sizeof kKeys[0];
constexpr int64_t kMaxMs = 1'000'000'000'000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t pick = in.byte();
  const std::string key = pick % 16 < kKeyCount ? std::string(kKeys[pick % 16]) : in.str(40);
  const std::string value = in.rest();

  // The duration grammar alone.
  const std::optional<simba::Duration> d = simba::parse_duration(value);
  if (d) {
    const int64_t n = simba::to_ms(*d);
    FUZZ_CHECK(n >= 0 && n <= kMaxMs, "duration %lld ms", static_cast<long long>(n));
    const std::optional<simba::Duration> again = simba::parse_duration(std::to_string(n));
    FUZZ_CHECK(again && *again == *d, "%lld does not read back", static_cast<long long>(n));
  }

  // One key of the internal Config.
  simba::Config c;
  const std::string why = c.set(key, value);
  if (why.empty()) {
    if (std::optional<simba::Duration> got = c.get_duration(key); got && key != "client.name") {
      FUZZ_CHECK(d && *got == *d, "duration key %s accepted \"%s\" that parse_duration refuses",
                 key.c_str(), value.c_str());
    }
    (void)c.validate();
  } else if (c.get_duration(key) && d && simba::to_ms(*d) >= 0) {
    // A duration parse_duration accepts may only be refused for a range rule.
    FUZZ_CHECK(why.find("is not a duration") == std::string::npos,
               "%s refused a valid duration: %s", key.c_str(), why.c_str());
  }

  // The same through the C ABI (C strings: up to the first NUL).
  simba_config_t* cfg = nullptr;
  if (simba_config_new(&cfg) == SIMBA_OK) {
    const int rc = simba_config_set(cfg, key.c_str(), value.c_str());
    FUZZ_CHECK(rc == SIMBA_OK || rc < 0, "rc %d", rc);
    FUZZ_CHECK(simba_last_error() != nullptr || rc == SIMBA_OK, "no detail message");
    simba_config_free(cfg);
  }
  return 0;
}
