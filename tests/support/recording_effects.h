// A recording Effects for tests of the core Node: every call is kept, in order,
// with the (virtual) time it happened. Backend calls can be "taken" by the test,
// which then answers them through the matching Node::on_* method.
//
// It also checks, as the calls arrive, the seed's rules that any Node must
// keep whatever the scenario (each breach is a gtest failure, with the event
// log):
//   * elected(term): the term is new, not revoked, valid, token > 0, and no other
//     term of the same name is live on this node;
//   * term_ended(term): the term's end (TermState::ended(), inside the node's
//     revoke(); the terms this Effects makes log it): once per elected term,
//     the term is revoked and invalid;
//   * revoked(term, reason): exactly once per elected term, same contender,
//     after term_ended, reason == term->revoked(), the term is invalid;
//   * send_release(name, token): never while the term with that name and token
//     is still unrevoked ("a term is always revoked before its lease is
//     released");
//   * stopped(who) / lock_failed(who): the contender has no live term, and
//     nothing is delivered for it afterwards;
//   * closed(): once, every elected term revoked, nothing but logs afterwards;
//   * watch(name) / unwatch(name): balanced per name, nothing watched at
//     closed() (kept apart, in watches(), not in events());
//   * every backend call has a positive timeout.
// expect_all_revoked() checks the pairing "every elected() is followed by
// exactly one revoked()" at a point where the test knows every term ended.
#ifndef SIMBA_TESTS_RECORDING_EFFECTS_H
#define SIMBA_TESTS_RECORDING_EFFECTS_H

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/node.h"
#include "core/term_state.h"
#include "core/time.h"

namespace simba::testing {

enum class Fx {
  kOpen,
  kKeepAlive,
  kAcquire,
  kRelease,
  kClose,
  kTermEnded,
  kElected,
  kRevoked,
  kLockFailed,
  kStopped,
  kSteppedDown,
  kSessionEvent,
  kClosed,
  kLog,
};

inline const char* fx_name(Fx f) {
  switch (f) {
    case Fx::kOpen:
      return "send_open";
    case Fx::kKeepAlive:
      return "send_keep_alive";
    case Fx::kAcquire:
      return "send_acquire";
    case Fx::kRelease:
      return "send_release";
    case Fx::kClose:
      return "send_close";
    case Fx::kTermEnded:
      return "term_ended";
    case Fx::kElected:
      return "elected";
    case Fx::kRevoked:
      return "revoked";
    case Fx::kLockFailed:
      return "lock_failed";
    case Fx::kStopped:
      return "stopped";
    case Fx::kSteppedDown:
      return "stepped_down";
    case Fx::kSessionEvent:
      return "session_event";
    case Fx::kClosed:
      return "closed";
    case Fx::kLog:
      return "log";
  }
  return "?";
}

inline const char* lock_failure_name(LockFailure f) {
  switch (f) {
    case LockFailure::kTimeout:
      return "TIMEOUT";
    case LockFailure::kBusy:
      return "BUSY";
    case LockFailure::kBackend:
      return "BACKEND";
    case LockFailure::kCanceled:
      return "CANCELED";
    case LockFailure::kRefused:
      return "REFUSED";
  }
  return "?";
}

// One recorded call.
struct FxCall {
  size_t seq = 0;  // position in the log
  Fx kind = Fx::kLog;
  TimePoint at{};  // the clock's time when recorded (zero without a clock)

  // Backend calls.
  CallId call = 0;
  std::string session;
  std::string name;    // acquire, release
  uint64_t token = 0;  // release
  // A permit's acquire (its ask) or release (its entry): send_acquire_permit
  // and send_release_permit are recorded as kAcquire and kRelease with these.
  EntryRef entry;
  PermitAsk ask;
  Duration lease{0};  // open, keep-alive
  Duration timeout{0};
  bool answered = false;  // the test took it (see take())

  // Contender callbacks.
  ContenderId who = 0;
  TermRef term;
  RevokeReason reason = RevokeReason::kNone;
  LockFailure failure = LockFailure::kCanceled;

  // Session events and logs.
  SessionEvent event = SessionEvent::kOpened;
  std::string detail;
  int level = 0;

