#include "schedule/cron.h"

#include <date/date.h>
#include <date/tz.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <vector>

namespace simba::schedule {

namespace {

constexpr std::int64_t kMinutesPerDay = 1440;
constexpr Millis kMsPerMinute = 60000;
// A cron expression that can fire does so within 8 years (29 February skips
// at most one leap year, as 2100 does): give up past 9.
constexpr std::int64_t kSearchDays = 9 * 366;

struct FieldSpec {
  const char* name;
  int low;
  int high;
  const char* const* names;  // three-letter names for low..; nullptr if none
  int first_named;           // the value of names[0]
  const char* hint;          // what the field accepts, for messages
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",  "JUL",
                                       "AUG", "SEP", "OCT", "NOV", "DEC", nullptr};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", nullptr};

constexpr std::array<FieldSpec, 5> kFields{{
    {"minute", 0, 59, nullptr, 0, "0-59"},
    {"hour", 0, 23, nullptr, 0, "0-23"},
    {"day-of-month", 1, 31, nullptr, 0, "1-31"},
    {"month", 1, 12, kMonthNames, 1, "1-12 or JAN-DEC"},
    {"day-of-week", 0, 7, kDayNames, 0, "0-7 (0 and 7 are Sunday) or SUN-SAT"},
}};

// Quotes text for a message: printable ASCII as is, other bytes as \xNN.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + "\"";
}

char upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Parses one field's items into a list of values; returns "" or the reason.
class FieldParser {
 public:
  FieldParser(const FieldSpec& spec, std::string_view text) : spec_(spec), text_(text) {}

  std::string parse(std::vector<bool>& bits, bool& has_star) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = text_.find(',', start);
      const std::string_view item = text_.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      std::string why = parse_item(item, bits, has_star);
      if (!why.empty()) return fail(why);
      if (comma == std::string_view::npos) return "";
      start = comma + 1;
    }
  }

 private:
  std::string fail(const std::string& why) const {
    return std::string(spec_.name) + " field " + quoted(text_) + ": " + why;
  }

  std::string parse_item(std::string_view item, std::vector<bool>& bits, bool& has_star) {
    if (item.empty()) return "empty list item";
    std::size_t i = 0;
    int a = spec_.low;
    int b = spec_.high;
    if (item[0] == '*') {
      has_star = true;
      i = 1;
    } else {
      std::string why = value(item, i, a);
      if (!why.empty()) return why;
      b = a;
      if (i < item.size() && item[i] == '-') {
        ++i;
        why = value(item, i, b);
        if (!why.empty()) return why;
        if (b < a) {
          return "range " + std::string(item.substr(0, i)) + " goes backwards (write it as a list)";
        }
      } else if (i < item.size() && item[i] == '/') {
        // Echo "/N" only when that is what follows: the message stays printable.
        const std::string_view rest = item.substr(i);
        const bool digits = rest.size() >= 2 && rest.size() <= 11 &&
                            rest.find_first_not_of("0123456789", 1) == std::string_view::npos;
        const std::string step = digits ? std::string(rest) : std::string("/step");
        return "a step needs a range: write " + std::to_string(a) + "-" +
               std::to_string(spec_.high) + step + " or */step";
      }
    }
    int step = 1;
    if (i < item.size() && item[i] == '/') {
      ++i;
      const std::size_t begin = i;
      std::int64_t s = 0;
      while (i < item.size() && is_digit(item[i]) && i - begin < 10) s = s * 10 + (item[i++] - '0');
      if (i == begin) return "step " + quoted(item.substr(begin)) + " is not a number";
      if (s < 1 || s > spec_.high) {
        return "step " + std::to_string(s) + " is out of range 1-" + std::to_string(spec_.high);
      }
      step = static_cast<int>(s);
    }
    if (i != item.size()) return "unexpected " + quoted(item.substr(i)) + " in " + quoted(item);
    for (int v = a; v <= b; v += step) bits[static_cast<std::size_t>(v)] = true;
    return "";
  }

  // A number or a three-letter name at item[i], advancing i.
  std::string value(std::string_view item, std::size_t& i, int& out) const {
    const std::size_t begin = i;
    if (i < item.size() && is_digit(item[i])) {
      std::int64_t v = 0;
      while (i < item.size() && is_digit(item[i]) && i - begin < 10) v = v * 10 + (item[i++] - '0');
      if (v < spec_.low || v > spec_.high) {
        return std::to_string(v) + " is out of range " + spec_.hint;
      }
      out = static_cast<int>(v);
      return "";
    }
    while (i < item.size() && is_alpha(item[i])) ++i;
    const std::string_view word = item.substr(begin, i - begin);
    if (word.empty()) {
      return "expected a number" + std::string(spec_.names ? " or a name" : "") + " at " +
             quoted(item.substr(begin));
    }
    if (spec_.names != nullptr && word.size() == 3) {
      for (int k = 0; spec_.names[k] != nullptr; ++k) {
        const char* n = spec_.names[k];
        if (upper(word[0]) == n[0] && upper(word[1]) == n[1] && upper(word[2]) == n[2]) {
          out = spec_.first_named + k;
          return "";
        }
      }
    }
    return "unknown " + std::string(spec_.names ? "name " : "value ") + quoted(word) + " (use " +
           spec_.hint + ")";
  }

  const FieldSpec& spec_;
  std::string_view text_;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (upper(a[i]) != upper(b[i])) return false;
  }
  return true;
}

