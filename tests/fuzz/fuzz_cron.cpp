// Cron schedules (src/schedule/cron): any text either parses or is refused with
// a printable message naming a field or the expression; a parsed schedule, in
// UTC or a zone with daylight saving, gives next and containing due times that
// agree (p <= t < n, nothing due between them); so does a fixed rate.
//
// Input: a zone byte, an instant (8 bytes), a fixed rate's period and offset
// (8 bytes each), then the expression.
#include <string>

#include "fuzz_common.h"
#include "schedule/cron.h"

namespace {

using simba::schedule::kMaxInstantMs;
using simba::schedule::Millis;
using simba::schedule::Schedule;

constexpr const char* kZones[] = {"",
                                  "UTC",
                                  "America/New_York",
                                  "Europe/London",
                                  "Australia/Lord_Howe",
                                  "Asia/Kolkata",
                                  "Pacific/Apia",
                                  "Nowhere/Land"};

void check_periods(const Schedule& s, Millis t, const std::string& what) {
  const auto p = s.period_containing(t);
  const auto n = s.next_after(t);
  if (p)
    FUZZ_CHECK(*p <= t, "%s: period %lld after t %lld", what.c_str(), (long long)*p, (long long)t);
  if (n) {
    FUZZ_CHECK(*n > t && *n <= kMaxInstantMs, "%s: next %lld, t %lld", what.c_str(), (long long)*n,
               (long long)t);
    FUZZ_CHECK(s.period_containing(*n) == n, "%s: next %lld is not its own period", what.c_str(),
               (long long)*n);
  }
  if (p && *p >= 0) {
    FUZZ_CHECK(s.next_after(*p) == n, "%s: a due time between %lld and t %lld", what.c_str(),
               (long long)*p, (long long)t);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const char* zone = kZones[in.byte() % (sizeof kZones / sizeof kZones[0])];
  // Mostly 1970-2100, where the zones change; sometimes anything.
  const int64_t raw = in.int64();
  const Millis t =
      (raw & 1) != 0 ? raw : static_cast<Millis>(static_cast<uint64_t>(raw) % 4102444800000ULL);
  const int64_t period = in.int64();
  const int64_t offset = in.int64();
  const std::string expr = in.rest();

  const simba::schedule::CronParse parsed = simba::schedule::parse_cron(expr);
  for (unsigned char c : parsed.error)
    FUZZ_CHECK(c >= 0x20 && c < 0x7f, "byte 0x%02x in the message", c);
  const bool names_where = parsed.error.find(" field \"") != std::string::npos ||
                           parsed.error.find("cron expression") != std::string::npos ||
                           parsed.error.find("shorthand") != std::string::npos ||
                           parsed.error.find("@reboot") != std::string::npos;
  FUZZ_CHECK(parsed.ok() || names_where, "message names no field: %s", parsed.error.c_str());
  if (parsed.ok()) {
    const auto& f = parsed.fields;
    FUZZ_CHECK(f.minute.any() && f.hour.any() && f.day_of_month.any() && f.month.any() &&
                   f.day_of_week.any(),
               "an empty field in \"%s\"", expr.c_str());
    FUZZ_CHECK(!f.day_of_month.test(0) && !f.month.test(0), "day or month 0 in \"%s\"",
               expr.c_str());
  }
  const Schedule::Made made = Schedule::cron(expr, zone);
  FUZZ_CHECK(made.schedule.has_value() == made.error.empty(), "schedule and error: %s",
             made.error.c_str());
  if (!parsed.ok())
    FUZZ_CHECK(made.error == parsed.error, "%s vs %s", made.error.c_str(), parsed.error.c_str());
  if (made.schedule) {
    // A parsed expression fires: within 9 years of any instant up to 9990.
    if (t >= 0 && t < kMaxInstantMs - 10LL * 366 * 86400000) {
      FUZZ_CHECK(made.schedule->next_after(t).has_value(),
                 "\"%s\" in \"%s\" never fires after %lld", expr.c_str(), zone, (long long)t);
    }
    check_periods(*made.schedule, t, "cron \"" + expr + "\" in \"" + zone + "\"");
  }

  const Schedule::Made rate = Schedule::fixed_rate(period, offset);
  FUZZ_CHECK(rate.schedule.has_value() == rate.error.empty(), "fixed rate: %s", rate.error.c_str());
  if (rate.schedule) check_periods(*rate.schedule, t, "fixed rate " + std::to_string(period));
  return 0;
}