  bool is_backend_call() const {
    return kind == Fx::kOpen || kind == Fx::kKeepAlive || kind == Fx::kAcquire ||
           kind == Fx::kRelease || kind == Fx::kClose;
  }
  std::string str() const {
    std::ostringstream o;
    o << "#" << seq << " t=" << at.time_since_epoch().count() << "ns " << fx_name(kind);
    if (is_backend_call()) {
      o << " call=" << call;
      if (!session.empty()) o << " session=" << session;
      if (!name.empty()) o << " name=" << name;
      if (kind == Fx::kRelease) o << " token=" << token;
      if (entry.kind != PermitKind::kLease) {
        o << " " << permit_kind_name(entry.kind) << "#" << entry.permit;
        if (kind == Fx::kAcquire) o << " size=" << ask.size << " intent=" << ask.intent;
      }
      o << " timeout=" << timeout.count() << "ns";
      if (answered) o << " (answered)";
    }
    if (who) o << " who=" << who;
    if (term) o << " term=" << term->name() << "/" << term->token();
    if (kind == Fx::kRevoked) o << " reason=" << revoke_reason_name(reason);
    if (kind == Fx::kLockFailed) o << " failure=" << lock_failure_name(failure);
    if (kind == Fx::kSessionEvent) o << " " << session_event_name(event) << " " << detail;
    if (kind == Fx::kLog) o << " [" << level << "] " << detail;
    return o.str();
  }
};

class RecordingEffects final : public Effects {
 public:
  explicit RecordingEffects(const Clock* clock = nullptr) : clock_(clock) {}
  RecordingEffects(const RecordingEffects&) = delete;
  RecordingEffects& operator=(const RecordingEffects&) = delete;

  ~RecordingEffects() override {
    // The online checks already reported every breach as it happened; here the
    // pairing of a closed node, in case closed() came from a path not checked.
    if (closed_count_ > 0) expect_all_revoked();
  }

  // --- Effects ----------------------------------------------------------------

  void send_open(CallId call, Duration lease, Duration timeout) override {
    FxCall& e = push(Fx::kOpen);
    e.call = call;
    e.lease = lease;
    e.timeout = timeout;
    check_backend_call(e);
  }
  void send_keep_alive(CallId call, const std::string& session, Duration lease,
                       Duration timeout) override {
    FxCall& e = push(Fx::kKeepAlive);
    e.call = call;
    e.session = session;
    e.lease = lease;
    e.timeout = timeout;
    check_backend_call(e);
  }
  void send_acquire(CallId call, const std::string& session, const std::string& name,
                    Duration timeout) override {
    FxCall& e = push(Fx::kAcquire);
    e.call = call;
    e.session = session;
    e.name = name;
    e.timeout = timeout;
    check_backend_call(e);
  }
  void send_release(CallId call, const std::string& session, const std::string& name,
                    uint64_t token, Duration timeout) override {
    FxCall& e = push(Fx::kRelease);
    e.call = call;
    e.session = session;
    e.name = name;
    e.token = token;
    e.timeout = timeout;
    check_backend_call(e);
    for (const auto& [ptr, t] : terms_) {
      if (!t.ended && t.entry.kind == PermitKind::kLease && t.term->name() == name &&
          t.term->token() == token && t.term->session_id() == session) {
        fail("release of " + name + " token " + std::to_string(token) +
             " while its term is not revoked yet");
      }
    }
  }
  void send_acquire_permit(CallId call, const std::string& session, const std::string& name,
                           const PermitAsk& ask, Duration timeout) override {
    FxCall& e = push(Fx::kAcquire);
    e.call = call;
    e.session = session;
    e.name = name;
    e.entry.kind = ask.kind;
    e.ask = ask;
    e.timeout = timeout;
    check_backend_call(e);
  }
  void send_release_permit(CallId call, const std::string& session, const std::string& name,
                           EntryRef entry, uint64_t token, Duration timeout) override {
    FxCall& e = push(Fx::kRelease);
    e.call = call;
    e.session = session;
    e.name = name;
    e.entry = entry;
    e.token = token;
    e.timeout = timeout;
    check_backend_call(e);
    for (const auto& [ptr, t] : terms_) {
      if (!t.ended && t.entry.kind == entry.kind && t.entry.permit == entry.permit &&
          t.term->name() == name && t.term->session_id() == session) {
        fail("release of " + name + " permit " + std::to_string(entry.permit) +
             " while its term is not revoked yet");
      }
    }
  }
  void send_close(CallId call, const std::string& session, Duration timeout) override {
    FxCall& e = push(Fx::kClose);
    e.call = call;
    e.session = session;
    e.timeout = timeout;
    check_backend_call(e);
  }
  // Kept apart from the events, so that every order check reads as before.
  void abandon(CallId call) override {
    bool sent = false;
    for (const FxCall& e : events_) sent = sent || (e.call == call && e.kind != Fx::kLog);
    if (!sent) fail("abandon of call " + std::to_string(call) + ", never sent");
    for (CallId a : abandoned_) {
      if (a == call) fail("abandon of call " + std::to_string(call) + " twice");
    }
    abandoned_.push_back(call);
  }
  // The calls the node abandoned (Effects::abandon), in order.
  const std::vector<CallId>& abandoned() const { return abandoned_; }