// The crontab(5) shorthands; @reboot is refused by the caller.
const char* shorthand(std::string_view word) {
  static constexpr std::array<std::pair<const char*, const char*>, 7> kTable{{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  }};
  for (const auto& [name, expansion] : kTable) {
    if (equals_ignoring_case(word, name)) return expansion;
  }
  return nullptr;
}

int days_in_month(int month) {  // the most a month can have (29 for February)
  static constexpr int kDays[] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return kDays[month];
}

CronParse parse_fields(std::string_view expr) {
  CronParse out;
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < expr.size()) {
    while (i < expr.size() && is_space(expr[i])) ++i;
    const std::size_t begin = i;
    while (i < expr.size() && !is_space(expr[i])) ++i;
    if (i > begin) parts.push_back(expr.substr(begin, i - begin));
  }
  if (parts.empty()) {
    out.error = "cron expression is empty";
    return out;
  }
  if (parts[0][0] == '@') {
    if (equals_ignoring_case(parts[0], "@reboot")) {
      out.error =
          "@reboot is not supported: it names no time (start the job with the process instead)";
      return out;
    }
    if (parts.size() > 1) {
      out.error = "shorthand " + quoted(parts[0]) + " stands alone, but " + quoted(expr) +
                  " has more fields";
      return out;
    }
    if (const char* expansion = shorthand(parts[0])) return parse_fields(expansion);
    out.error = "unknown shorthand " + quoted(parts[0]) +
                " (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)";
    return out;
  }
  if (parts.size() != kFields.size()) {
    out.error = "cron expression " + quoted(expr) + " has " + std::to_string(parts.size()) +
                " fields: expected 5 (minute hour day-of-month month day-of-week)";
    if (parts.size() == 6) out.error += "; seconds, years and commands are not part of it";
    return out;
  }
  CronFields& f = out.fields;
  for (std::size_t k = 0; k < kFields.size(); ++k) {
    std::vector<bool> bits(static_cast<std::size_t>(kFields[k].high) + 1, false);
    bool has_star = false;
    out.error = FieldParser(kFields[k], parts[k]).parse(bits, has_star);
    if (!out.error.empty()) return out;
    for (std::size_t v = 0; v < bits.size(); ++v) {
      if (!bits[v]) continue;
      switch (k) {
        case 0:
          f.minute.set(v);
          break;
        case 1:
          f.hour.set(v);
          break;
        case 2:
          f.day_of_month.set(v);
          break;
        case 3:
          f.month.set(v);
          break;
        default:
          f.day_of_week.set(v % 7);
          break;  // 7 is Sunday
      }
    }
    if (k == 2) f.day_of_month_restricted = !has_star;
    if (k == 4) f.day_of_week_restricted = !has_star;
  }
  // With the days chosen by day-of-month alone, some chosen month must have one.
  if (!f.day_of_week_restricted || !f.day_of_month_restricted) {
    bool fires = false;
    for (int m = 1; m <= 12 && !fires; ++m) {
      for (int d = 1; d <= days_in_month(m) && f.month.test(static_cast<std::size_t>(m)); ++d) {
        if (f.day_of_month.test(static_cast<std::size_t>(d))) {
          fires = true;
          break;
        }
      }
    }
    if (!fires) {
      out.error = "day-of-month field " + quoted(parts[2]) + ": no such day in month field " +
                  quoted(parts[3]) + ", the expression would never fire";
    }
  }
  return out;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

