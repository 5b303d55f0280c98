// Schedule times (issue 43): 5-field cron expressions in a time zone of the
// system's tz database, and fixed-rate periods aligned to the Unix epoch. Pure
// computation, no clock and no I/O besides the tz database's first load.
//
// A due run is named by its period id: the scheduled instant as UTC epoch
// milliseconds. Every process with the same schedule (and the same tzdata
// release) computes the same ids, so the run record can say "period X ran".
//
// Nothing here throws: errors come back as a message naming the field and the
// text, and instants outside [0, kMaxInstantMs] give std::nullopt.
#ifndef SIMBA_SCHEDULE_CRON_H
#define SIMBA_SCHEDULE_CRON_H

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}

namespace simba::schedule {

// UTC milliseconds since the Unix epoch.
using Millis = std::int64_t;

// Input bounds: a cron line is short; tz database names are under 40 bytes.
inline constexpr std::size_t kMaxExpressionLength = 256;
inline constexpr std::size_t kMaxZoneLength = 128;
// 9999-12-31T23:59:59.999Z: the last instant a schedule answers for.
inline constexpr Millis kMaxInstantMs = 253402300799999;
// A fixed rate's longest period: 100 years.
inline constexpr Millis kMaxPeriodMs = 100LL * 366 * 86400 * 1000;

// The parsed fields of a cron expression (crontab(5)). Bit i set = value i
// matches; day_of_week uses 0 = Sunday (7 is folded into 0).
struct CronFields {
  std::bitset<60> minute;
  std::bitset<24> hour;
  std::bitset<32> day_of_month;  // bits 1-31
  std::bitset<13> month;         // bits 1-12
  std::bitset<7> day_of_week;
  // A field with a '*' item is unrestricted. When both day fields are
  // restricted, a day matches if EITHER does (crontab(5)); otherwise both must.
  bool day_of_month_restricted = false;
  bool day_of_week_restricted = false;
};

struct CronParse {
  CronFields fields;
  std::string error;  // empty when the expression is valid
  bool ok() const { return error.empty(); }
};

// Parses "minute hour day-of-month month day-of-week" or a shorthand (@yearly,
// @annually, @monthly, @weekly, @daily, @midnight, @hourly). Refuses @reboot,
// 6-field lines, and expressions that can never fire (e.g. "0 0 30 2 *").
CronParse parse_cron(std::string_view expr) noexcept;

// A cron expression in a zone, or a fixed rate. Cheap to copy; the zone points
// into the process-wide tz database, which lives until exit.
class Schedule {
 public:
  struct Made;

  // zone: a tz database name ("Europe/London"); empty or "UTC" is UTC.
  static Made cron(std::string_view expr, std::string_view zone) noexcept;
  // Due at offset_ms + k * period_ms for every integer k (offset may be any
  // value; it is taken modulo the period). 1 <= period_ms <= kMaxPeriodMs.
  static Made fixed_rate(Millis period_ms, Millis offset_ms) noexcept;

  // The first due instant strictly after t: the next period id.
  std::optional<Millis> next_after(Millis t) const noexcept;
  // The last due instant at or before t: the id of the period containing t.
  std::optional<Millis> period_containing(Millis t) const noexcept;

  bool is_cron() const { return period_ms_ == 0; }
  const CronFields& fields() const { return fields_; }

 private:
  Schedule() = default;
  std::optional<Millis> cron_next_after(Millis t) const;
  Millis due_instant(std::int64_t local_minute) const;
  std::int64_t local_minute_of(Millis t) const;

  CronFields fields_;
  const date::time_zone* zone_ = nullptr;  // nullptr: UTC
  Millis period_ms_ = 0;                   // 0: cron
  Millis offset_ms_ = 0;
};

struct Schedule::Made {
  std::optional<Schedule> schedule;
  std::string error;  // empty when schedule is set
};

}  // namespace simba::schedule

#endif
