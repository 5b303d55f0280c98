// src/schedule/cron: crontab(5) syntax, next and containing due times in tz
// database zones across the 2026 daylight-saving changes, fixed rates, errors.
#include "schedule/cron.h"

#include <date/date.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace simba::schedule {
namespace {

// "2026-03-08T07:00" (UTC) as epoch ms.
Millis utc(const char* text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  EXPECT_EQ(std::sscanf(text, "%d-%d-%dT%d:%d", &y, &mo, &d, &h, &mi), 5) << text;
  const date::sys_days day = date::year{y} / mo / d;
  return (day.time_since_epoch().count() * 1440LL + h * 60 + mi) * 60000;
}

std::string iso(std::optional<Millis> t) {
  if (!t) return "none";
  const auto tp = date::sys_time<std::chrono::milliseconds>{std::chrono::milliseconds{*t}};
  return date::format("%Y-%m-%dT%H:%M", date::floor<std::chrono::minutes>(tp)) +
         (*t % 60000 != 0 ? "+" + std::to_string(*t % 60000) + "ms" : "");
}

Schedule make(const char* expr, const char* zone = "") {
  Schedule::Made made = Schedule::cron(expr, zone);
  EXPECT_TRUE(made.error.empty()) << expr << " in '" << zone << "': " << made.error;
  if (!made.schedule) return Schedule::fixed_rate(1, 0).schedule.value();
  return *made.schedule;
}

// The next `want.size()` due times after `from`, as UTC strings.
std::vector<std::string> sequence(const Schedule& s, const char* from, std::size_t n) {
  std::vector<std::string> out;
  std::optional<Millis> t = utc(from);
  for (std::size_t i = 0; i < n && t; ++i) {
    t = s.next_after(*t);
    out.push_back(iso(t));
  }
  return out;
}

using Seq = std::vector<std::string>;

// --- Syntax: crontab(5)'s examples and rules, in UTC ---------------------------

struct Case {
  const char* expr;
  const char* from;
  Seq want;
};

TEST(CronSyntax, CrontabExamplesAndRules) {
  // 2026-01-01 is a Thursday.
  const std::vector<Case> cases = {
      // crontab(5): "run five minutes after midnight, every day"
      {"5 0 * * *", "2026-01-01T00:00", {"2026-01-01T00:05", "2026-01-02T00:05"}},
      // "run at 2:15pm on the first of every month"
      {"15 14 1 * *", "2026-01-01T15:00", {"2026-02-01T14:15", "2026-03-01T14:15"}},
      // "run at 10 pm on weekdays" (Fri 2 Jan, then Mon 5 Jan)
      {"0 22 * * 1-5", "2026-01-02T21:00", {"2026-01-02T22:00", "2026-01-05T22:00"}},
      // "run 23 minutes after midn, 2am, 4am ..., everyday"
      {"23 0-23/2 * * *", "2026-01-01T01:00", {"2026-01-01T02:23", "2026-01-01T04:23"}},
      // "run at 5 after 4 every sunday"
      {"5 4 * * sun", "2026-01-01T00:00", {"2026-01-04T04:05", "2026-01-11T04:05"}},
      // "30 4 1,15 * 5": 4:30 on the 1st and 15th of each month, plus every Friday
      {"30 4 1,15 * 5",
       "2026-01-01T00:00",
       {"2026-01-01T04:30", "2026-01-02T04:30", "2026-01-09T04:30", "2026-01-15T04:30",
        "2026-01-16T04:30"}},
      // "*/2" in the hours: every other hour
      {"0 */2 * * *", "2026-01-01T00:30", {"2026-01-01T02:00", "2026-01-01T04:00"}},
      // A range with a step: minutes 1, 3, 5, 7, 9
      {"1-10/2 0 * * *",
       "2026-01-01T00:00",
       {"2026-01-01T00:01", "2026-01-01T00:03", "2026-01-01T00:05", "2026-01-01T00:07",
        "2026-01-01T00:09", "2026-01-02T00:01"}},
      // Lists mixing values and ranges
      {"0,30-31 12 * * *",
       "2026-01-01T00:00",
       {"2026-01-01T12:00", "2026-01-01T12:30", "2026-01-01T12:31", "2026-01-02T12:00"}},
      // Names, case-insensitive, in lists and ranges
      {"0 9 * * MON,wed,Fri",
       "2026-01-01T00:00",
       {"2026-01-02T09:00", "2026-01-05T09:00", "2026-01-07T09:00", "2026-01-09T09:00"}},
      {"0 0 1 jan-Mar *",
       "2026-01-01T00:00",
       {"2026-02-01T00:00", "2026-03-01T00:00", "2027-01-01T00:00"}},
      {"0 0 1 */5 *",
       "2026-01-01T00:00",
       {"2026-06-01T00:00", "2026-11-01T00:00", "2027-01-01T00:00"}},
      // 7 is Sunday, like 0; a range may end on 7
      {"0 0 * * 7", "2026-01-01T00:00", {"2026-01-04T00:00", "2026-01-11T00:00"}},
      {"0 0 * * 5-7",
       "2026-01-01T00:00",
       {"2026-01-02T00:00", "2026-01-03T00:00", "2026-01-04T00:00", "2026-01-09T00:00"}},
      // 29 February: the next leap years
      {"0 12 29 2 *", "2026-01-01T00:00", {"2028-02-29T12:00", "2032-02-29T12:00"}},
      // The 31st skips the short months
      {"0 0 31 * *",
       "2026-01-01T00:00",
       {"2026-01-31T00:00", "2026-03-31T00:00", "2026-05-31T00:00", "2026-07-31T00:00",
        "2026-08-31T00:00", "2026-10-31T00:00", "2026-12-31T00:00", "2027-01-31T00:00"}},
      // Both day fields restricted: EITHER matches (the 13th, or a Friday)
      {"0 0 13 * 5",
       "2026-01-01T00:00",
       {"2026-01-02T00:00", "2026-01-09T00:00", "2026-01-13T00:00", "2026-01-16T00:00"}},
      // A day field starting with '*' is unrestricted: BOTH must match (odd
      // days that are Fridays), as in Vixie cron and cronie
      {"0 0 */2 * 5",
       "2026-01-01T00:00",
       {"2026-01-09T00:00", "2026-01-23T00:00", "2026-02-13T00:00", "2026-02-27T00:00"}},
      {"0 0 1 * */7", "2026-01-01T00:00", {"2026-02-01T00:00"}},  // Sunday 1 February
      // February 30 never comes, but with a weekday the OR rule still fires
      {"0 0 30 2 mon", "2026-01-01T00:00", {"2026-02-02T00:00", "2026-02-09T00:00"}},
      // Every minute; strictly after a due instant; whitespace and tabs
      {"* * * * *", "2026-01-01T00:00", {"2026-01-01T00:01", "2026-01-01T00:02"}},
      {" \t0  0\t* *  * ", "2026-01-01T00:00", {"2026-01-02T00:00"}},
      // The last instant of a year
      {"59 23 31 12 *", "2026-06-01T00:00", {"2026-12-31T23:59", "2027-12-31T23:59"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(sequence(make(c.expr), c.from, c.want.size()), c.want) << c.expr;
  }
}

TEST(CronSyntax, FieldsAreTheDocumentedSets) {
  const CronFields f = parse_cron("*/15 0-23/6 1,15 jan,JUL 0,7").fields;
  EXPECT_EQ(f.minute.count(), 4u);
  EXPECT_TRUE(f.minute.test(0) && f.minute.test(15) && f.minute.test(30) && f.minute.test(45));
  EXPECT_EQ(f.hour.count(), 4u);
  EXPECT_TRUE(f.hour.test(0) && f.hour.test(6) && f.hour.test(12) && f.hour.test(18));
  EXPECT_EQ(f.day_of_month.count(), 2u);
  EXPECT_TRUE(f.month.test(1) && f.month.test(7));
  EXPECT_EQ(f.month.count(), 2u);
  EXPECT_EQ(f.day_of_week.count(), 1u);  // 0 and 7 are both Sunday
  EXPECT_TRUE(f.day_of_week.test(0));
  EXPECT_TRUE(f.day_of_month_restricted);
  EXPECT_TRUE(f.day_of_week_restricted);
  const CronFields g = parse_cron("* * * * *").fields;
  EXPECT_EQ(g.minute.count(), 60u);
  EXPECT_EQ(g.day_of_month.count(), 31u);
  EXPECT_FALSE(g.day_of_month.test(0));
  EXPECT_EQ(g.day_of_week.count(), 7u);
  EXPECT_FALSE(g.day_of_month_restricted);
  EXPECT_FALSE(g.day_of_week_restricted);
}

TEST(CronSyntax, ShorthandsAreTheirExpansions) {
  const std::vector<std::pair<const char*, const char*>> table = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"}, {" @HOURLY ", "0 * * * *"},
  };
  for (const auto& [shorthand, expansion] : table) {
    const Schedule a = make(shorthand);
    const Schedule b = make(expansion);
    EXPECT_EQ(sequence(a, "2026-01-01T00:30", 3), sequence(b, "2026-01-01T00:30", 3)) << shorthand;
    EXPECT_EQ(a.fields().minute, b.fields().minute) << shorthand;
    EXPECT_EQ(a.fields().day_of_week, b.fields().day_of_week) << shorthand;
  }
  EXPECT_EQ(sequence(make("@weekly"), "2026-01-01T00:00", 1), Seq{"2026-01-04T00:00"});
  EXPECT_EQ(sequence(make("@yearly"), "2026-01-01T00:00", 1), Seq{"2027-01-01T00:00"});
}

// Every refusal names the field (or the expression) and quotes the bad text.
TEST(CronSyntax, ErrorsNameTheFieldAndText) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"", "cron expression is empty"},
      {" \t ", "cron expression is empty"},
      {"* * * *", "has 4 fields: expected 5 (minute hour day-of-month month day-of-week)"},
      {"0 * * * * *", "has 6 fields: expected 5"},
      {"0 0 * * * /bin/true", "seconds, years and commands are not part of it"},
      {"60 * * * *", "minute field \"60\": 60 is out of range 0-59"},
      {"* 24 * * *", "hour field \"24\": 24 is out of range 0-23"},
      {"* * 0 * *", "day-of-month field \"0\": 0 is out of range 1-31"},
      {"* * 32 * *", "day-of-month field \"32\": 32 is out of range 1-31"},
      {"* * * 0 *", "month field \"0\": 0 is out of range 1-12 or JAN-DEC"},
      {"* * * 13 *", "month field \"13\": 13 is out of range"},
      {"* * * * 8", "day-of-week field \"8\": 8 is out of range 0-7"},
      {"99999999999999999999 * * * *", "minute field \"99999999999999999999\": 9999999999 is out"},
      {"*/0 * * * *", "minute field \"*/0\": step 0 is out of range 1-59"},
      {"*/60 * * * *", "minute field \"*/60\": step 60 is out of range 1-59"},
      {"* */24 * * *", "hour field \"*/24\": step 24 is out of range 1-23"},
      {"*/ * * * *", "minute field \"*/\": step \"\" is not a number"},
      {"*/x * * * *", "minute field \"*/x\": step \"x\" is not a number"},
      {"5-1 * * * *", "minute field \"5-1\": range 5-1 goes backwards"},
      {"* * * dec-jan *", "month field \"dec-jan\": range dec-jan goes backwards"},
      {"1,,2 * * * *", "minute field \"1,,2\": empty list item"},
      {"1, * * * *", "minute field \"1,\": empty list item"},
      {",1 * * * *", "minute field \",1\": empty list item"},
      {"a * * * *", "minute field \"a\": unknown value \"a\" (use 0-59)"},
      {"* * * foo *", "month field \"foo\": unknown name \"foo\" (use 1-12 or JAN-DEC)"},
      {"* * * * monday", "day-of-week field \"monday\": unknown name \"monday\""},
      {"* * * * mon-foo", "day-of-week field \"mon-foo\": unknown name \"foo\""},
      {"* * * jan *x *", "has 6 fields"},
      {"* * * sun *", "month field \"sun\": unknown name \"sun\""},
      {"5/10 * * * *", "minute field \"5/10\": a step needs a range: write 5-59/10 or */step"},
      {"5/x * * * *", "minute field \"5/x\": a step needs a range: write 5-59/step or */step"},
      {"1-2-3 * * * *", "minute field \"1-2-3\": unexpected \"-3\" in \"1-2-3\""},
      {"*x * * * *", "minute field \"*x\": unexpected \"x\" in \"*x\""},
      {"** * * * *", "minute field \"**\": unexpected \"*\""},
      {"- * * * *", "minute field \"-\": expected a number at \"-\""},
      {"1- * * * *", "minute field \"1-\": expected a number at \"\""},
      {"-1 * * * *", "minute field \"-1\": expected a number"},
      {"? * * * *", "minute field \"?\": expected a number at \"?\""},
      {"L * * * *", "minute field \"L\": unknown value \"L\""},
      {std::string("\x01 * * * *"), "minute field \"\\x01\""},
      {std::string("0 0 * * *\n"), "day-of-week field \"*\\x0a\": unexpected \"\\x0a\""},
      {std::string("0 0 \xc3\xa9 * *"), "day-of-month field \"\\xc3\\xa9\""},
      {"0 0 30 2 *",
       "day-of-month field \"30\": no such day in month field \"2\", the expression would never "
       "fire"},
      {"0 0 31 4,6,9,11 *", "no such day in month field \"4,6,9,11\""},
      {"@reboot", "@reboot is not supported: it names no time"},
      {"@REBOOT", "@reboot is not supported"},
      {"@fortnightly", "unknown shorthand \"@fortnightly\" (use @yearly"},
      {"@", "unknown shorthand \"@\""},
      {"@daily 5", "shorthand \"@daily\" stands alone"},
      {"@every 5m", "shorthand \"@every\" stands alone"},
      {std::string(300, '*'), "cron expression is 300 bytes: the limit is 256"},
  };
  for (const auto& [expr, want] : table) {
    const CronParse parsed = parse_cron(expr);
    EXPECT_FALSE(parsed.ok()) << expr;
    EXPECT_NE(parsed.error.find(want), std::string::npos)
        << "expression \"" << expr << "\": got \"" << parsed.error << "\", want \"" << want << "\"";
    for (unsigned char c : parsed.error) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << parsed.error;
    const Schedule::Made made = Schedule::cron(expr, "Europe/London");
    EXPECT_FALSE(made.schedule.has_value()) << expr;
    EXPECT_EQ(made.error, parsed.error);
  }
  // The longest accepted expression.
  std::string longest = "0 0 * * *";
  longest.append(kMaxExpressionLength - longest.size(), ' ');
  EXPECT_TRUE(parse_cron(longest).ok());
  EXPECT_FALSE(parse_cron(longest + " ").ok());
}

