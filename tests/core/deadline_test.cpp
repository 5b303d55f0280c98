// The local deadline formula (local_deadline in src/core/timing.h, the one
// function that computes it) and the Node's use of it at both places that set
// a session's deadline: the open and each keep-alive.
//
//   deadline = sentAt + remaining × (1 − drift) − margin
//
// Counted from when the call was sent, so a slow reply only shortens it; scaled
// by (1 − drift), so that it passes before a backend whose clock runs up to
// 1 + drift times as fast can expire the session.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>

#include "core/backend_types.h"
#include "core/config.h"
#include "core/node.h"
#include "core/time.h"
#include "core/timing.h"
#include "support/fake_clock.h"
#include "support/recording_effects.h"

namespace simba {
namespace {

using testing::FakeClock;
using testing::Fx;
using testing::FxCall;
using testing::RecordingEffects;

TimePoint at_ns(int64_t n) { return TimePoint(Duration(n)); }

TEST(LocalDeadline, PassesBeforeTheBackendCanExpireTheSession) {
  // The backend handles the call some time after it was sent and expires the
  // session `remaining` later on its own clock, which runs at a rate within
  // 1 ± drift of ours: the local deadline must come first, whatever the delay.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> rem(1'000'000, 3'600'000'000'000);  // 1 ms .. 1 h
  std::uniform_real_distribution<double> drift_of(0.0, 0.4999);
  std::uniform_int_distribution<int64_t> margin_of(1, 1'000'000'000);
  std::uniform_int_distribution<int64_t> delay_of(0, 10'000'000'000);
  std::uniform_real_distribution<long double> unit(0.0L, 1.0L);
  for (int i = 0; i < 20000; ++i) {
    const TimePoint sent = at_ns(1'000'000'000 + delay_of(rng));
    const Duration remaining(rem(rng));
    const double drift = drift_of(rng);
    const Duration margin(margin_of(rng));
    const long double rate = 1.0L - drift + 2.0L * drift * unit(rng);  // backend vs local
    const long double handled = static_cast<long double>(sent.time_since_epoch().count()) +
                                static_cast<long double>(delay_of(rng));
    const long double expires = handled + static_cast<long double>(remaining.count()) / rate;
    const TimePoint deadline = local_deadline(sent, remaining, drift, margin);
    EXPECT_LT(static_cast<long double>(deadline.time_since_epoch().count()), expires)
        << remaining.count() << " ns, drift " << drift << ", margin " << margin.count();
  }
}

TEST(LocalDeadline, ASlowReplyOnlyShortensTheSessionsTimeLeft) {
  const TimePoint sent = at_ns(50'000'000'000);
  const TimePoint deadline = local_deadline(sent, ms(9000), 0.2, ms(7));
  EXPECT_EQ(deadline, sent + ms(7193));  // 9 s × 0.8 − 7 ms
  // Wherever the reply arrives, the deadline is the same: the time left shrinks.
  for (const Duration reply_after : {ms(0), ms(1000), ms(5000)}) {
    EXPECT_EQ(deadline - (sent + reply_after), ms(7193) - reply_after);
  }
}

// A node on a non-default drift and margin: the deadlines it sets from the open
// and from a keep-alive are local_deadline's, from each call's send time.
TEST(NodeDeadline, OpenAndKeepAliveBothSetTheLocalDeadline) {
  Config cfg;
  cfg.lease_duration = ms(10000);
  cfg.drift = 0.2;
  cfg.margin = ms(7);
  ASSERT_EQ(cfg.validate(), "");
  FakeClock clock;
  RecordingEffects fx{&clock};
  Node node(cfg, fx, clock, 1);

  node.start(clock.now());
  const FxCall open = fx.take_last(Fx::kOpen);
  clock.advance(ms(1000));  // a slow reply
  fx.mark_answered(open.call);
  node.on_open(open.call, OpenReply{Outcome::kOk, "s1", ms(9000), ""}, clock.now());
  ASSERT_EQ(node.status(), SessionStatus::kLive);
  EXPECT_EQ(node.view().remaining, local_deadline(open.at, ms(9000), 0.2, ms(7)) - clock.now());
  EXPECT_EQ(node.view().remaining, ms(6193));

  // The first keep-alive goes out a renew interval after the open was sent.
  const std::optional<TimePoint> renew = node.next_wakeup();
  ASSERT_TRUE(renew);
  clock.set(*renew);
  node.on_timer(clock.now());
  const FxCall ka = fx.take_last(Fx::kKeepAlive);
  EXPECT_EQ(ka.at, open.at + cfg.renew_interval());
  clock.advance(ms(500));
  fx.mark_answered(ka.call);
  node.on_keep_alive(ka.call, KeepAliveReply{Outcome::kOk, ms(8000), {}, ""}, clock.now());
  EXPECT_EQ(node.view().remaining, local_deadline(ka.at, ms(8000), 0.2, ms(7)) - clock.now());
  EXPECT_EQ(node.view().remaining, ms(8000 * 8 / 10 - 7 - 500));

  node.close(clock.now());
  const FxCall close = fx.take_last(Fx::kClose);
  fx.mark_answered(close.call);
  node.on_close(close.call, DoneReply{Outcome::kOk, ""}, clock.now());
  EXPECT_TRUE(node.closed());
}

}  // namespace
}  // namespace simba