bool day_matches(const CronFields& f, std::int64_t day) {
  const date::sys_days sd{date::days{day}};
  const date::year_month_day ymd{sd};
  if (!f.month.test(static_cast<unsigned>(ymd.month()))) return false;
  const bool dom = f.day_of_month.test(static_cast<unsigned>(ymd.day()));
  const bool dow = f.day_of_week.test(date::weekday{sd}.c_encoding());
  if (f.day_of_month_restricted && f.day_of_week_restricted) return dom || dow;
  return dom && dow;
}

// The first set bit at or after from, or -1.
template <std::size_t N>
int next_set(const std::bitset<N>& bits, int from) {
  for (int v = from; v < static_cast<int>(N); ++v) {
    if (bits.test(static_cast<std::size_t>(v))) return v;
  }
  return -1;
}

}  // namespace

CronParse parse_cron(std::string_view expr) noexcept {
  try {
    if (expr.size() > kMaxExpressionLength) {
      CronParse out;
      out.error = "cron expression is " + std::to_string(expr.size()) + " bytes: the limit is " +
                  std::to_string(kMaxExpressionLength);
      return out;
    }
    return parse_fields(expr);
  } catch (...) {  // std::bad_alloc: nothing may cross the C ABI
    CronParse out;
    out.error = "out of memory";
    return out;
  }
}

Schedule::Made Schedule::cron(std::string_view expr, std::string_view zone) noexcept {
  Made made;
  try {
    CronParse parsed = parse_cron(expr);
    if (!parsed.ok()) {
      made.error = std::move(parsed.error);
      return made;
    }
    Schedule s;
    s.fields_ = parsed.fields;
    if (!zone.empty() && zone != "UTC") {
      bool plausible = zone.size() <= kMaxZoneLength;
      for (char c : zone) {
        plausible = plausible && (is_alpha(c) || is_digit(c) || c == '/' || c == '_' || c == '-' ||
                                  c == '+' || c == '.');
      }
      if (!plausible || zone.find("..") != std::string_view::npos) {
        made.error = "time zone " + quoted(zone.substr(0, kMaxZoneLength)) +
                     " is not a tz database name (like Europe/London)";
        return made;
      }
      try {
        s.zone_ = date::locate_zone(zone);
      } catch (const std::exception& e) {
        made.error = "unknown time zone " + quoted(zone) +
                     " (not in the system's tz database: " + e.what() + ")";
        return made;
      }
    }
    made.schedule = s;
  } catch (...) {
    made.schedule.reset();
    made.error = "out of memory";
  }
  return made;
}

Schedule::Made Schedule::fixed_rate(Millis period_ms, Millis offset_ms) noexcept {
  Made made;
  if (period_ms < 1 || period_ms > kMaxPeriodMs) {
    made.error = "period " + std::to_string(period_ms) + " ms is out of range 1-" +
                 std::to_string(kMaxPeriodMs) + " ms";
    return made;
  }
  Schedule s;
  s.period_ms_ = period_ms;
  s.offset_ms_ = offset_ms % period_ms;
  if (s.offset_ms_ < 0) s.offset_ms_ += period_ms;
  made.schedule = s;
  return made;
}