TEST(CronZone, UnknownAndMalformedZonesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"Mars/Olympus_Mons",
       "unknown time zone \"Mars/Olympus_Mons\" (not in the system's tz database"},
      {"Europe/Londres", "unknown time zone \"Europe/Londres\""},
      {"../../etc/passwd", "time zone \"../../etc/passwd\" is not a tz database name"},
      {"/etc/localtime", "unknown time zone"},
      {"Europe/London ", "is not a tz database name"},
      {std::string("Europe/\nLondon"),
       "time zone \"Europe/\\x0aLondon\" is not a tz database name"},
      {std::string(200, 'A'), "is not a tz database name"},
  };
  for (const auto& [zone, want] : table) {
    const Schedule::Made made = Schedule::cron("0 0 * * *", zone);
    EXPECT_FALSE(made.schedule.has_value()) << zone;
    EXPECT_NE(made.error.find(want), std::string::npos) << zone << ": " << made.error;
  }
  // UTC needs no tz database file; other names are found in it.
  EXPECT_TRUE(Schedule::cron("0 0 * * *", "UTC").schedule.has_value());
  EXPECT_TRUE(Schedule::cron("0 0 * * *", "Etc/UTC").schedule.has_value());
  EXPECT_TRUE(Schedule::cron("0 0 * * *", "Asia/Kolkata").schedule.has_value());
}

