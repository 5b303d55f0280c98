#include "core/config.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <system_error>

namespace simba {

namespace {

constexpr int64_t kNsPerMs = 1'000'000;

// The ranges that validate() checks again (a Config can be changed field by field).
constexpr double kMinDrift = 0.0;
constexpr double kMaxDrift = 0.5;
constexpr int kMinThreads = 1;
constexpr int kMaxThreads = 64;
constexpr int kMaxClientName = 128;

constexpr const char* kDurationFormat =
    "a whole number of milliseconds, optionally with the suffix \"ms\", \"s\" or \"m\" "
    "(e.g. \"250ms\", \"15s\", \"2m\"), at most 1000000000000 ms";

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

// ---------------------------------------------------------------------------
// The key table. Each key is one row: its name, its kind (which says how its
// text is parsed), the range its value must be in, and how it is stored and
// read back. Config::set(), set_duration(), get_duration(), get_number(), the
// lists of keys in error messages and config_key_names() all read this table.

enum class Kind {
  kDuration,  // parse_duration() text; range [lo, hi] in ms
  kDecimal,   // a finite decimal; range [lo, hi)
  kInteger,   // digits only; range [lo, hi]
  kChoice,    // one of Choices::texts; no range
  kText,      // printable ASCII; range: 0 to hi characters
};

// A parsed value: the member that the key's kind names is set.
struct Value {
  Value() = default;
  explicit Value(Duration d) : duration(d) {}
  explicit Value(double n) : number(n) {}

