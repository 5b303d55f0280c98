// The fixture of the core Node's tests (src/core/node.*), shared by
// tests/core/node_*_test.cpp: the tests check the node against the seed, event
// by event, on a virtual clock. The node's only outputs are Effects calls; a
// RecordingEffects records them (and checks the rules every scenario must keep:
// see tests/support/recording_effects.h). Backend calls are answered by the
// test through Node::on_*, with the call id the node gave them. Time moves only
// through run_until(), which fires the node's timers in order as the engine's
// loop does.
//
// Every test ends (TearDown) by closing the node and checking that every
// elected() was followed by exactly one revoked() for the same term.
#ifndef SIMBA_TESTS_CORE_NODE_FIXTURE_H
#define SIMBA_TESTS_CORE_NODE_FIXTURE_H

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend_types.h"
#include "core/config.h"
#include "core/node.h"
#include "core/term_state.h"
#include "core/time.h"
#include "support/fake_clock.h"
#include "support/recording_effects.h"

namespace simba::node_test {

using testing::FakeClock;
using testing::Fx;
using testing::FxCall;
using testing::RecordingEffects;

// The seed's defaults.
const Duration kLease = ms(15000);
const Duration kRenew = ms(5000);      // leaseDuration / 3
const Duration kValidity = ms(14800);  // 15 s × (1 − 0.01) − 50 ms
const Duration kMargin = ms(50);
const Duration kJitter = ms(2500);  // renewInterval / 2
const Duration kMinBackoff = ms(100);
const Duration kNever = Duration(-1);  // holder_remaining: unknown
const Duration k1ns = Duration(1);

class NodeTest : public ::testing::Test {
 protected:
  Config cfg;
  FakeClock clock;
  RecordingEffects fx{&clock};
  std::unique_ptr<Node> node;
  uint64_t seed = 1;
  // When set, run_until() answers every keep-alive at once with kOk and the
  // leases of this node's unrevoked terms.
  bool auto_keep_alive = false;
  Duration grant = kLease;
  int sessions = 0;

  // Declared after `node`, so freed before it: a node does not read its
  // contenders when it is destroyed.
  std::map<ContenderId, std::unique_ptr<Contender>> contenders;
  ContenderId keep(std::unique_ptr<Contender> c) {
    const ContenderId id = c->id;
    contenders[id] = std::move(c);
    return id;
  }

  void TearDown() override {
    if (!node) return;
    if (!node->closed()) {
      node->close(now());
      // Terms whose work never returned hold the close until their deadline.
      if (fx.pending(Fx::kClose).empty() && !node->closed()) run_until(now() + kLease);
      for (const FxCall& c : fx.pending(Fx::kClose)) {
        fx.mark_answered(c.call);
        node->on_close(c.call, DoneReply{Outcome::kOk, ""}, now());
      }
    }
    EXPECT_TRUE(node->closed());
    EXPECT_TRUE(fx.closed_seen());
    fx.expect_all_revoked();
  }

  TimePoint now() const { return clock.now(); }

  Node& make() {
    EXPECT_EQ(cfg.validate(), "");
    node = std::make_unique<Node>(cfg, fx, clock, seed);
    return *node;
  }

  // A node with a LIVE session opened at the current time, its open answered at once.
  void start_live(Duration remaining = kLease) {
    make();
    node->start(now());
    open_ok(remaining);
    ASSERT_EQ(node->status(), SessionStatus::kLive);
  }

  // --- Contenders -----------------------------------------------------------------
  // The node links contenders it does not own: the tests own them here, as the
  // engine owns its records, and name them by id as the node reports them.

  // 0 when the node refuses it.
  ContenderId add_election(const std::string& name, TimePoint at, bool with_work = false) {
    auto c = std::make_unique<Contender>(LeaseName(name), ContenderKind::kElection);
    if (!node->add_election(*c, at, with_work)) return 0;
    return keep(std::move(c));
  }
  ContenderId add_lock(const std::string& name, TimePoint give_up_at, bool try_once, TimePoint at) {
    auto c = std::make_unique<Contender>(LeaseName(name), ContenderKind::kLock);
    if (!node->add_lock(*c, give_up_at, try_once, at)) return 0;
    return keep(std::move(c));
  }
  bool stop(ContenderId id, TimePoint at) {
    Contender* c = contender(id);
    return c && node->stop(*c, at);
  }
  bool step_down(ContenderId id, Duration cooldown, TimePoint at) {
    Contender* c = contender(id);
    return c && node->step_down(*c, cooldown, at);
  }
  void work_done(ContenderId id, uint64_t token, TimePoint at) {
    if (Contender* c = contender(id)) node->work_done(*c, token, at);
  }
  Contender* contender(ContenderId id) {
    auto it = contenders.find(id);
    return it == contenders.end() ? nullptr : it->second.get();
  }

  // --- Time ---------------------------------------------------------------------

  // Fires every timer due up to `t`, in order, moving the clock to each; ends at `t`.
  void run_until(TimePoint t) {
    for (int guard = 0; guard < 1'000'000; ++guard) {
      if (auto_keep_alive) answer_keep_alives();
      const std::optional<TimePoint> w = node->next_wakeup();
      if (!w || *w > t) break;
      if (*w > now()) clock.set(*w);
      node->on_timer(now());
    }
    if (t > now()) clock.set(t);
    if (auto_keep_alive) answer_keep_alives();
  }
  void advance(Duration d) { run_until(now() + d); }
  // Runs timers until `pred` holds (checked after every timer), up to `limit`.
  bool run_until_true(const std::function<bool()>& pred, TimePoint limit) {
    for (int guard = 0; guard < 1'000'000; ++guard) {
      if (auto_keep_alive) answer_keep_alives();
      if (pred()) return true;
      const std::optional<TimePoint> w = node->next_wakeup();
      if (!w || *w > limit) break;
      if (*w > now()) clock.set(*w);
      node->on_timer(now());
    }
    if (auto_keep_alive) answer_keep_alives();
    return pred();
  }