// --- Daylight-saving changes of 2026 ---------------------------------------------

// America/New_York: 8 March 02:00 EST -> 03:00 EDT (07:00Z); 1 November 02:00
// EDT -> 01:00 EST (06:00Z).
TEST(CronZone, NewYorkSpringForwardRunsASkippedTimeOnceAtTheEndOfTheGap) {
  EXPECT_EQ(sequence(make("30 2 * * *", "America/New_York"), "2026-03-06T12:00", 3),
            (Seq{"2026-03-07T07:30", "2026-03-08T07:00", "2026-03-09T06:30"}));
  // 02:00, 02:30 and 03:00 local all fall on 07:00Z: one run, one period id.
  EXPECT_EQ(sequence(make("*/30 * * * *", "America/New_York"), "2026-03-08T06:00", 4),
            (Seq{"2026-03-08T06:30", "2026-03-08T07:00", "2026-03-08T07:30", "2026-03-08T08:00"}));
  EXPECT_EQ(sequence(make("0 * * * *", "America/New_York"), "2026-03-08T05:30", 3),
            (Seq{"2026-03-08T06:00", "2026-03-08T07:00", "2026-03-08T08:00"}));
  // Times after the gap keep their local time.
  EXPECT_EQ(sequence(make("0 9 * * *", "America/New_York"), "2026-03-07T00:00", 3),
            (Seq{"2026-03-07T14:00", "2026-03-08T13:00", "2026-03-09T13:00"}));
}