  // Watches go to their own log (watches()), not events(): the event
  // sequences the tests assert stay as they were.
  void watch(const std::string& name) override {
    watches_.push_back("+" + name);
    if (closed_count_ > 0) fail("watch of " + name + " after closed()");
    if (!watched_.insert(name).second) fail("watch of " + name + ", watched already");
  }
  void unwatch(const std::string& name) override {
    watches_.push_back("-" + name);
    if (closed_count_ > 0) fail("unwatch of " + name + " after closed()");
    if (watched_.erase(name) == 0) fail("unwatch of " + name + ", not watched");
  }

  // Terms that log their end.
  TermRef new_term(Contender& c, uint64_t token, std::shared_ptr<SessionClock> session) override {
    return TermRef(new RecordingTerm(*this, c.id, c.name, token, std::move(session)));
  }

  void term_ended(ContenderId who, const TermRef& term) {
    FxCall& e = push(Fx::kTermEnded);
    e.who = who;
    e.term = term;
    check_not_closed(e);
    TermRecord* t = record_of(term, e);
    if (!t) return;
    if (t->who != who)
      fail("term_ended for contender " + std::to_string(who) + ", elected by " +
           std::to_string(t->who));
    if (t->ended) fail("term_ended twice for " + term_str(term));
    if (term->revoked() == RevokeReason::kNone)
      fail("term_ended but not revoked: " + term_str(term));
    if (term->valid()) fail("term_ended but still valid: " + term_str(term));
    t->ended = true;
  }

  void elected(Contender& c, const TermRef& term) override {
    const ContenderId who = c.id;
    FxCall& e = push(Fx::kElected);
    e.who = who;
    e.term = term;
    check_not_closed(e);
    check_not_finished(who, e);
    if (!term) {
      fail("elected with a null term");
      return;
    }
    if (terms_.count(term.get())) fail("elected twice with the same term object " + term_str(term));
    // A reader's token is the name's write epoch: 0 before any writer (ADR 0046).
    if (term->token() == 0 && c.kind != ContenderKind::kRead) fail("elected with token 0");
    if (term->revoked() != RevokeReason::kNone) fail("elected a revoked term " + term_str(term));
    if (!term->valid()) fail("elected a term that is not valid " + term_str(term));
    // Permits of one name are held side by side; a lease's term is alone.
    for (const auto& [ptr, t] : terms_) {
      if (!t.revoked && t.term->name() == term->name() && !is_permit(c.kind) &&
          t.entry.kind == PermitKind::kLease) {
        fail("elected " + term_str(term) + " while " + term_str(t.term) +
             " of the same name is not revoked yet");
      }
    }
    TermRecord& r = terms_[term.get()];
    r.term = term;
    r.who = who;
    r.entry = EntryRef{permit_kind_of(c.kind), c.permit()};
    r.elected_seq = e.seq;
    elected_order_.push_back(term);
  }

  void revoked(Contender& c, const TermRef& term) override {
    const ContenderId who = c.id;
    const RevokeReason reason = term->revoked();
    FxCall& e = push(Fx::kRevoked);
    e.who = who;
    e.term = term;
    e.reason = reason;
    check_not_closed(e);
    check_not_finished(who, e);
    TermRecord* t = record_of(term, e);
    if (!t) return;
    if (t->who != who)
      fail("revoked for contender " + std::to_string(who) + ", elected by " +
           std::to_string(t->who));
    if (t->revoked) fail("revoked twice: " + term_str(term));
    if (!t->ended) fail("revoked() before term_ended() for " + term_str(term));
    if (reason == RevokeReason::kNone) fail("revoked with reason NONE: " + term_str(term));
    if (reason != term->revoked()) {
      fail(std::string("revoked with ") + revoke_reason_name(reason) + " but the term says " +
           revoke_reason_name(term->revoked()));
    }
    if (term->valid()) fail("revoked but still valid: " + term_str(term));
    if (term->remaining() != Duration::zero())
      fail("revoked but remaining() > 0: " + term_str(term));
    t->revoked = true;
    t->reason = reason;
  }

  void lock_failed(Contender& c, LockFailure why) override {
    const ContenderId who = c.id;
    FxCall& e = push(Fx::kLockFailed);
    e.who = who;
    e.failure = why;
    check_not_closed(e);
    finish(who, e);
  }

