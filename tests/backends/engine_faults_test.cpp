// The engine under backend faults, on memory:// only: the client's fault
// switches (MemoryFaults: reply_delay_ns, drop_replies, hang, unreachable) and
// the store's test hooks (expire_session, hand_over, lease, live_sessions).
// Everything else goes through the public C API, as a user would see it.
//
// Each test checks one row of the seed's Failure Modes, or one rule of The Local
// Deadline, against the monotonic clock: bounds carry slack, never fixed sleeps.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/memory/memory_backend.h"
#include "backend/memory/memory_store.h"
#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "simba.h"

namespace {

using namespace simba_testing;

class EngineFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    id_ = unique_id();
    store_name_ = "faults-" + id_;
    store_ = simba::MemoryStore::named(store_name_);
  }

  std::string url() const { return "memory://" + store_name_; }
  std::string lease(const std::string& suffix) const { return "faults." + id_ + "." + suffix; }
  simba::MemoryStore& store() { return *store_; }
  static simba::MemoryFaults& faults(simba_client_t* c) { return *c->impl->memory_faults(); }

  // Opens `c` with `t`, installs `log` (if any) and waits until LIVE.
  void OpenLive(Client& c, const Timing& t, EventLog* log = nullptr) {
    ASSERT_EQ(c.open(url(), t), SIMBA_OK) << simba_last_error();
    if (log) {
      ASSERT_EQ(log->attach(c), SIMBA_OK);
    }
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  }

  // Waits until one more keep-alive than now has been sent and answered.
  void WaitOneKeepAlive(simba_client_t* c) {
    const int64_t k = counter(c, "keep_alives");
    ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") >= k + 2; }, 5000 * slow_factor()));
  }

  // Polls `term` until it reads invalid. Fails if it reads valid at an instant
  // after `upper_ns` (the latest the local deadline can be). Returns the first
  // instant (after the read) at which it was seen invalid.
  static int64_t WatchUntilInvalid(simba_term_t* term, int64_t upper_ns, simba_client_t* c,
                                   bool* saw_suspended) {
    for (;;) {
      const int64_t before = mono_ns();
      if (c && saw_suspended && simba_client_status(c) == SIMBA_SESSION_SUSPENDED) {
        *saw_suspended = true;
      }
      const int valid = simba_term_is_valid(term);
      const int64_t after = mono_ns();
      if (!valid) return after;
      // The read happened at or after `before`: the term was valid then.
      EXPECT_LE(before, upper_ns + kMsNs)
          << "the term still read valid " << (before - upper_ns) / 1000
          << " us after the latest possible local deadline";
      if (before > upper_ns + kMsNs) return 0;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // Local validity of a full grant, exactly as the engine computes it.
  static int64_t Validity(const Timing& t) {
    const double drift = t.drift < 0 ? 0.01 : t.drift;
    const int64_t margin = t.margin_ms < 0 ? 50 : t.margin_ms;
    return std::llround(static_cast<long double>(t.lease_ms) * kMsNs * (1.0L - drift)) -
           margin * kMsNs;
  }

  // EXTERNAL mode: waits for the fd (at most 5 ms), then processes once.
  static int ProcessOnce(simba_client_t* c) {
    int64_t wait = simba_client_timeout_ms(c);
    if (wait < 0 || wait > 5) wait = 5;
    struct pollfd p = {simba_client_fd(c), POLLIN, 0};
    poll(&p, 1, static_cast<int>(wait));
    return simba_client_process(c);
  }

  void BackendUnreachable(bool hang);
  void Stress(bool pauses);

  std::string id_;
  std::string store_name_;
  std::shared_ptr<simba::MemoryStore> store_;
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------
// Backend unreachable: SUSPENDED, keep-alives retried; at the local deadline the
// term ends (DEADLINE_PASSED), never later; once the backend answers, a new
// session and a new term with a larger token.

void EngineFaults::BackendUnreachable(bool hang) {
  const Timing t{1000, 200};
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  const std::string name = lease("unreachable");
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;
  const uint64_t tok1 = simba_term_token(term);
  const std::string sid1 = session_id(c);
  ASSERT_FALSE(sid1.empty());
  WaitOneKeepAlive(c);

  // The deadline is at least now + remaining (remaining_ms rounds down) ...
  const int64_t ta = mono_ns();
  const int64_t r0 = simba_term_remaining_ms(term);
  ASSERT_GT(r0, 0);
  const int64_t lower = ta + r0 * kMsNs;
  // ... and at most one validity after the fault: no keep-alive sent after it
  // reaches the backend, and a deadline counts from the keep-alive's sending.
  std::atomic<bool>& fault = hang ? faults(c).hang : faults(c).unreachable;
  fault = true;
  const int64_t t1 = mono_ns();
  const int64_t upper = t1 + Validity(t);

  bool saw_suspended = false;
  const int64_t invalid_at = WatchUntilInvalid(term, upper, c, &saw_suspended);
  ASSERT_NE(invalid_at, 0);
  EXPECT_GE(invalid_at, lower) << "the term ended " << (lower - invalid_at) / 1000
                               << " us before its local deadline";
  EXPECT_TRUE(saw_suspended) << "the session never read SUSPENDED before the deadline";
  EXPECT_EQ(simba_term_remaining_ms(term), 0);
  EXPECT_EQ(simba_term_ensure_valid(term, 0), SIMBA_EEXPIRED);

  // The engine revokes it at once: DEADLINE_PASSED.
  ASSERT_TRUE(e.wait_revoked(1, 2000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_EQ(simba_term_revoke_reason(term), SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_LT((e.last_revoked().at_ns - invalid_at) / kMsNs, 500 * slow_factor());

  // Events: SUSPENDED, then the session ended with DEADLINE_PASSED.
  ASSERT_TRUE(log.wait(SIMBA_EVENT_SESSION_EXPIRED, 1, 2000 * slow_factor()));
  const int suspended = log.index_of(SIMBA_EVENT_SESSION_SUSPENDED);
  const int expired = log.index_of(SIMBA_EVENT_SESSION_EXPIRED);
  ASSERT_GE(suspended, 0);
  EXPECT_LT(suspended, expired);
  EXPECT_TRUE(contains(log.events()[expired].detail, "DEADLINE_PASSED"))
      << log.events()[expired].detail;
  EXPECT_TRUE(contains(log.events()[expired].detail, sid1)) << log.events()[expired].detail;

  // Nothing runs as leader while the backend stays unreachable.
  sleep_ms(300);  // a window in which nothing may happen (not a timing assertion)
  EXPECT_EQ(e.elected_count(), 1);
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_FALSE(simba_term_is_valid(term));

  // The backend answers again: a new session, and the election wins again.
  fault = false;
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  const simba_term_t* term2 = e.last_elected().term;
  EXPECT_GT(simba_term_token(term2), tok1);
  EXPECT_TRUE(simba_term_is_valid(term2));
  const std::string sid2 = session_id(c);
  EXPECT_FALSE(sid2.empty());
  EXPECT_NE(sid2, sid1) << "an ended session must never be reused";
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_GE(counter(c, "sessions_opened"), 2);
  ASSERT_TRUE(log.wait_from(SIMBA_EVENT_SESSION_OPENED, expired, 2000 * slow_factor()));
  const int opened = log.index_of(SIMBA_EVENT_SESSION_OPENED, expired);
  ASSERT_GT(opened, expired);
  EXPECT_TRUE(contains(log.events()[opened].detail, sid2)) << log.events()[opened].detail;
  EXPECT_FALSE(simba_term_is_valid(term));  // an ended term never comes back
  EXPECT_EQ(e.pairing_errors(), 0);
}

TEST_F(EngineFaults, BackendUnreachableEndsTheTermAtTheLocalDeadline) { BackendUnreachable(false); }

TEST_F(EngineFaults, BackendHangingEndsTheTermAtTheLocalDeadline) { BackendUnreachable(true); }

// ---------------------------------------------------------------------------
// A reply that arrives after the deadline never extends it. The memory backend
// applies each keep-alive at once (the backend renews the session) but answers
// only after reply_delay_ns, longer than the lease.

TEST_F(EngineFaults, LateKeepAliveRepliesNeverExtendTheDeadline) {
  const Timing t{1000, 200};
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  ASSERT_EQ(e.start(c, lease("late")), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;
  const uint64_t tok1 = simba_term_token(term);
  const std::string sid1 = session_id(c);
  WaitOneKeepAlive(c);

  const int64_t ta = mono_ns();
  const int64_t r0 = simba_term_remaining_ms(term);
  ASSERT_GT(r0, 0);
  const int64_t keep_alives0 = counter(c, "keep_alives");
  const int64_t delay_ns = 1500 * kMsNs;  // > lease
  faults(c).reply_delay_ns = delay_ns;
  const int64_t t1 = mono_ns();
  const int64_t upper = t1 + Validity(t);

  const int64_t invalid_at = WatchUntilInvalid(term, upper, nullptr, nullptr);
  ASSERT_NE(invalid_at, 0);
  EXPECT_GE(invalid_at, ta + r0 * kMsNs);
  ASSERT_TRUE(e.wait_revoked(1, 2000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  // Keep-alives went on during the fault: each reached the backend at once.
  EXPECT_GT(counter(c, "keep_alives"), keep_alives0);

  // Their replies (all "ok") arrive up to delay after the last was sent, after
  // the deadline: the term stays ended, and no session is adopted from a reply
  // this late either.
  const int64_t replies_done = mono_ns() + delay_ns + 300 * kMsNs;
  while (mono_ns() < replies_done) {
    ASSERT_FALSE(simba_term_is_valid(term));
    ASSERT_EQ(simba_term_remaining_ms(term), 0);
    ASSERT_EQ(e.elected_count(), 1) << "elected while every reply came after its timeout";
    sleep_ms(5);
  }
  EXPECT_EQ(simba_term_revoke_reason(term), SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_EQ(e.revoked_count(), 1);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_LIVE), 0) << "a late reply revived the session";
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);

  // Timely replies again: a new session, a new term with a larger token.
  faults(c).reply_delay_ns = 0;
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, tok1);
  const std::string sid2 = session_id(c);
  EXPECT_NE(sid2, sid1);
  EXPECT_FALSE(simba_term_is_valid(term));
  // Sessions opened by replies that came too late were closed again: only the
  // current session is left on the backend once the last late reply is in.
  EXPECT_TRUE(wait_for([&] { return store().live_sessions().size() == 1; }, 4000 * slow_factor()))
      << store().live_sessions().size() << " live sessions";
  const auto live = store().live_sessions();
  EXPECT_EQ(live, std::vector<std::string>{sid2});
}

// simba_client_close_async() of an EXTERNAL-mode client (1.5): the backend
// answers nothing, so the close is sent again until the session's local
// deadline; done then says SIMBA_ETIMEDOUT (the leases free at the session's
// expiry), inside simba_client_process(), which returns SIMBA_ECLOSED.
TEST_F(EngineFaults, ExternalCloseAsyncUnansweredSaysTimedOut) {
  Timing t{1000, 200};
  t.settings = {{"loop.mode", "external"}};
  Election e;
  Client c;
  ASSERT_EQ(c.open(url(), t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, lease("close-async")), SIMBA_OK) << simba_last_error();
  struct Done {
    int calls = 0;
    int err = 1;
    bool in_process = false;
    int revoked_before = 0;
    Election* e = nullptr;
  } d;
  d.e = &e;
  bool in_process = false;
  int rc = SIMBA_OK;
  auto process = [&] {
    in_process = true;
    rc = ProcessOnce(c);
    in_process = false;
  };
  const int64_t give_up = mono_ns() + 5000 * slow_factor() * kMsNs;
  while (e.elected_count() == 0 && rc == SIMBA_OK && mono_ns() < give_up) process();
  ASSERT_EQ(e.elected_count(), 1);
  faults(c).hang = true;
  static bool* in_process_now;
  in_process_now = &in_process;
  const int64_t started = mono_ns();
  ASSERT_EQ(simba_client_close_async(
                c,
                [](void* ud, int err) {
                  auto* x = static_cast<Done*>(ud);
                  ++x->calls;
                  x->err = err;
                  x->in_process = *in_process_now;
                  x->revoked_before = x->e->revoked_count();
                },
                &d),
            SIMBA_OK)
      << simba_last_error();
  while (rc == SIMBA_OK && mono_ns() < give_up) process();
  const int64_t took_ms = (mono_ns() - started) / kMsNs;
  EXPECT_EQ(rc, SIMBA_ECLOSED) << simba_last_error();
  EXPECT_EQ(d.calls, 1);
  EXPECT_EQ(d.err, SIMBA_ETIMEDOUT);
  EXPECT_TRUE(d.in_process);
  EXPECT_EQ(d.revoked_before, 1) << "done must come after the term's on_revoked";
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_STOPPED);
  EXPECT_LE(took_ms, 1000 + 500 * slow_factor()) << "the close outlived the local deadline";
  EXPECT_EQ(simba_client_process(c), SIMBA_ECLOSED);
  EXPECT_EQ(d.calls, 1);
  faults(c).hang = false;
  c.close();  // frees at once
}

// A renewal processed after the local deadline never extends it, even when no
// thread read a term in between (a pause of the process: here an EXTERNAL-mode
// host that does not run the loop). The reply was due before the deadline and
// its own deadline (sent + validity) lies in the future, yet the session ends.
TEST_F(EngineFaults, RenewalProcessedAfterTheDeadlineNeverExtendsIt) {
  Timing t{1000, 200};
  t.settings = {{"loop.mode", "external"}};
  Election e;
  Client c;
  ASSERT_EQ(c.open(url(), t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  // Runs the client's loop on this thread until `pred` holds.
  auto drive = [&](auto pred, int64_t timeout_ms) {
    const int64_t until = mono_ns() + timeout_ms * kMsNs;
    while (!pred()) {
      if (mono_ns() >= until) return false;
      if (ProcessOnce(c) != SIMBA_OK) return false;
    }
    return true;
  };
  ASSERT_EQ(e.start(c, lease("paused")), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(drive([&] { return e.elected_count() == 1; }, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;

  // The next keep-alive's reply comes 100 ms after it is sent.
  faults(c).reply_delay_ns = 100 * kMsNs;
  const int64_t k0 = counter(c, "keep_alives");
  ASSERT_TRUE(drive([&] { return counter(c, "keep_alives") > k0; }, 5000 * slow_factor()));
  const int64_t sent_at = mono_ns();  // just after it was sent
  const int64_t left = simba_term_remaining_ms(term);
  ASSERT_GT(left, 100) << "the old deadline must lie beyond the reply's arrival";
  const int64_t old_deadline = sent_at + left * kMsNs + kMsNs;
  ASSERT_LT(old_deadline, sent_at + Validity(t)) << "the reply would not extend the deadline";

  // The host pauses past the old deadline: nobody runs the loop or reads a term.
  while (mono_ns() <= old_deadline + 20 * kMsNs) sleep_ms(5);
  // Waking, the loop first handles the reply (due long ago) ...
  ASSERT_EQ(simba_client_process(c), SIMBA_OK);
  // ... which must not revive the session: its deadline had passed.
  EXPECT_FALSE(simba_term_is_valid(term)) << "a renewal handled after the deadline extended it";
  EXPECT_EQ(simba_term_remaining_ms(term), 0);
  ASSERT_TRUE(drive([&] { return e.revoked_count() == 1; }, 2000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  faults(c).reply_delay_ns = 0;
  ASSERT_TRUE(drive([&] { return e.elected_count() == 2; }, 5000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, simba_term_token(term));
  EXPECT_FALSE(simba_term_is_valid(term));
}

// "sentAt is when the keep-alive was sent, not when the reply arrived, so a slow
// reply only shortens the deadline": with every reply slow (but within the call
// timeout), the term never has more than validity − delay left.
TEST_F(EngineFaults, SlowRepliesOnlyShortenTheDeadline) {
  const Timing t{1000, 200};
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  ASSERT_EQ(e.start(c, lease("slow")), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;

  const int64_t delay_ms = 150;  // < the call timeout (200 ms)
  faults(c).reply_delay_ns = delay_ms * kMsNs;
  // From the second keep-alive sent after this, every deadline comes from a slow one.
  const int64_t k0 = counter(c, "keep_alives");
  ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") >= k0 + 2; }, 5000 * slow_factor()));
  const int64_t until = mono_ns() + 800 * kMsNs;
  int64_t most = 0;
  while (mono_ns() < until) {
    most = std::max(most, simba_term_remaining_ms(term));
    ASSERT_TRUE(simba_term_is_valid(term)) << "a slow but timely reply ended the term";
    sleep_ms(1);
  }
  EXPECT_LE(most, Validity(t) / kMsNs - delay_ms)
      << "the deadline counted from the reply's arrival, not from the keep-alive's sending";
  EXPECT_GT(most, 0);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_SUSPENDED), 0);
  EXPECT_EQ(e.revoked_count(), 0);
  faults(c).reply_delay_ns = 0;
}

// ---------------------------------------------------------------------------
// The backend reports the session expired: every term revoked (SESSION_EXPIRED)
// at the next keep-alive, a new session, contend again.

// simba_client_inspect_json when the backend does not answer or cannot be
// reached: a clear code after at most the timeout, never a hang.
TEST_F(EngineFaults, InspectFailsClearly) {
  const Timing t{1000, 200};
  Client c;
  OpenLive(c, t);
  char* json = nullptr;
  faults(c).hang = true;
  const int64_t t0 = mono_ms();
  EXPECT_EQ(simba_client_inspect_json(c, nullptr, 0, 150, &json), SIMBA_ETIMEDOUT);
  EXPECT_GE(mono_ms() - t0, 140);
  EXPECT_LT(mono_ms() - t0, 150 + 1000 * slow_factor());
  EXPECT_NE(std::string(simba_last_error()).find("150 ms"), std::string::npos)
      << simba_last_error();
  faults(c).hang = false;
  faults(c).unreachable = true;
  EXPECT_EQ(simba_client_inspect_json(c, nullptr, 0, 1000, &json), SIMBA_EBACKEND);
  EXPECT_NE(std::string(simba_last_error()).find("unreachable"), std::string::npos)
      << simba_last_error();
  EXPECT_EQ(json, nullptr);
  faults(c).unreachable = false;
  ASSERT_EQ(simba_client_inspect_json(c, nullptr, 0, 1000, &json), SIMBA_OK) << simba_last_error();
  simba_free(json);
}

// A term lost other than by stop or step-down (here: the session expired on
// the backend) is not waited for: the work is interrupted and the term revoked
// at once, and the task contends again while the old work still winds down.
namespace {
struct DeafWork {
  std::atomic<int> runs{0};
  std::atomic<int64_t> saw_revoked_ns{0};
  static void run(void* ud, simba_term_t* t) {
    auto* w = static_cast<DeafWork*>(ud);
    if (w->runs.fetch_add(1) > 0) return;  // later terms: return at once
    while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
    }
    w->saw_revoked_ns = mono_ns();
    sleep_ms(1500);  // winds down slowly
  }
};
}  // namespace

TEST_F(EngineFaults, TermLostOtherwiseIsNotWaitedForWork) {
  const Timing t{1000, 200};
  Client c;
  OpenLive(c, t);
  DeafWork w;
  simba_task_t* task = nullptr;
  ASSERT_EQ(simba_run_while_leader(&task, c, lease("lost").c_str(), DeafWork::run, &w), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return w.runs.load() == 1; }, 5000 * slow_factor()));
  const int64_t expired_at = mono_ns();
  store().expire_session(session_id(c));
  ASSERT_TRUE(wait_for([&] { return w.saw_revoked_ns.load() != 0; }, 3000 * slow_factor()));
  EXPECT_LT((w.saw_revoked_ns.load() - expired_at) / kMsNs, t.renew_ms + 300 * slow_factor());
  // A new session, a new term and a new run, while the first run still sleeps.
  ASSERT_TRUE(wait_for([&] { return w.runs.load() >= 2; }, 3000 * slow_factor()));
  EXPECT_LT((mono_ns() - w.saw_revoked_ns.load()) / kMsNs, 1500);
  EXPECT_EQ(simba_task_close(task), SIMBA_OK);
}

// Leader work starts on a valid term only (simba.h, simba_work_fn): a stop
// that lands between the election and the start of the work's thread leaves
// nothing to run. The work counts as exited at once, so the handover goes on
// without holding the lease until the term's deadline.
namespace {
struct StartProbe {
  std::atomic<int> held{0};         // the work thread waits in the start hook
  std::atomic<int> runs{0};         // work calls
  std::atomic<int> ran_invalid{0};  // work calls on a term already invalid
  std::atomic<int64_t> done_ns{0};
  static void run(void* ud, simba_term_t* t) {
    auto* p = static_cast<StartProbe*>(ud);
    ++p->runs;
    if (!simba_term_is_valid(t)) ++p->ran_invalid;
    while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
    }
  }
  static void done(void* ud, int) { static_cast<StartProbe*>(ud)->done_ns = mono_ns(); }
};
}  // namespace

TEST_F(EngineFaults, WorkDoesNotStartOnATermRevokedBeforeItsThreadRan) {
  const Timing t{1000, 200};
  Client c;
  OpenLive(c, t);
  StartProbe p;
  // Holds each new term's work thread before its start until the term reads
  // invalid: the stop below always lands in that window.
  static_cast<simba_client_t*>(c)->impl->set_work_start_hook([&p](simba::engine::Term* t) {
    simba_term_t* term = simba::capi::handle_of(t);
    p.held = 1;
    wait_for([term] { return !simba_term_is_valid(term); }, 5000 * slow_factor(), 1);
  });
  simba_task_t* task = nullptr;
  ASSERT_EQ(simba_run_while_leader(&task, c, lease("start").c_str(), StartProbe::run, &p),
            SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return p.held.load() == 1; }, 5000 * slow_factor()));
  const int64_t stop_at = mono_ns();
  ASSERT_EQ(simba_task_stop(task, StartProbe::done, &p), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return p.done_ns.load() != 0; }, 5000 * slow_factor()));
  EXPECT_EQ(p.runs.load(), 0) << "the work started on a revoked term";
  EXPECT_EQ(p.ran_invalid.load(), 0);
  // Released at once, not at the term's deadline (about 940 ms after the stop).
  EXPECT_LT((p.done_ns.load() - stop_at) / kMsNs, 400 * slow_factor());
  static_cast<simba_client_t*>(c)->impl->set_work_start_hook(nullptr);
  EXPECT_EQ(simba_task_close(task), SIMBA_OK);
}

// A schedule whose term is lost mid-schedule (the session expired on the
// backend) makes no further run on that term, and the next term starts again
// with the initial delay, counted from its election.
namespace {
struct SchedProbe {
  std::mutex mu;
  std::vector<std::pair<uint64_t, int64_t>> runs;  // token, start
  simba_term_t* first = nullptr;                   // the first term, retained
  std::atomic<int> ran_invalid{0};
  static void run(void* ud, simba_term_t* t) {
    auto* p = static_cast<SchedProbe*>(ud);
    const int64_t at = mono_ns();
    if (!simba_term_is_valid(t)) ++p->ran_invalid;
    std::lock_guard<std::mutex> lock(p->mu);
    if (!p->first) {
      simba_term_retain(t);
      p->first = t;
    }
    p->runs.emplace_back(simba_term_token(t), at);
  }
  std::vector<std::pair<uint64_t, int64_t>> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return runs;
  }
  ~SchedProbe() { simba_term_release(first); }
};
}  // namespace

TEST_F(EngineFaults, ScheduleStopsOnALostTermAndRestartsWithTheInitialDelay) {
  const Timing t{1000, 200};
  constexpr int64_t kDelay = 300;
  Client c;
  OpenLive(c, t);
  SchedProbe p;
  simba_task_t* task = nullptr;
  ASSERT_EQ(simba_schedule(&task, c, lease("sched").c_str(), kDelay, 20, SchedProbe::run, &p),
            SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return p.snapshot().size() >= 3; }, 5000 * slow_factor()));
  simba_term_t* first = p.first;
  const uint64_t tok1 = simba_term_token(first);
  store().expire_session(session_id(c));
  // Seen at the next keep-alive: the term ends (polled every millisecond).
  ASSERT_TRUE(wait_for([&] { return !simba_term_is_valid(first); }, 3000 * slow_factor(), 1));
  const int64_t lost_at = mono_ns();
  ASSERT_TRUE(wait_for(
      [&] {
        auto runs = p.snapshot();
        return !runs.empty() && runs.back().first != tok1;
      },
      5000 * slow_factor()));
  const auto runs = p.snapshot();
  bool first_of_new = true;
  for (const auto& [token, at] : runs) {
    if (token == tok1) {
      EXPECT_LT(at, lost_at) << "a run started on the lost term";
    } else if (first_of_new) {
      first_of_new = false;
      EXPECT_GT(token, tok1);
      // Elected after the old term ended, then the delay (the slack covers
      // the poll's oversleeping; without the delay the run comes at once).
      EXPECT_GE(at, lost_at + (kDelay - 50 * slow_factor()) * kMsNs)
          << "the new term's first run came " << (at - lost_at) / kMsNs << " ms after the loss";
    }
  }
  EXPECT_EQ(p.ran_invalid.load(), 0);
  EXPECT_EQ(simba_task_close(task), SIMBA_OK);
}