TEST(CronZone, NewYorkFallBackRunsARepeatedTimeOnceAtItsFirstOccurrence) {
  EXPECT_EQ(sequence(make("30 1 * * *", "America/New_York"), "2026-10-30T12:00", 3),
            (Seq{"2026-10-31T05:30", "2026-11-01T05:30", "2026-11-02T06:30"}));
  // 01:00 and 01:30 EST (06:00Z, 06:30Z) repeat 01:00 and 01:30 EDT: skipped.
  EXPECT_EQ(sequence(make("*/30 * * * *", "America/New_York"), "2026-11-01T04:00", 5),
            (Seq{"2026-11-01T04:30", "2026-11-01T05:00", "2026-11-01T05:30", "2026-11-01T07:00",
                 "2026-11-01T07:30"}));
  const Schedule s = make("*/30 * * * *", "America/New_York");
  // From inside the repeated hour's second pass.
  EXPECT_EQ(iso(s.next_after(utc("2026-11-01T06:15"))), "2026-11-01T07:00");
  EXPECT_EQ(iso(s.period_containing(utc("2026-11-01T06:45"))), "2026-11-01T05:30");
  EXPECT_EQ(iso(s.period_containing(utc("2026-11-01T07:00"))), "2026-11-01T07:00");
}

// Europe/London: 29 March 01:00 GMT -> 02:00 BST (01:00Z); 25 October 02:00 BST
// -> 01:00 GMT (01:00Z).
TEST(CronZone, London) {
  EXPECT_EQ(sequence(make("30 1 * * *", "Europe/London"), "2026-03-27T12:00", 3),
            (Seq{"2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"}));
  EXPECT_EQ(sequence(make("30 1 * * *", "Europe/London"), "2026-10-23T12:00", 3),
            (Seq{"2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"}));
  EXPECT_EQ(sequence(make("15 * * * *", "Europe/London"), "2026-10-24T23:00", 3),
            (Seq{"2026-10-24T23:15", "2026-10-25T00:15", "2026-10-25T02:15"}));
  EXPECT_EQ(sequence(make("15 * * * *", "Europe/London"), "2026-03-29T00:00", 3),
            (Seq{"2026-03-29T00:15", "2026-03-29T01:00", "2026-03-29T01:15"}));
}