  void stopped(Contender& c) override {
    const ContenderId who = c.id;
    FxCall& e = push(Fx::kStopped);
    e.who = who;
    check_not_closed(e);
    finish(who, e);
  }

  void stepped_down(Contender& c) override {
    const ContenderId who = c.id;
    FxCall& e = push(Fx::kSteppedDown);
    e.who = who;
    check_not_closed(e);
    check_not_finished(who, e);
  }

  void session_event(SessionEvent ev, const std::string& detail_json) override {
    FxCall& e = push(Fx::kSessionEvent);
    e.event = ev;
    e.detail = detail_json;
    check_not_closed(e);
  }

  void closed() override {
    FxCall& e = push(Fx::kClosed);
    if (closed_count_++ > 0) fail("closed() twice");
    for (const std::string& n : watched_) fail("closed() with " + n + " still watched");
    for (const auto& [ptr, t] : terms_) {
      if (!t.revoked) fail("closed() with " + term_str(t.term) + " not revoked");
    }
    (void)e;
  }

  void log(int level, const std::string& line) override {
    FxCall& e = push(Fx::kLog);
    e.level = level;
    e.detail = line;
  }

  // --- Reading the log ---------------------------------------------------------

  const std::vector<FxCall>& events() const { return events_; }
  // The position of the next event: events recorded later have seq >= mark().
  size_t mark() const { return events_.size(); }

  std::vector<FxCall> of(Fx kind, size_t since = 0) const {
    std::vector<FxCall> out;
    for (size_t i = since; i < events_.size(); ++i) {
      if (events_[i].kind == kind) out.push_back(events_[i]);
    }
    return out;
  }
  size_t count(Fx kind, size_t since = 0) const { return of(kind, since).size(); }
  std::vector<FxCall> for_contender(ContenderId who, size_t since = 0) const {
    std::vector<FxCall> out;
    for (size_t i = since; i < events_.size(); ++i) {
      if (events_[i].who == who) out.push_back(events_[i]);
    }
    return out;
  }
  std::vector<SessionEvent> session_events(size_t since = 0) const {
    std::vector<SessionEvent> out;
    for (const FxCall& e : of(Fx::kSessionEvent, since)) out.push_back(e.event);
    return out;
  }
  // The kinds of every event other than logs and session events since `since`,
  // for order checks.
  std::vector<Fx> kinds(size_t since = 0) const {
    std::vector<Fx> out;
    for (size_t i = since; i < events_.size(); ++i) {
      if (events_[i].kind != Fx::kLog && events_[i].kind != Fx::kSessionEvent) {
        out.push_back(events_[i].kind);
      }
    }
    return out;
  }

  // Backend calls of `kind` the test has not taken yet, oldest first.
  std::vector<FxCall> pending(Fx kind) const {
    std::vector<FxCall> out;
    for (const FxCall& e : events_) {
      if (e.kind == kind && !e.answered) out.push_back(e);
    }
    return out;
  }
  size_t pending_count(Fx kind) const { return pending(kind).size(); }
  // Takes the oldest call of `kind` not taken yet (for the test to answer). A
  // gtest failure, and a default FxCall, if there is none.
  FxCall take(Fx kind) {
    for (FxCall& e : events_) {
      if (e.kind == kind && !e.answered) {
        e.answered = true;
        return e;
      }
    }
    ADD_FAILURE() << "no pending " << fx_name(kind) << "\n" << dump();
    return FxCall{};
  }
  // Takes the newest call of `kind` not taken yet.
  FxCall take_last(Fx kind) {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
      if (it->kind == kind && !it->answered) {
        it->answered = true;
        return *it;
      }
    }
    ADD_FAILURE() << "no pending " << fx_name(kind) << "\n" << dump();
    return FxCall{};
  }
  // Marks a call as taken (when answered by id).
  void mark_answered(CallId call) {
    for (FxCall& e : events_) {
      if (e.is_backend_call() && e.call == call) e.answered = true;
    }
  }
  // The recorded backend call with this id.
  std::optional<FxCall> call(CallId id) const {
    for (const FxCall& e : events_) {
      if (e.is_backend_call() && e.call == id) return e;
    }
    return std::nullopt;
  }

  // --- Watches ----------------------------------------------------------------

  // Every watch ("+name") and unwatch ("-name") so far, in order.
  const std::vector<std::string>& watches() const { return watches_; }
  std::vector<std::string> watches_since(size_t mark) const {
    return {watches_.begin() + static_cast<std::ptrdiff_t>(std::min(mark, watches_.size())),
            watches_.end()};
  }
  bool watching(const std::string& name) const { return watched_.count(name) != 0; }