// A partition-group member dies (its backend becomes unreachable: its terms
// end at its local deadline, its session expires on the store): the others
// take its orphaned partitions, never while its terms were still valid.
TEST_F(EngineFaults, PartitionGroupTakesOverADeadMembersPartitions) {
  const Timing t{1000, 200};
  constexpr int kN = 8;
  GroupProbe probe;
  Client c[3];
  simba_task_t* task[3] = {nullptr, nullptr, nullptr};
  for (auto& client : c) OpenLive(client, t);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(
        simba_group_join(&task[i], c[i], lease("g").c_str(), kN, GroupProbe::work, probe.member(i)),
        SIMBA_OK);
  }
  const int64_t settle = 10'000 * slow_factor();
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1, 2}, kN); }, settle)) << probe.dump();
  faults(c[2]).unreachable = true;  // dead to the world
  ASSERT_TRUE(wait_for([&] { return probe.held(2) == 0; }, 3000 * slow_factor()));
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1}, kN); }, settle)) << probe.dump();
  EXPECT_EQ(probe.violations(), 0);
  for (auto* tk : task) EXPECT_EQ(simba_task_close(tk), SIMBA_OK);
  EXPECT_EQ(probe.violations(), 0);
}

// A join moves as few partitions as it can. Five partitions over members 1 and
// 2 (3 + 2, member 0 having left), then member 3 joins and takes member 0's
// free slot, the lowest: the one holding three hands one over, and that is
// the only move (shares by slot order would make both hand one over).
TEST_F(EngineFaults, PartitionGroupJoinMovesAsFewPartitionsAsItCan) {
  const Timing t{1000, 200};
  constexpr int kN = 5;
  GroupProbe probe;
  Client c[4];
  simba_task_t* task[4] = {nullptr, nullptr, nullptr, nullptr};
  for (auto& client : c) OpenLive(client, t);
  const std::string group = lease("moves");
  const int64_t settle = 10'000 * slow_factor();
  std::vector<int> joined;
  for (int i = 0; i < 3; ++i) {  // one at a time, so member i holds member slot i
    ASSERT_EQ(
        simba_group_join(&task[i], c[i], group.c_str(), kN, GroupProbe::work, probe.member(i)),
        SIMBA_OK);
    joined.push_back(i);
    ASSERT_TRUE(wait_for([&] { return probe.balanced(joined, kN); }, settle)) << probe.dump();
  }
  EXPECT_EQ(simba_task_close(task[0]), SIMBA_OK);
  task[0] = nullptr;
  ASSERT_TRUE(wait_for([&] { return probe.balanced({1, 2}, kN); }, settle)) << probe.dump();
  sleep_ms(3 * t.renew_ms);  // a few rounds: settled, nothing moves any more
  ASSERT_TRUE(probe.balanced({1, 2}, kN)) << probe.dump();

  const int starts = probe.starts();
  ASSERT_EQ(simba_group_join(&task[3], c[3], group.c_str(), kN, GroupProbe::work, probe.member(3)),
            SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({1, 2, 3}, kN); }, settle)) << probe.dump();
  sleep_ms(5 * t.renew_ms);  // rounds in which a needless move would show
  EXPECT_TRUE(probe.balanced({1, 2, 3}, kN)) << probe.dump();
  EXPECT_EQ(probe.starts() - starts, 1) << "partitions moved on a join: " << probe.dump();
  EXPECT_EQ(probe.held(3), 1) << probe.dump();
  for (auto* tk : task) EXPECT_EQ(simba_task_close(tk), SIMBA_OK);
  EXPECT_EQ(probe.violations(), 0);
}

