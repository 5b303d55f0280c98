// The seed's SimbaConfig: defaults, derived values, validation rules, and the
// text form of durations used by simba_config_set and the CLI. The keys, their
// kinds, ranges and setters are one table in config.cpp (kKeys).
#ifndef SIMBA_CORE_CONFIG_H
#define SIMBA_CORE_CONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace simba {

// Largest duration accepted from text or set_duration(): 10^12 ms (about 31.7
// years) is 10^18 ns, well inside int64 nanoseconds.
inline constexpr int64_t kMaxDurationMs = 1'000'000'000'000;

// The key that simba_config_set_executor() also sets (to "host").
inline constexpr std::string_view kConfigKeyExecutor = "callback.executor";

enum class LoopMode { kThread, kExternal };
enum class ExecutorKind { kPool, kDirect, kHost };

struct Config {
  // Session timing. renew_interval and retry_jitter are derived while unset.
  Duration lease_duration = ms(15000);
  std::optional<Duration> renew_interval_set;
  double drift = 0.01;
  Duration margin = ms(50);
  std::optional<Duration> retry_jitter_set;
  Duration min_backoff = ms(100);

  ExecutorKind executor = ExecutorKind::kPool;
  int callback_threads = 2;
  LoopMode loop_mode = LoopMode::kThread;
  std::string client_name;

  // leaseDuration / 3 unless set.
  Duration renew_interval() const;
  // renewInterval / 2 unless set.
  Duration retry_jitter() const;

  // Sets one key from text. Returns an empty string on success, else the reason.
  std::string set(std::string_view key, std::string_view value);
  // Sets a duration key. Returns an empty string on success, else the reason.
  std::string set_duration(std::string_view key, Duration value);
  // Reads a duration key (derived values included); nullopt if not a duration key.
  std::optional<Duration> get_duration(std::string_view key) const;
  // Reads "session.drift" or "callback.threads"; nullopt for any other key.
  std::optional<double> get_number(std::string_view key) const;

  // The seed's two rules, the drift range and positive durations. Returns an
  // empty string when valid, else a message naming the rule that failed.
  std::string validate() const;
};

// Every key Config::set() knows, in the order of the key table of include/simba.h.
std::vector<std::string_view> config_key_names();

// Parses "250ms", "15s", "2m" or a bare number of milliseconds (non-negative,
// integral). Returns nullopt for anything else.
std::optional<Duration> parse_duration(std::string_view text);

}  // namespace simba

#endif