  // --- Answers --------------------------------------------------------------------

  FxCall open_ok(Duration remaining = kLease, std::string id = "") {
    const FxCall c = fx.take_last(Fx::kOpen);
    if (id.empty()) id = "s" + std::to_string(++sessions);
    node->on_open(c.call, OpenReply{Outcome::kOk, id, remaining, ""}, now());
    return c;
  }

  // The leases of this node's terms on `session` that were not revoked() yet
  // (a term being handed over still holds its lease).
  std::vector<OwnedLease> owned_by(const std::string& session) const {
    std::vector<OwnedLease> v;
    for (const auto& t : fx.elected_terms()) {
      if (t->session_id() == session && !fx.was_revoked(t))
        v.push_back({t->name().str(), t->token()});
    }
    return v;
  }

  void answer_keep_alive(const FxCall& c, Outcome o, Duration remaining,
                         std::optional<std::vector<OwnedLease>> owned = std::nullopt) {
    fx.mark_answered(c.call);
    node->on_keep_alive(
        c.call, KeepAliveReply{o, remaining, owned ? *owned : owned_by(c.session), ""}, now());
  }
  FxCall ka_ok(Duration remaining = kLease,
               std::optional<std::vector<OwnedLease>> owned = std::nullopt) {
    const FxCall c = fx.take_last(Fx::kKeepAlive);
    answer_keep_alive(c, Outcome::kOk, remaining, owned);
    return c;
  }
  FxCall ka_fail(Outcome o) {
    const FxCall c = fx.take_last(Fx::kKeepAlive);
    node->on_keep_alive(c.call, KeepAliveReply{o, Duration::zero(), {}, "down"}, now());
    return c;
  }
  void answer_keep_alives() {
    for (const FxCall& c : fx.pending(Fx::kKeepAlive)) answer_keep_alive(c, Outcome::kOk, grant);
  }

  // The newest acquire of `name` not answered yet.
  FxCall take_acquire(const std::string& name) {
    const std::vector<FxCall> p = fx.pending(Fx::kAcquire);
    for (auto it = p.rbegin(); it != p.rend(); ++it) {
      if (it->name == name) {
        fx.mark_answered(it->call);
        return *it;
      }
    }
    ADD_FAILURE() << "no pending acquire of " << name << "\n" << fx.dump();
    return FxCall{};
  }
  void answer_acquire(const FxCall& c, Outcome o, uint64_t token = 0,
                      Duration holder_remaining = kNever) {
    fx.mark_answered(c.call);
    node->on_acquire(c.call, AcquireReply{o, token, holder_remaining, ""}, now());
  }
  TermRef win(const std::string& name, uint64_t token) {
    const size_t before = fx.elected_terms().size();
    answer_acquire(take_acquire(name), Outcome::kOk, token);
    if (fx.elected_terms().size() != before + 1) {
      ADD_FAILURE() << "no term adopted for " << name << "\n" << fx.dump();
      return nullptr;
    }
    auto t = fx.last_term();
    EXPECT_EQ(t->name(), name);
    EXPECT_EQ(t->token(), token);
    return t;
  }
  void held(const std::string& name, Duration holder_remaining = kNever) {
    answer_acquire(take_acquire(name), Outcome::kHeld, 0, holder_remaining);
  }
  // A new election that wins `token` at once.
  std::pair<ContenderId, TermRef> leader(const std::string& name, uint64_t token,
                                         bool with_work = false) {
    const ContenderId id = add_election(name, now(), with_work);
    EXPECT_NE(id, 0u);
    return {id, win(name, token)};
  }

  FxCall take_release() { return fx.take(Fx::kRelease); }
  void answer_release(const FxCall& c, Outcome o = Outcome::kOk) {
    fx.mark_answered(c.call);
    node->on_release(c.call, DoneReply{o, ""}, now());
  }
  void answer_close(const FxCall& c, Outcome o = Outcome::kOk) {
    fx.mark_answered(c.call);
    node->on_close(c.call, DoneReply{o, ""}, now());
  }

  // --- Reading --------------------------------------------------------------------

  std::optional<ContenderView> view_of(ContenderId id) const {
    for (const ContenderView& v : node->view().contenders) {
      if (v.id == id) return v;
    }
    return std::nullopt;
  }
  std::vector<FxCall> releases_since(size_t mark) const { return fx.of(Fx::kRelease, mark); }
  std::vector<FxCall> acquires_since(size_t mark, const std::string& name) const {
    std::vector<FxCall> out;
    for (const FxCall& c : fx.of(Fx::kAcquire, mark)) {
      if (c.name == name) out.push_back(c);
    }
    return out;
  }
  size_t count_session_event(SessionEvent ev, size_t since = 0) const {
    const auto evs = fx.session_events(since);
    return static_cast<size_t>(std::count(evs.begin(), evs.end(), ev));
  }
  // The events of one contender, as kinds, from `mark` on.
  std::vector<Fx> kinds_of(ContenderId who, size_t mark = 0) const {
    std::vector<Fx> out;
    for (const FxCall& e : fx.for_contender(who, mark)) out.push_back(e.kind);
    return out;
  }
};

}  // namespace simba::node_test

#endif