// Australia/Lord_Howe, a 30-minute change: 5 April 02:00 (+11) -> 01:30
// (+10:30) at 15:00Z on the 4th; 4 October 02:00 (+10:30) -> 02:30 (+11) at
// 15:30Z on the 3rd.
TEST(CronZone, LordHoweHalfHourChanges) {
  EXPECT_EQ(sequence(make("*/15 * * * *", "Australia/Lord_Howe"), "2026-04-04T14:00", 5),
            (Seq{"2026-04-04T14:15", "2026-04-04T14:30", "2026-04-04T14:45", "2026-04-04T15:30",
                 "2026-04-04T15:45"}));
  EXPECT_EQ(sequence(make("*/15 * * * *", "Australia/Lord_Howe"), "2026-10-03T15:00", 3),
            (Seq{"2026-10-03T15:15", "2026-10-03T15:30", "2026-10-03T15:45"}));
  EXPECT_EQ(sequence(make("15 2 * * *", "Australia/Lord_Howe"), "2026-10-02T00:00", 3),
            (Seq{"2026-10-02T15:45", "2026-10-03T15:30", "2026-10-04T15:15"}));
  EXPECT_EQ(sequence(make("45 1 * * *", "Australia/Lord_Howe"), "2026-04-03T00:00", 3),
            (Seq{"2026-04-03T14:45", "2026-04-04T14:45", "2026-04-05T15:15"}));
}