// The local wall-clock minute (minutes since 1970-01-01T00:00 local) at t.
std::int64_t Schedule::local_minute_of(Millis t) const {
  Millis local = t;
  if (zone_ != nullptr) {
    const auto info = zone_->get_info(date::sys_seconds{std::chrono::seconds{floor_div(t, 1000)}});
    local += std::chrono::duration_cast<std::chrono::milliseconds>(info.offset).count();
  }
  return floor_div(local, kMsPerMinute);
}

// When the local minute runs: a repeated minute at its first occurrence, a
// skipped one at the end of the gap (the first valid instant after it).
Millis Schedule::due_instant(std::int64_t local_minute) const {
  if (zone_ == nullptr) return local_minute * kMsPerMinute;
  const date::local_seconds ls{std::chrono::seconds{local_minute * 60}};
  const date::local_info li = zone_->get_info(ls);
  date::sys_seconds at;
  if (li.result == date::local_info::nonexistent) {
    at = li.first.end;
  } else {  // unique, or ambiguous: first is the earlier occurrence
    at = date::sys_seconds{ls.time_since_epoch() - li.first.offset};
  }
  return at.time_since_epoch().count() * 1000;
}

// Walks the matching local minutes from t's own; due_instant is monotonic in
// the local minute, so the first one due after t is the answer.
std::optional<Millis> Schedule::cron_next_after(Millis t) const {
  std::int64_t lm = local_minute_of(t);
  const std::int64_t last_day = floor_div(lm, kMinutesPerDay) + kSearchDays;
  while (true) {
    const std::int64_t day = floor_div(lm, kMinutesPerDay);
    if (day > last_day) return std::nullopt;
    if (!day_matches(fields_, day)) {
      lm = (day + 1) * kMinutesPerDay;
      continue;
    }
    const int in_day = static_cast<int>(lm - day * kMinutesPerDay);
    const int hour = next_set(fields_.hour, in_day / 60);
    if (hour < 0) {
      lm = (day + 1) * kMinutesPerDay;
      continue;
    }
    const int minute = next_set(fields_.minute, hour == in_day / 60 ? in_day % 60 : 0);
    if (minute < 0) {
      lm = day * kMinutesPerDay + (hour + 1) * 60;
      continue;
    }
    lm = day * kMinutesPerDay + hour * 60 + minute;
    const Millis due = due_instant(lm);
    if (due > t) return due;
    ++lm;
  }
}

std::optional<Millis> Schedule::next_after(Millis t) const noexcept {
  if (t < 0 || t > kMaxInstantMs) return std::nullopt;
  std::optional<Millis> next;
  if (is_cron()) {
    try {
      next = cron_next_after(t);
    } catch (...) {  // the tz database failed to load a zone's file
      return std::nullopt;
    }
  } else {
    next = offset_ms_ + (floor_div(t - offset_ms_, period_ms_) + 1) * period_ms_;
  }
  if (next && *next > kMaxInstantMs) return std::nullopt;
  return next;
}

std::optional<Millis> Schedule::period_containing(Millis t) const noexcept {
  if (t < 0 || t > kMaxInstantMs) return std::nullopt;
  if (!is_cron()) return offset_ms_ + floor_div(t - offset_ms_, period_ms_) * period_ms_;
  try {
    // Widen a window (t - w, t] until it holds a due instant, then walk to the
    // last one in it: the runs in it lie in its older half, so the walk is short.
    for (Millis w = kMsPerMinute; w <= 2 * kSearchDays * kMinutesPerDay * kMsPerMinute; w *= 2) {
      std::optional<Millis> due = cron_next_after(t - w);
      if (!due || *due > t) continue;
      while (true) {
        const std::optional<Millis> later = cron_next_after(*due);
        if (!later || *later > t) return due;
        due = later;
      }
    }
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace simba::schedule