TEST_F(EngineFaults, PartitionGroupArguments) {
  Client c;
  OpenLive(c, Timing{1000, 200});
  GroupProbe probe;
  simba_task_t* task = nullptr;
  EXPECT_EQ(simba_group_join(&task, c, "g", 0, GroupProbe::work, probe.member(0)), SIMBA_EINVAL);
  EXPECT_EQ(simba_group_join(&task, c, "g", 10001, GroupProbe::work, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_group_join(&task, c, "bad name", 3, GroupProbe::work, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_group_join(&task, c, std::string(120, 'x').c_str(), 3, GroupProbe::work, nullptr),
            SIMBA_EINVAL);
  EXPECT_NE(std::string(simba_last_error()).find("member"), std::string::npos)
      << simba_last_error();
  EXPECT_EQ(simba_group_join(&task, c, "g", 3, nullptr, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_group_join(nullptr, c, "g", 3, GroupProbe::work, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_group_join(&task, nullptr, "g", 3, GroupProbe::work, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(task, nullptr);
  ASSERT_EQ(simba_group_join(&task, c, lease("args").c_str(), 3, GroupProbe::work, probe.member(1)),
            SIMBA_OK);
  EXPECT_EQ(simba_task_step_down(task, -1, nullptr, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_task_stop(task, nullptr, nullptr), SIMBA_OK);
  EXPECT_EQ(simba_task_stop(task, nullptr, nullptr), SIMBA_ESTATE);
  EXPECT_EQ(simba_task_close(task), SIMBA_OK);
}

TEST_F(EngineFaults, SessionExpiredOnTheBackend) {
  const Timing t{1000, 200};
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  ASSERT_EQ(e.start(c, lease("expired")), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;
  const uint64_t tok1 = simba_term_token(term);
  const std::string sid1 = session_id(c);
  ASSERT_TRUE(store().session_live(sid1));

  const int64_t expired_at = mono_ns();
  store().expire_session(sid1);
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_SESSION_EXPIRED);
  EXPECT_EQ(simba_term_revoke_reason(term), SIMBA_REVOKE_SESSION_EXPIRED);
  EXPECT_FALSE(simba_term_is_valid(term));
  // At the next keep-alive: within one renew interval (plus slack).
  EXPECT_LT((e.last_revoked().at_ns - expired_at) / kMsNs, t.renew_ms + 300 * slow_factor());

  ASSERT_TRUE(log.wait(SIMBA_EVENT_SESSION_EXPIRED, 1, 2000 * slow_factor()));
  const int expired = log.index_of(SIMBA_EVENT_SESSION_EXPIRED);
  EXPECT_TRUE(contains(log.events()[expired].detail, "SESSION_EXPIRED"))
      << log.events()[expired].detail;
  EXPECT_TRUE(contains(log.events()[expired].detail, sid1));

  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, tok1);
  const std::string sid2 = session_id(c);
  EXPECT_FALSE(sid2.empty());
  EXPECT_NE(sid2, sid1);
  EXPECT_FALSE(store().session_live(sid1)) << "an expired session was revived";
  ASSERT_TRUE(log.wait_from(SIMBA_EVENT_SESSION_OPENED, expired, 2000 * slow_factor()));
  EXPECT_GT(log.index_of(SIMBA_EVENT_SESSION_OPENED, expired), expired);
  EXPECT_EQ(store().lease(e.name()).holder, sid2);
  EXPECT_FALSE(simba_term_is_valid(term));
  EXPECT_EQ(e.pairing_errors(), 0);
}

// ---------------------------------------------------------------------------
// A keep-alive shows the lease owned by someone else: TAKEN_OVER; the node keeps
// its session and does not get the lease back while the other holds it.

TEST_F(EngineFaults, TakenOverAtTheNextKeepAlive) {
  const Timing t{1000, 200};
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  const std::string name = lease("takeover");
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* term = e.last_elected().term;
  const uint64_t tok1 = simba_term_token(term);
  const std::string sid = session_id(c);

  const int64_t taken_at = mono_ns();
  const uint64_t foreign = store().hand_over(name, "someone-else");
  EXPECT_GT(foreign, tok1);
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_TAKEN_OVER);
  EXPECT_EQ(simba_term_revoke_reason(term), SIMBA_REVOKE_TAKEN_OVER);
  EXPECT_FALSE(simba_term_is_valid(term));
  EXPECT_LT((e.last_revoked().at_ns - taken_at) / kMsNs, t.renew_ms + 300 * slow_factor());

  // It keeps contending, but never wins while the foreign holder holds it.
  const int64_t acquires0 = counter(c, "acquires");
  ASSERT_TRUE(
      wait_for([&] { return counter(c, "acquires") >= acquires0 + 4; }, 5000 * slow_factor()));
  EXPECT_EQ(e.elected_count(), 1);
  EXPECT_EQ(store().lease(name).holder, "someone-else");
  EXPECT_EQ(store().lease(name).token, foreign);
  // A take-over ends the term, not the session.
  EXPECT_EQ(session_id(c), sid);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_EXPIRED), 0);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);

  // The other node lets go: the candidate picks the lease up at its next attempt.
  store().hand_over(name, "");
  ASSERT_TRUE(e.wait_elected(2, 3000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, foreign);
  EXPECT_TRUE(simba_term_is_valid(e.last_elected().term));
  EXPECT_FALSE(simba_term_is_valid(term));
  EXPECT_EQ(e.pairing_errors(), 0);
}

// ---------------------------------------------------------------------------
// An acquire whose answer is lost: the backend granted the lease to our session,
// but no term was adopted from it. The lease must not stay held by our session
// without a term: it is released (late-reply / orphan rule), and the election
// then wins with a larger token.

TEST_F(EngineFaults, LostAcquireReplyDoesNotKeepTheLease) {
  const Timing t{1000, 200};
  Election e;
  Client c;
  OpenLive(c, t);
  const std::string name = lease("orphan");
  const std::string sid = session_id(c);

  faults(c).drop_replies = true;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  // The acquire reaches the backend at once; its answer is lost.
  ASSERT_TRUE(wait_for([&] { return store().lease(name).holder == sid; }, 2000 * slow_factor()));
  const int64_t orphan_at = mono_ns();
  const uint64_t orphan_token = store().lease(name).token;
  faults(c).drop_replies = false;

  // The store keeps the orphan (held by our session, token orphan_token, no
  // term) no longer than about one call timeout (the renew period) plus one renew
  // period (ADR 0005), far below two lease durations.
  const int64_t bound_ms = 2 * t.renew_ms + 250 * slow_factor();
  ASSERT_TRUE(wait_for(
      [&] {
        const auto v = store().lease(name);
        return !(v.holder == sid && v.token == orphan_token);
      },
      bound_ms + 1000))
      << "the lost acquire's lease was never released";
  const int64_t held_ms = (mono_ns() - orphan_at) / kMsNs;
  EXPECT_LE(held_ms, bound_ms) << "the store kept the lease of a lost acquire for " << held_ms
                               << " ms without a term";
  for (const auto& el : e.elected()) {
    EXPECT_NE(el.token, orphan_token) << "a term was adopted from a lost reply";
  }

  ASSERT_TRUE(e.wait_elected(1, 3000 * slow_factor()));
  EXPECT_GT(e.last_elected().token, orphan_token);
  EXPECT_TRUE(simba_term_is_valid(e.last_elected().term));
  EXPECT_EQ(store().lease(name).holder, session_id(c));
  EXPECT_EQ(store().lease(name).token, e.last_elected().token);
}

// An acquire whose answer comes after the attempt was given up (call timeout):
// "a late reply to an abandoned attempt releases what it won", and the term is
// adopted only from a later attempt, with a larger token.
TEST_F(EngineFaults, LateAcquireReplyReleasesWhatItWon) {
  const Timing t{1000, 200};
  Election e;
  Client c;
  OpenLive(c, t);
  const std::string name = lease("late-acquire");
  const std::string sid = session_id(c);

  const int64_t delay_ms = 350;  // > the call timeout (one renew period)
  faults(c).reply_delay_ns = delay_ms * kMsNs;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(wait_for([&] { return store().lease(name).holder == sid; }, 2000 * slow_factor()));
  const int64_t won_at = mono_ns();
  const uint64_t late_token = store().lease(name).token;
  faults(c).reply_delay_ns = 0;

  // Released by the next keep-alive after the attempt was given up (ADR 0005),
  // or when the late answer arrives, whichever comes first.
  const int64_t bound_ms = std::min(delay_ms, 2 * t.renew_ms) + 250 * slow_factor();
  ASSERT_TRUE(wait_for(
      [&] {
        const auto v = store().lease(name);
        return !(v.holder == sid && v.token == late_token);
      },
      bound_ms + 2000));
  const int64_t held_ms = (mono_ns() - won_at) / kMsNs;
  EXPECT_LE(held_ms, bound_ms) << "the lease won by an abandoned attempt stayed held " << held_ms
                               << " ms";
  ASSERT_TRUE(e.wait_elected(1, 3000 * slow_factor()));
  for (const auto& el : e.elected()) {
    EXPECT_GT(el.token, late_token) << "a term was adopted from an abandoned attempt's reply";
  }
  EXPECT_TRUE(simba_term_is_valid(e.last_elected().term));
  EXPECT_EQ(store().lease(name).token, e.last_elected().token);
}

// ---------------------------------------------------------------------------
// The seed's invariant: once any thread has seen a term invalid, no thread ever
// sees it valid again. Four threads read every term of the run while the test
// makes renewals race the deadline (reply delays toggled around the validity),
// and finally hangs the backend so that every term ends.

// `pauses`: the client runs in EXTERNAL mode on this thread, which stops
// running its loop now and then for about a validity (a GC or VM pause), so
// that renewals are also handled after their deadline passed.
void EngineFaults::Stress(bool pauses) {
  // Short lease, small margin and backoff: keep-alives land close to the deadline.
  Timing t{300, 100};
  t.margin_ms = 10;
  t.min_backoff_ms = 20;
  if (pauses) t.settings = {{"loop.mode", "external"}};
  const int64_t validity_ns = Validity(t);  // 287 ms
  EventLog log;
  Election e;
  Client c;
  OpenLive(c, t, &log);
  ASSERT_EQ(e.start(c, lease("stress")), SIMBA_OK) << simba_last_error();
  const unsigned seed = std::random_device{}();
  std::mt19937 drive_rng(seed + 1);
  int64_t paused_ns = 0;
  int pauses_made = 0;
  int64_t keep_alives_seen = 0;
  // Waits `ns`; in EXTERNAL mode this thread runs the loop meanwhile, pausing now and then.
  auto run_for = [&](int64_t ns) {
    const int64_t until = mono_ns() + ns;
    if (!pauses) {
      while (mono_ns() < until) sleep_ms(2);
      return;
    }
    while (mono_ns() < until) {
      int64_t wait = simba_client_timeout_ms(c);
      if (wait < 0 || wait > 2) wait = 2;
      struct pollfd p = {simba_client_fd(c), POLLIN, 0};
      poll(&p, 1, static_cast<int>(wait));
      simba_client_process(c);
      int64_t pause = 0;
      const std::string snap = snapshot(c);
      const int64_t sent = json_int(snap, "keep_alives");
      if (sent > keep_alives_seen) {
        keep_alives_seen = sent;
        // A keep-alive just went out and its reply is on its way (a reply due
        // at once was handled already): pause past the current deadline but
        // not past the one the reply would set, so the reply is handled late.
        const int64_t left_ms = json_int(snap, "remaining_ms");
        const int64_t delay = faults(c).reply_delay_ns.load();
        if (left_ms > 0 && delay > 0 && delay < t.renew_ms * kMsNs &&
            std::uniform_int_distribution<int>(0, 1)(drive_rng) == 0) {
          pause = left_ms * kMsNs +
                  std::uniform_int_distribution<int64_t>(kMsNs, 60 * kMsNs)(drive_rng);
        }
      } else if (std::uniform_int_distribution<int>(0, 249)(drive_rng) == 0) {
        pause = std::uniform_int_distribution<int64_t>(validity_ns / 2,
                                                       validity_ns * 13 / 10)(drive_rng);
      }
      if (pause > 0) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(pause));
        paused_ns += pause;
        ++pauses_made;
      }
    }
  };
  const int64_t elect_until = mono_ns() + 5000 * kMsNs * slow_factor();
  while (e.elected_count() == 0 && mono_ns() < elect_until) run_for(5 * kMsNs);
  ASSERT_EQ(e.elected_count(), 1);

  constexpr int kSlots = 512;
  struct Slot {
    std::atomic<simba_term_t*> term{nullptr};
    std::atomic<bool> seen_invalid{false};
  };
  auto slots = std::make_unique<std::array<Slot, kSlots>>();
  std::atomic<int> published{0};
  std::atomic<bool> done{false};
  std::atomic<int64_t> reads{0}, violations{0};

  // Terms are published to the readers as they are elected (retained by `e`).
  std::thread publisher([&] {
    int next = 0;
    while (!done.load()) {
      const auto terms = e.terms();
      for (; next < static_cast<int>(terms.size()) && next < kSlots; ++next) {
        (*slots)[next].term.store(terms[next]);
        published.store(next + 1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  ThreadGuard publisher_guard(publisher, done);

  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      int64_t n = 0;
      while (!done.load()) {
        const int count = published.load();
        // The newest terms are the ones racing their deadline.
        for (int i = std::max(0, count - 4); i < count; ++i) {
          Slot& s = (*slots)[i];
          simba_term_t* term = s.term.load();
          // The flag is read before the term.
          const bool seen = s.seen_invalid.load();
          const simba_revoke_reason_t reason = simba_term_revoke_reason(term);
          const int valid = simba_term_is_valid(term);
          const int64_t left = simba_term_remaining_ms(term);
          const int ensured = simba_term_ensure_valid(term, 0);
          if (seen && (valid || left > 0 || ensured == SIMBA_OK)) violations++;
          if (reason != SIMBA_REVOKE_NONE && valid) violations++;
          if (!valid || ensured != SIMBA_OK) s.seen_invalid.store(true);
          ++n;
        }
      }
      reads += n;
    });
  }
  struct Joiner {
    std::vector<std::thread>& threads;
    std::atomic<bool>& done;
    ~Joiner() {
      done = true;
      for (auto& th : threads) {
        if (th.joinable()) th.join();
      }
    }
  } readers_guard{readers, done};

  // Race the renewals against the deadline for ~2 s, in rounds: healthy (replies
  // within 60 ms), then
  // sick for most of a validity (replies time out, or come about a validity
  // late), then a rescue whose replies are late but within the call timeout,
  // landing just before or just after the deadline.
  std::mt19937 rng(seed);
  auto uniform_ns = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t renew_ns = t.renew_ms * kMsNs;
  const int64_t until = mono_ns() + 2000 * kMsNs;
  int rounds = 0;
  while (mono_ns() < until) {
    faults(c).reply_delay_ns = uniform_ns(0, 60 * kMsNs);
    run_for(uniform_ns(40 * kMsNs, 150 * kMsNs));
    faults(c).reply_delay_ns = (rounds % 2 == 0)
                                   ? uniform_ns(renew_ns, 2 * renew_ns)
                                   : uniform_ns(validity_ns * 8 / 10, validity_ns * 12 / 10);
    run_for(uniform_ns(validity_ns * 5 / 10, validity_ns * 9 / 10));
    faults(c).reply_delay_ns = uniform_ns(renew_ns * 3 / 10, renew_ns * 95 / 100);
    run_for(uniform_ns(10 * kMsNs, 150 * kMsNs));
    ++rounds;
  }
  // Finally hang: every term ends at its deadline. Replies already on their way
  // may still renew the session or win a term (within one call timeout), but
  // every deadline counts from a call sent before the hang.
  faults(c).hang = true;
  faults(c).reply_delay_ns = 0;
  const int64_t hung_at = mono_ns();
  run_for(validity_ns + kMsNs);
  while (mono_ns() <= hung_at + validity_ns + kMsNs) sleep_ms(1);
  for (simba_term_t* term : e.terms()) {
    EXPECT_FALSE(simba_term_is_valid(term)) << "a term was valid more than one validity ("
                                            << validity_ns / kMsNs << " ms) after the hang";
  }
  run_for(200 * kMsNs);  // readers keep reading the ended terms (not an assertion)
  done = true;
  for (auto& th : readers) th.join();
  publisher_guard.join();

  const int terms = e.elected_count();
  std::cout << "[ stress   ] seed " << seed << ": " << rounds << " rounds, " << terms << " terms, "
            << counter(c, "sessions_opened") << " sessions, " << pauses_made << " pauses ("
            << paused_ns / kMsNs << " ms), " << reads.load() << " reads" << std::endl;
  EXPECT_EQ(violations.load(), 0) << "a term read valid after a thread had seen it invalid "
                                  << "(seed " << seed << ")";
  EXPECT_GE(terms, 1);
  EXPECT_GT(reads.load(), 10'000);
  for (simba_term_t* term : e.terms()) EXPECT_FALSE(simba_term_is_valid(term));
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_LEASE_SHORTENED), 0);

  c.close();
  EXPECT_TRUE(e.all_revoked_once())
      << e.elected_count() << " elected, " << e.revoked_count() << " revoked";
  EXPECT_EQ(e.pairing_errors(), 0);
  int deadline_passed = 0;
  for (const auto& r : e.revoked()) deadline_passed += r.reason == SIMBA_REVOKE_DEADLINE_PASSED;
  EXPECT_GE(deadline_passed, 1);
}

TEST_F(EngineFaults, StressOnceInvalidNeverValidAgain) { Stress(false); }

TEST_F(EngineFaults, StressOnceInvalidNeverValidAgainWithLoopPauses) { Stress(true); }

// ---------------------------------------------------------------------------
// SessionLeaseShortened is for backends that grant less than the lease
// (ZooKeeper's maxSessionTimeout). memory:// grants the full lease: never emitted.

TEST_F(EngineFaults, LeaseShortenedIsNotEmittedWhenTheFullLeaseIsGranted) {
  const Timing t{600, 100};
  EventLog log;
  Election e1, e2;
  Client c;
  OpenLive(c, t, &log);
  ASSERT_EQ(e1.start(c, lease("a")), SIMBA_OK);
  ASSERT_EQ(e2.start(c, lease("b")), SIMBA_OK);
  ASSERT_TRUE(e1.wait_elected(1, 5000 * slow_factor()));
  ASSERT_TRUE(e2.wait_elected(1, 5000 * slow_factor()));
  const int64_t k0 = counter(c, "keep_alives");
  ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") >= k0 + 5; }, 5000 * slow_factor()));
  const std::string snap = snapshot(c);
  EXPECT_TRUE(contains(snap, "\"lease_shortened\":false")) << snap;
  EXPECT_EQ(json_int(snap, "renew_period_ms"), t.renew_ms) << snap;
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_LEASE_SHORTENED), 0);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_SUSPENDED), 0);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_EXPIRED), 0);
  EXPECT_TRUE(e1.leading());
  EXPECT_TRUE(e2.leading());
  c.close();
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_LEASE_SHORTENED), 0);
  EXPECT_EQ(log.count(SIMBA_EVENT_SESSION_CLOSED), 1);
}

}  // namespace