  Duration duration{};
  double number = 0;  // kDecimal, kInteger
  size_t choice = 0;  // an index into Choices::texts
  std::string_view text;
};

struct Range {
  double lo = 0;
  double hi = 0;
};

// The values of a kChoice key.
struct Choices {
  std::string_view what;                  // "an executor": "... is not an executor"
  std::array<std::string_view, 4> texts;  // settable by text; unused slots empty
  std::string_view by_call_only;          // a value only a function sets, or empty
  std::string_view call;                  // that function
};

constexpr Choices kExecutors = {
    "an executor", {"pool", "direct"}, "host", "simba_config_set_executor()"};
constexpr Choices kLoopModes = {"a loop mode", {"thread", "external"}, "", ""};

using Store = void (*)(Config&, const Value&);
using Load = Value (*)(const Config&);  // nullptr: not readable by key

struct KeySpec {
  std::string_view name;
  Kind kind;
  Range range;
  const Choices* choices;  // kChoice only
  Store store;
  Load load;
};

// In the order of the key table of include/simba.h (tests/core/config_keys_test.cpp).
// clang-format off
const KeySpec kKeys[] = {
    {"session.lease-duration", Kind::kDuration, {0, kMaxDurationMs}, nullptr,
     [](Config& c, const Value& v) { c.lease_duration = v.duration; },
     [](const Config& c) { return Value(c.lease_duration); }},
    {"session.renew-interval", Kind::kDuration, {0, kMaxDurationMs}, nullptr,
     [](Config& c, const Value& v) { c.renew_interval_set = v.duration; },
     [](const Config& c) { return Value(c.renew_interval()); }},
    {"session.drift", Kind::kDecimal, {kMinDrift, kMaxDrift}, nullptr,
     [](Config& c, const Value& v) { c.drift = v.number; },
     [](const Config& c) { return Value(c.drift); }},
    {"session.margin", Kind::kDuration, {0, kMaxDurationMs}, nullptr,
     [](Config& c, const Value& v) { c.margin = v.duration; },
     [](const Config& c) { return Value(c.margin); }},
    {"session.retry-jitter", Kind::kDuration, {0, kMaxDurationMs}, nullptr,
     [](Config& c, const Value& v) { c.retry_jitter_set = v.duration; },
     [](const Config& c) { return Value(c.retry_jitter()); }},
    {"session.min-backoff", Kind::kDuration, {0, kMaxDurationMs}, nullptr,
     [](Config& c, const Value& v) { c.min_backoff = v.duration; },
     [](const Config& c) { return Value(c.min_backoff); }},
    {kConfigKeyExecutor, Kind::kChoice, {}, &kExecutors,
     [](Config& c, const Value& v) {
       c.executor = v.choice == 0 ? ExecutorKind::kPool : ExecutorKind::kDirect; },
     nullptr},
    {"callback.threads", Kind::kInteger, {kMinThreads, kMaxThreads}, nullptr,
     [](Config& c, const Value& v) { c.callback_threads = static_cast<int>(v.number); },
     [](const Config& c) { return Value(static_cast<double>(c.callback_threads)); }},
    {"loop.mode", Kind::kChoice, {}, &kLoopModes,
     [](Config& c, const Value& v) {
       c.loop_mode = v.choice == 0 ? LoopMode::kThread : LoopMode::kExternal; },
     nullptr},
    {"client.name", Kind::kText, {0, kMaxClientName}, nullptr,
     [](Config& c, const Value& v) { c.client_name = std::string(v.text); },
     nullptr},
};
// clang-format on

const KeySpec* find_key(std::string_view name) {
  for (const KeySpec& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

// The names of the keys of `kind` (of every key when nullopt), comma-separated.
std::string key_list(std::optional<Kind> kind) {
  std::string out;
  for (const KeySpec& k : kKeys) {
    if (kind && k.kind != *kind) continue;
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

std::string fmt_int(double v) { return std::to_string(static_cast<int64_t>(v)); }

// ---------------------------------------------------------------------------
// Parsing and range checking, one function per kind. Each returns an empty
// string and fills *out, or returns the reason, which starts with the key.

// A duration already parsed (or given by set_duration()) against the key's range.
std::string check_duration(const KeySpec& k, Duration value) {
  const std::string key(k.name);
  const int64_t lo_ms = static_cast<int64_t>(k.range.lo);
  const int64_t hi_ms = static_cast<int64_t>(k.range.hi);
  if (value.count() < 0) {
    return key + ": " + fmt_ms(value) + " is negative (accepted: " + std::to_string(lo_ms) +
           " to " + std::to_string(hi_ms) + " ms)";
  }
  if (value < Duration(lo_ms * kNsPerMs)) {
    return key + ": " + fmt_ms(value) + " is below the minimum of " + std::to_string(lo_ms) + " ms";
  }
  if (value > Duration(hi_ms * kNsPerMs)) {
    return key + ": " + fmt_ms(value) + " is above the maximum of " + std::to_string(hi_ms) + " ms";
  }
  return "";
}

std::string parse_duration_value(const KeySpec& k, std::string_view text, Value* out) {
  std::optional<Duration> d = parse_duration(text);
  if (!d) {
    return std::string(k.name) + ": " + quote(text) +
           " is not a duration (accepted: " + kDurationFormat + ")";
  }
  out->duration = *d;
  return check_duration(k, *d);
}

std::string parse_decimal(const KeySpec& k, std::string_view text, Value* out) {
  const std::string range = "[" + fmt_double(k.range.lo) + ", " + fmt_double(k.range.hi) + ")";
  const std::string head = std::string(k.name) + ": " + quote(text);
  const std::string accepted = " (accepted: a finite decimal in " + range + ")";
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto r = std::from_chars(first, last, v, std::chars_format::general);
  if (text.empty() || r.ec == std::errc::invalid_argument || r.ptr != last) {
    return head + " is not a decimal number" + accepted;
  }
  if (r.ec == std::errc::result_out_of_range) {
    return head + " cannot be represented as a double" + accepted;
  }
  if (r.ec != std::errc() || !std::isfinite(v)) return head + " is not a finite number" + accepted;
  if (!(v >= k.range.lo && v < k.range.hi)) return head + " is out of range " + range;
  out->number = v == 0.0 ? 0.0 : v;  // "-0" reads as 0
  return "";
}

std::string parse_integer(const KeySpec& k, std::string_view text, Value* out) {
  const std::string range = "[" + fmt_int(k.range.lo) + ", " + fmt_int(k.range.hi) + "]";
  bool digits = !text.empty();
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  if (!digits) {
    return std::string(k.name) + ": " + quote(text) +
           " is not an integer (accepted: an integer in " + range + ")";
  }
  // Leading zeros are allowed; more than 9 significant digits is out of range anyway.
  size_t start = text.find_first_not_of('0');
  std::string_view sig = start == std::string_view::npos ? "0" : text.substr(start);
  const double n =
      sig.size() > 9 ? k.range.hi + 1 : static_cast<double>(std::stoi(std::string(sig)));
  if (n < k.range.lo || n > k.range.hi) {
    return std::string(k.name) + ": " + quote(text) + " is out of range " + range;
  }
  out->number = n;
  return "";
}

std::string parse_choice(const KeySpec& k, std::string_view text, Value* out) {
  const Choices& ch = *k.choices;
  std::string accepted;
  for (size_t i = 0; i < ch.texts.size() && !ch.texts[i].empty(); ++i) {
    if (text == ch.texts[i]) {
      out->choice = i;
      return "";
    }
    accepted += (accepted.empty() ? "" : ", ") + quote(ch.texts[i]);
  }
  if (!ch.by_call_only.empty() && text == ch.by_call_only) {
    return std::string(k.name) + ": " + quote(text) + " cannot be set by text; use " +
           std::string(ch.call) + " (accepted: " + accepted + ")";
  }
  return std::string(k.name) + ": " + quote(text) + " is not " + std::string(ch.what) +
         " (accepted: " + accepted + ")";
}

std::string parse_text(const KeySpec& k, std::string_view text, Value* out) {
  const std::string accepted =
      " (accepted: 0 to " + fmt_int(k.range.hi) + " printable ASCII characters)";
  if (static_cast<double>(text.size()) > k.range.hi) {
    return std::string(k.name) + ": " + std::to_string(text.size()) + " characters is too long" +
           accepted;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      return std::string(k.name) + ": " + quote(text) + " has byte " + buf + " at index " +
             std::to_string(i) + accepted;
    }
  }
  out->text = text;
  return "";
}

std::string parse_value(const KeySpec& k, std::string_view text, Value* out) {
  switch (k.kind) {
    case Kind::kDuration:
      return parse_duration_value(k, text, out);
    case Kind::kDecimal:
      return parse_decimal(k, text, out);
    case Kind::kInteger:
      return parse_integer(k, text, out);
    case Kind::kChoice:
      return parse_choice(k, text, out);
    case Kind::kText:
      return parse_text(k, text, out);
  }
  return "unhandled kind of key " + quote(k.name);
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
  const KeySpec* k = find_key(key);
  if (!k || k->kind != Kind::kDuration) {
    return quote(key) + " is not a duration key (duration keys: " + key_list(Kind::kDuration) + ")";
  }
  std::string why = check_duration(*k, value);
  if (why.empty()) k->store(*this, Value(value));
  return why;
}

std::string Config::set(std::string_view key, std::string_view value) {
  const KeySpec* k = find_key(key);
  if (!k) return "unknown key " + quote(key) + " (known keys: " + key_list(std::nullopt) + ")";
  Value v;
  std::string why = parse_value(*k, value, &v);
  if (why.empty()) k->store(*this, v);
  return why;
}

std::optional<Duration> Config::get_duration(std::string_view key) const {
  const KeySpec* k = find_key(key);
  if (!k || k->kind != Kind::kDuration || !k->load) return std::nullopt;
  return k->load(*this).duration;
}

std::optional<double> Config::get_number(std::string_view key) const {
  const KeySpec* k = find_key(key);
  if (!k || (k->kind != Kind::kDecimal && k->kind != Kind::kInteger) || !k->load) {
    return std::nullopt;
  }
  return k->load(*this).number;
}

std::vector<std::string_view> config_key_names() {
  std::vector<std::string_view> out;
  for (const KeySpec& k : kKeys) out.push_back(k.name);
  return out;
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
  if (!(std::isfinite(drift) && drift >= kMinDrift && drift < kMaxDrift)) {
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
  long double scaled =
      static_cast<long double>(lease.count()) * (1.0L - static_cast<long double>(drift));
  int64_t local = static_cast<int64_t>(std::llroundl(scaled));  // 0 < local <= lease
  int64_t lhs = local - margin.count();                         // no overflow: both >= 0
  if (!(lhs > renew.count())) {
    return "rule lease-duration * (1 - drift) - margin > renew-interval failed: "
           "lease-duration " +
           fmt_ms(lease) + " * (1 - " + fmt_double(drift) + ") - margin " + fmt_ms(margin) + " = " +
           fmt_ms(Duration(lhs)) + ", not > renew-interval " + fmt_ms(renew);
  }
  return "";
}

}  // namespace simba