  // --- Terms ------------------------------------------------------------------

  // Every term elected so far, in order.
  const std::vector<TermRef>& elected_terms() const { return elected_order_; }
  TermRef last_term() const { return elected_order_.empty() ? nullptr : elected_order_.back(); }
  // Elected and not yet revoked().
  size_t live_terms() const {
    size_t n = 0;
    for (const auto& [ptr, t] : terms_) n += t.revoked ? 0 : 1;
    return n;
  }
  bool was_revoked(const TermRef& term) const {
    auto it = terms_.find(term.get());
    return it != terms_.end() && it->second.revoked;
  }
  RevokeReason revoked_reason(const TermRef& term) const {
    auto it = terms_.find(term.get());
    return it == terms_.end() ? RevokeReason::kNone : it->second.reason;
  }
  bool finished(ContenderId who) const { return finished_.count(who) != 0; }
  bool closed_seen() const { return closed_count_ > 0; }

  // The seed's pairing: every elected() was followed by exactly one revoked()
  // for the same term (exactly-once is checked as revoked() arrives).
  void expect_all_revoked() const {
    for (const auto& [ptr, t] : terms_) {
      if (!t.revoked) {
        ADD_FAILURE() << "elected " << term_str(t.term) << " (event #" << t.elected_seq
                      << ") was never revoked\n"
                      << dump();
      }
    }
  }

  std::string dump() const {
    std::string s = "events:\n";
    for (const FxCall& e : events_) s += "  " + e.str() + "\n";
    return s;
  }

 private:
  class RecordingTerm final : public TermState {
   public:
    RecordingTerm(RecordingEffects& fx, ContenderId who, LeaseName name, uint64_t token,
                  std::shared_ptr<SessionClock> session)
        : TermState(std::move(name), token, std::move(session)), fx_(fx), who_(who) {}

   private:
    void ended() override { fx_.term_ended(who_, TermRef(this)); }
    RecordingEffects& fx_;
    const ContenderId who_;
  };

  struct TermRecord {
    TermRef term;
    ContenderId who = 0;
    EntryRef entry;  // a permit's kind and id
    size_t elected_seq = 0;
    bool ended = false;
    bool revoked = false;
    RevokeReason reason = RevokeReason::kNone;
  };

  static std::string term_str(const TermRef& t) {
    if (!t) return "<null term>";
    return t->name() + "/" + std::to_string(t->token()) + "@" + t->session_id();
  }

  FxCall& push(Fx kind) {
    FxCall e;
    e.seq = events_.size();
    e.kind = kind;
    if (clock_) e.at = clock_->now();
    events_.push_back(std::move(e));
    return events_.back();
  }

  void fail(const std::string& what) const {
    ADD_FAILURE() << "Effects rule broken: " << what << "\n" << dump();
  }

  void check_not_closed(const FxCall& e) const {
    if (closed_count_ > 0) fail(std::string(fx_name(e.kind)) + " after closed()");
  }
  void check_backend_call(const FxCall& e) const {
    check_not_closed(e);
    if (e.timeout <= Duration::zero()) fail(std::string(fx_name(e.kind)) + " with a timeout <= 0");
  }
  void check_not_finished(ContenderId who, const FxCall& e) const {
    if (finished_.count(who)) {
      fail(std::string(fx_name(e.kind)) + " for contender " + std::to_string(who) +
           " after it was stopped / failed");
    }
  }
  void finish(ContenderId who, const FxCall& e) {
    check_not_finished(who, e);
    for (const auto& [ptr, t] : terms_) {
      if (t.who == who && !t.revoked) {
        fail(std::string(fx_name(e.kind)) + " for contender " + std::to_string(who) + " with " +
             term_str(t.term) + " not revoked");
      }
    }
    finished_.insert(who);
  }
  TermRecord* record_of(const TermRef& term, const FxCall& e) {
    auto it = terms_.find(term.get());
    if (it == terms_.end()) {
      fail(std::string(fx_name(e.kind)) + " for a term never elected: " + term_str(term));
      return nullptr;
    }
    return &it->second;
  }

  const Clock* clock_;
  std::vector<FxCall> events_;
  std::vector<CallId> abandoned_;
  std::map<const TermState*, TermRecord> terms_;
  std::vector<TermRef> elected_order_;
  std::set<ContenderId> finished_;
  std::vector<std::string> watches_;
  std::set<std::string> watched_;
  int closed_count_ = 0;
};

}  // namespace simba::testing

#endif
