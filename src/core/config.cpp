#include "core/config.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <system_error>

namespace simba {

namespace {

// Largest duration accepted from text or set_duration(): 10^12 ms (about 31.7
// years) is 10^18 ns, well inside int64 nanoseconds.
constexpr int64_t kMaxDurationMs = 1'000'000'000'000;
constexpr int64_t kNsPerMs = 1'000'000;

constexpr int kMinThreads = 1;
constexpr int kMaxThreads = 64;
constexpr size_t kMaxClientName = 128;

constexpr std::string_view kKeyLeaseDuration = "session.lease-duration";
constexpr std::string_view kKeyRenewInterval = "session.renew-interval";
constexpr std::string_view kKeyDrift = "session.drift";
constexpr std::string_view kKeyMargin = "session.margin";
constexpr std::string_view kKeyRetryJitter = "session.retry-jitter";
constexpr std::string_view kKeyMinBackoff = "session.min-backoff";
constexpr std::string_view kKeyExecutor = "callback.executor";
constexpr std::string_view kKeyThreads = "callback.threads";
constexpr std::string_view kKeyLoopMode = "loop.mode";
constexpr std::string_view kKeyClientName = "client.name";

constexpr const char* kAllKeys =
    "session.lease-duration, session.renew-interval, session.drift, session.margin, "
    "session.retry-jitter, session.min-backoff, callback.executor, callback.threads, "
    "loop.mode, client.name";
constexpr const char* kDurationKeys =
    "session.lease-duration, session.renew-interval, session.margin, "
    "session.retry-jitter, session.min-backoff";
constexpr const char* kDurationFormat =
    "a whole number of milliseconds, optionally with the suffix \"ms\", \"s\" or \"m\" "
    "(e.g. \"250ms\", \"15s\", \"2m\"), at most 1000000000000 ms";

enum class DurationKey { kLease, kRenew, kMargin, kJitter, kBackoff };

std::optional<DurationKey> duration_key(std::string_view key) {
  if (key == kKeyLeaseDuration) return DurationKey::kLease;
  if (key == kKeyRenewInterval) return DurationKey::kRenew;
  if (key == kKeyMargin) return DurationKey::kMargin;
  if (key == kKeyRetryJitter) return DurationKey::kJitter;
  if (key == kKeyMinBackoff) return DurationKey::kBackoff;
  return std::nullopt;
}

// Text quoted for a one-line message: printable ASCII as is, everything else
// as \xNN; long text is cut.
std::string quote(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  size_t n = s.size() < kMaxShown ? s.size() : kMaxShown;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  out += '"';
  if (s.size() > kMaxShown) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// A duration in milliseconds: "5000 ms", or "0.5 ms" when not whole.
std::string fmt_ms(Duration d) {
  int64_t ns = d.count();
  std::string out;
  uint64_t mag;
  if (ns < 0) {
    out = "-";
    mag = static_cast<uint64_t>(-(ns + 1)) + 1;
  } else {
    mag = static_cast<uint64_t>(ns);
  }
  out += std::to_string(mag / kNsPerMs);
  uint64_t frac = mag % kNsPerMs;
  if (frac != 0) {
    char buf[16];
    std::snprintf(buf, sizeof buf, ".%06llu", static_cast<unsigned long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + " ms";
}

// Shortest text that reads back as the same double.
std::string fmt_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  if (r.ec != std::errc()) return "?";
  return std::string(buf, r.ptr);
}

}  // namespace

std::optional<Duration> parse_duration(std::string_view text) {
  size_t i = 0;
  int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    n = n * 10 + (text[i] - '0');
    if (n > kMaxDurationMs) return std::nullopt;  // also keeps n * 10 in range
    ++i;
  }
  if (i == 0) return std::nullopt;  // empty number, sign, whitespace, ...
  std::string_view suffix = text.substr(i);
  int64_t unit_ms;
  if (suffix.empty() || suffix == "ms") {
    unit_ms = 1;
  } else if (suffix == "s") {
    unit_ms = 1000;
  } else if (suffix == "m") {
    unit_ms = 60'000;
  } else {
    return std::nullopt;
  }
  if (n > kMaxDurationMs / unit_ms) return std::nullopt;
  return Duration(n * unit_ms * kNsPerMs);
}

Duration Config::renew_interval() const {
  return renew_interval_set ? *renew_interval_set : lease_duration / 3;
}

Duration Config::retry_jitter() const {
  return retry_jitter_set ? *retry_jitter_set : renew_interval() / 2;
}

std::string Config::set_duration(std::string_view key, Duration value) {
  std::optional<DurationKey> k = duration_key(key);
  if (!k) {
    return quote(key) + " is not a duration key (duration keys: " + kDurationKeys + ")";
  }
  if (value.count() < 0) {
    return std::string(key) + ": " + fmt_ms(value) + " is negative (accepted: 0 to " +
           std::to_string(kMaxDurationMs) + " ms)";
  }
  if (value > Duration(kMaxDurationMs * kNsPerMs)) {
    return std::string(key) + ": " + fmt_ms(value) + " is above the maximum of " +
           std::to_string(kMaxDurationMs) + " ms";
  }
  switch (*k) {
    case DurationKey::kLease: lease_duration = value; break;
    case DurationKey::kRenew: renew_interval_set = value; break;
    case DurationKey::kMargin: margin = value; break;
    case DurationKey::kJitter: retry_jitter_set = value; break;
    case DurationKey::kBackoff: min_backoff = value; break;
  }
  return "";
}

std::string Config::set(std::string_view key, std::string_view value) {
  if (duration_key(key)) {
    std::optional<Duration> d = parse_duration(value);
    if (!d) {
      return std::string(key) + ": " + quote(value) + " is not a duration (accepted: " +
             kDurationFormat + ")";
    }
    return set_duration(key, *d);
  }

  if (key == kKeyDrift) {
    double v = 0;
    const char* first = value.data();
    const char* last = value.data() + value.size();
    auto r = std::from_chars(first, last, v, std::chars_format::general);
    if (value.empty() || r.ec == std::errc::invalid_argument || r.ptr != last) {
      return std::string(key) + ": " + quote(value) +
             " is not a decimal number (accepted: a finite decimal in [0, 0.5))";
    }
    if (r.ec == std::errc::result_out_of_range) {
      return std::string(key) + ": " + quote(value) +
             " cannot be represented as a double (accepted: a finite decimal in [0, 0.5))";
    }
    if (r.ec != std::errc() || !std::isfinite(v)) {
      return std::string(key) + ": " + quote(value) +
             " is not a finite number (accepted: a finite decimal in [0, 0.5))";
    }
    if (!(v >= 0.0 && v < 0.5)) {
      return std::string(key) + ": " + quote(value) + " is out of range [0, 0.5)";
    }
    drift = v == 0.0 ? 0.0 : v;  // "-0" reads as 0
    return "";
  }

  if (key == kKeyThreads) {
    bool digits = !value.empty();
    for (char c : value) digits = digits && c >= '0' && c <= '9';
    if (!digits) {
      return std::string(key) + ": " + quote(value) +
             " is not an integer (accepted: an integer in [1, 64])";
    }
    // Leading zeros are allowed; more than 9 significant digits is out of range anyway.
    size_t start = value.find_first_not_of('0');
    std::string_view sig = start == std::string_view::npos ? "0" : value.substr(start);
    int n = sig.size() > 9 ? kMaxThreads + 1 : std::stoi(std::string(sig));
    if (n < kMinThreads || n > kMaxThreads) {
      return std::string(key) + ": " + quote(value) + " is out of range [1, 64]";
    }
    callback_threads = n;
    return "";
  }

  if (key == kKeyExecutor) {
    if (value == "pool") {
      executor = ExecutorKind::kPool;
      return "";
    }
    if (value == "direct") {
      executor = ExecutorKind::kDirect;
      return "";
    }
    if (value == "host") {
      return std::string(key) +
             ": \"host\" cannot be set by text; use simba_config_set_executor() "
             "(accepted: \"pool\", \"direct\")";
    }
    return std::string(key) + ": " + quote(value) +
           " is not an executor (accepted: \"pool\", \"direct\")";
  }

  if (key == kKeyLoopMode) {
    if (value == "thread") {
      loop_mode = LoopMode::kThread;
      return "";
    }
    if (value == "external") {
      loop_mode = LoopMode::kExternal;
      return "";
    }
    return std::string(key) + ": " + quote(value) +
           " is not a loop mode (accepted: \"thread\", \"external\")";
  }

  if (key == kKeyClientName) {
    if (value.size() > kMaxClientName) {
      return std::string(key) + ": " + std::to_string(value.size()) +
             " characters is too long (accepted: 0 to 128 printable ASCII characters)";
    }
    for (size_t i = 0; i < value.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(value[i]);
      if (c < 0x20 || c >= 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", c);
        return std::string(key) + ": " + quote(value) + " has byte " + buf + " at index " +
               std::to_string(i) + " (accepted: 0 to 128 printable ASCII characters)";
      }
    }
    client_name = std::string(value);
    return "";
  }

  return "unknown key " + quote(key) + " (known keys: " + kAllKeys + ")";
}

std::optional<Duration> Config::get_duration(std::string_view key) const {
  std::optional<DurationKey> k = duration_key(key);
  if (!k) return std::nullopt;
  switch (*k) {
    case DurationKey::kLease: return lease_duration;
    case DurationKey::kRenew: return renew_interval();
    case DurationKey::kMargin: return margin;
    case DurationKey::kJitter: return retry_jitter();
    case DurationKey::kBackoff: return min_backoff;
  }
  return std::nullopt;
}

std::optional<double> Config::get_number(std::string_view key) const {
  if (key == kKeyDrift) return drift;
  if (key == kKeyThreads) return static_cast<double>(callback_threads);
  return std::nullopt;
}

std::string Config::validate() const {
  const Duration lease = lease_duration;
  const Duration renew = renew_interval();
  const Duration jitter = retry_jitter();

  if (lease.count() <= 0) {
    return "session.lease-duration must be > 0 (is " + fmt_ms(lease) + ")";
  }
  if (renew.count() <= 0) {
    return "session.renew-interval must be > 0 (is " + fmt_ms(renew) + ")";
  }
  if (jitter.count() < 0) {
    return "session.retry-jitter must be >= 0 (is " + fmt_ms(jitter) + ")";
  }
  if (min_backoff.count() <= 0) {
    return "session.min-backoff must be > 0 (is " + fmt_ms(min_backoff) + ")";
  }
  if (margin.count() < 0) {
    return "session.margin must be >= 0 (is " + fmt_ms(margin) + ")";
  }
  if (!(std::isfinite(drift) && drift >= 0.0 && drift < 0.5)) {
    return "session.drift must be in [0, 0.5) (is " + fmt_double(drift) + ")";
  }
  if (callback_threads < kMinThreads || callback_threads > kMaxThreads) {
    return "callback.threads must be in [1, 64] (is " + std::to_string(callback_threads) + ")";
  }

  // renew * 2 <= lease, written so that it cannot overflow (both are positive).
  if (renew.count() > lease.count() - renew.count()) {
    return "rule renew-interval * 2 <= lease-duration failed: renew-interval " + fmt_ms(renew) +
           " * 2 > lease-duration " + fmt_ms(lease);
  }

  // lease * (1 - drift) - margin > renew. The product is rounded to whole
  // nanoseconds, so that a boundary written in decimal ("0.01") lands where it
  // reads instead of one binary rounding error off.
  long double scaled = static_cast<long double>(lease.count()) *
                       (1.0L - static_cast<long double>(drift));
  int64_t local = static_cast<int64_t>(std::llroundl(scaled));  // 0 < local <= lease
  int64_t lhs = local - margin.count();                          // no overflow: both >= 0
  if (!(lhs > renew.count())) {
    return "rule lease-duration * (1 - drift) - margin > renew-interval failed: "
           "lease-duration " + fmt_ms(lease) + " * (1 - " + fmt_double(drift) + ") - margin " +
           fmt_ms(margin) + " = " + fmt_ms(Duration(lhs)) + ", not > renew-interval " +
           fmt_ms(renew);
  }
  return "";
}

}  // namespace simba