// --- period_containing and next_after agree, minute by minute -------------------

TEST(CronPeriods, ContainingAndNextAgreeAroundEveryChange) {
  const std::vector<std::pair<const char*, const char*>> zones_and_days = {
      {"America/New_York", "2026-03-08T00:00"},
      {"America/New_York", "2026-11-01T00:00"},
      {"Europe/London", "2026-03-29T00:00"},
      {"Europe/London", "2026-10-25T00:00"},
      {"Australia/Lord_Howe", "2026-04-04T00:00"},
      {"Australia/Lord_Howe", "2026-10-03T00:00"},
      {"UTC", "2028-02-28T00:00"},
  };
  const char* exprs[] = {"*/15 * * * *", "30 1,2 * * *", "0 * * * *", "* * * * *", "0 0 29 2 *"};
  for (const auto& [zone, day] : zones_and_days) {
    for (const char* expr : exprs) {
      const Schedule s = make(expr, zone);
      const Millis start = utc(day);
      // Every 7 minutes and a few seconds over two days, to land between minutes.
      for (Millis t = start; t < start + 2 * 86400000LL; t += 7 * 60000 + 1234) {
        const auto p = s.period_containing(t);
        const auto n = s.next_after(t);
        ASSERT_TRUE(p && n) << expr << " " << zone << " " << iso(t);
        EXPECT_LE(*p, t);
        EXPECT_GT(*n, t);
        EXPECT_EQ(s.next_after(*p), n) << expr << " " << zone << " at " << iso(t);
        EXPECT_EQ(s.period_containing(*n), n);
        EXPECT_EQ(*p % 60000, 0);
      }
    }
  }
}

TEST(CronPeriods, ContainingFindsDistantPeriods) {
  EXPECT_EQ(iso(make("0 0 29 2 *").period_containing(utc("2027-06-01T00:00"))), "2024-02-29T00:00");
  EXPECT_EQ(iso(make("0 0 31 * *").period_containing(utc("2026-05-15T12:00"))), "2026-03-31T00:00");
  EXPECT_EQ(iso(make("0 * * * *").period_containing(utc("2026-05-15T10:30") + 999)),
            "2026-05-15T10:00");
  EXPECT_EQ(iso(make("0 * * * *").period_containing(utc("2026-05-15T10:00"))), "2026-05-15T10:00");
  EXPECT_EQ(iso(make("0 * * * *").next_after(utc("2026-05-15T10:00") - 1)), "2026-05-15T10:00");
  // The same schedule built twice names the same periods.
  EXPECT_EQ(make("0 9 * * 1-5", "Europe/London").next_after(utc("2026-07-01T00:00")),
            make("0 9 * * mon-fri", "Europe/London").next_after(utc("2026-07-01T00:00")));
}

TEST(CronPeriods, InstantsOutsideTheRangeHaveNone) {
  const Schedule s = make("* * * * *");
  EXPECT_FALSE(s.next_after(-1));
  EXPECT_FALSE(s.next_after(kMaxInstantMs + 1));
  EXPECT_FALSE(s.period_containing(-1));
  EXPECT_FALSE(s.next_after(kMaxInstantMs));  // year 10000
  EXPECT_EQ(iso(s.next_after(0)), "1970-01-01T00:01");
  EXPECT_EQ(iso(s.period_containing(kMaxInstantMs)), "9999-12-31T23:59");
  EXPECT_EQ(iso(make("0 0 * * *").period_containing(0)), "1970-01-01T00:00");
  // A period may have begun before 1970.
  EXPECT_EQ(iso(make("0 12 * * *").period_containing(1000)), "1969-12-31T12:00");
}

// The run record will ask from several task threads: a zone's first use loads
// its file once (date's call_once) and answers agree with a lone thread's.
TEST(CronPeriods, ThreadsLoadingZonesTogetherAgree) {
  const char* zones[] = {"America/Chicago", "Europe/Paris", "Asia/Tokyo", "Pacific/Chatham"};
  const Millis start = utc("2026-03-01T00:00");
  std::vector<std::vector<Millis>> got(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      const Schedule s = Schedule::cron("*/20 * * * *", zones[i % 4]).schedule.value();
      for (Millis t = start; t < start + 40 * 86400000LL; t += 3600000) {
        got[i].push_back(s.next_after(t).value_or(-1));
        got[i].push_back(s.period_containing(t).value_or(-1));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], got[i % 4]) << zones[i % 4];
    EXPECT_EQ(std::count(got[i].begin(), got[i].end(), -1), 0);
  }
}

// --- Fixed rate ------------------------------------------------------------------

TEST(FixedRate, AlignedToTheEpochPlusTheOffset) {
  const Schedule minute = Schedule::fixed_rate(60000, 0).schedule.value();
  EXPECT_FALSE(minute.is_cron());
  EXPECT_EQ(minute.next_after(0), 60000);
  EXPECT_EQ(minute.next_after(59999), 60000);
  EXPECT_EQ(minute.period_containing(59999), 0);
  EXPECT_EQ(minute.period_containing(60000), 60000);
  const Schedule offset = Schedule::fixed_rate(60000, 15000).schedule.value();
  EXPECT_EQ(offset.next_after(0), 15000);
  EXPECT_EQ(offset.period_containing(14999), -45000);
  EXPECT_EQ(offset.period_containing(15000), 15000);
  // Offsets are taken modulo the period, negative ones too.
  EXPECT_EQ(Schedule::fixed_rate(60000, -1).schedule->next_after(0), 59999);
  EXPECT_EQ(Schedule::fixed_rate(60000, 60000 * 7 + 5).schedule->next_after(0), 5);
  const Schedule hour = Schedule::fixed_rate(3600000, 0).schedule.value();
  EXPECT_EQ(iso(hour.next_after(utc("2026-11-01T05:59"))), "2026-11-01T06:00");
  // Periods of a millisecond and of the longest allowed.
  EXPECT_EQ(Schedule::fixed_rate(1, 0).schedule->next_after(41), 42);
  EXPECT_FALSE(Schedule::fixed_rate(kMaxPeriodMs, 0).schedule->next_after(kMaxInstantMs));
  EXPECT_FALSE(hour.next_after(-1));
  EXPECT_FALSE(hour.period_containing(kMaxInstantMs + 1));
}

TEST(FixedRate, RefusesPeriodsOutOfRange) {
  for (Millis p : {Millis{0}, Millis{-1}, kMaxPeriodMs + 1, INT64_MIN, INT64_MAX}) {
    const Schedule::Made made = Schedule::fixed_rate(p, 0);
    EXPECT_FALSE(made.schedule.has_value()) << p;
    EXPECT_NE(made.error.find("period " + std::to_string(p) + " ms is out of range 1-"),
              std::string::npos)
        << made.error;
  }
  EXPECT_TRUE(Schedule::fixed_rate(1, INT64_MIN).schedule.has_value());
}

}  // namespace
}  // namespace simba::schedule
