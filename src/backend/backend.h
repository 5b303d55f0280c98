// The internal backend interface: a handful of asynchronous operations, each one
// round trip to the store. Backends translate; they never decide policy (when to
// retry, when a term ends): that is the core's job.
//
// Every method is called on the client's loop thread, and every callback runs
// on that thread, never inside the call that started it. After shutdown() no
// completion runs.
//
// Timeouts (ADR 0039): the caller alone times a call. A backend completes a
// call exactly once, from what its transport says (an answer, an error, a
// connection lost), never with kTimeout from a timer of its own. Whoever
// started a call owns its timeout: the core for the session's calls
// (Effects::abandon), the engine for the calls it makes itself (inspect).
// When it gives up, it calls abandon(call): the backend then ends the call on
// a later loop turn, with the answer if its transport already holds it, else
// with kError, and drops a connection the unanswered call may have left stuck
// (its other calls fail with it), as a timeout did before. `timeout` stays the
// call's budget for what a transport needs one for (a server-side statement
// timeout, how long WAIT waits); it arms no completion.
#ifndef SIMBA_BACKEND_BACKEND_H
#define SIMBA_BACKEND_BACKEND_H

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend_types.h"
#include "core/time.h"

typedef struct uv_loop_s uv_loop_t;

namespace simba {

// Where a backend sends its log lines (level as SIMBA_LOG_*). Loop thread only.
using LogFn = std::function<void(int level, const std::string& line)>;

class Backend {
 public:
  using OpenCb = std::function<void(const OpenReply&)>;
  using KeepAliveCb = std::function<void(const KeepAliveReply&)>;
  using AcquireCb = std::function<void(const AcquireReply&)>;
  using DoneCb = std::function<void(const DoneReply&)>;
  using ReleaseCb = std::function<void(const ReleaseReply&)>;
  // `grant`: whom the release handed the lease to (ADR 0047), empty when freed.
  using ReleasedFn = std::function<void(const std::string& name, const Grant& grant)>;
  using InspectCb = std::function<void(const InspectReply&)>;
  using RunCb = std::function<void(const RunReply&)>;
  // Names a call the backend started, for abandon(); 0 names none.
  using CallRef = uint64_t;

  virtual ~Backend() = default;

  // A new session valid for `lease` on the backend's clock; never reuses an id.
  virtual CallRef open_session(Duration lease, Duration timeout, OpenCb cb) = 0;
  // Extends a live session and lists every lease it holds; kExpired otherwise.
  virtual CallRef keep_alive(const std::string& session, Duration lease, Duration timeout,
                             KeepAliveCb cb) = 0;
  // kOk with a new token, kHeld (with the holder's remaining time if known), or
  // kExpired when the session is gone.
  virtual CallRef acquire(const std::string& session, const std::string& name, Duration timeout,
                          AcquireCb cb) = 0;
  // Frees the lease only where both session and token match.
  virtual CallRef release(const std::string& session, const std::string& name, uint64_t token,
                          Duration timeout, DoneCb cb) = 0;
  // acquire() with a candidate ask (ADR 0047). An empty ask is acquire().
  // Otherwise kHeld leaves a candidate entry (kCandidate, name, id) -> (session,
  // 0) with ask.priority and ask.client when ask.leave, or keeps ask.id,
  // answering its id in AcquireReply::permit; kOk deletes ask.id in the same
  // call; and a session that holds the lease through a grant while ask.id is
  // gone gets kOk with that token. Backends without candidates yet answer
  // kError kCandidatesNotSupportedYet to a non-empty ask.
  virtual CallRef acquire_candidate(const std::string& session, const std::string& name,
                                    const CandidateAsk& ask, Duration timeout, AcquireCb cb) = 0;
  // release() that hands the lease to a candidate (ADR 0047): where session and
  // token match, the live candidate of client `target` (when given and there
  // is one), else the highest priority, then the earliest, gets it in the
  // same call (token + 1, holder its session, its entry deleted); with none
  // the lease is freed. The reply and the broadcast say who got it. The
  // default serves backends without candidates: a plain release, and a named
  // target is absent.
  virtual CallRef release_handoff(const std::string& session, const std::string& name,
                                  uint64_t token, const std::string& target, Duration timeout,
                                  ReleaseCb cb) {
    return release(session, name, token, timeout,
                   [cb = std::move(cb), absent = !target.empty()](const DoneReply& r) {
                     ReleaseReply reply;
                     reply.outcome = r.outcome;
                     reply.error = r.error;
                     reply.target_absent = absent && r.outcome == Outcome::kOk;
                     cb(reply);
                   });
  }
  // A permit of semaphore `name` (ask.kind kSemaphore, its size ask.size) or
  // of read/write lock `name` (kRead, kWrite), as ADR 0046 says: kOk with the
  // permit's id and token; kHeld when the semaphore is full or a writer, a
  // reader or (for a read) a live session's intent is in the way, a blocking
  // writer's intent left or kept in the same call (AcquireReply::permit; a
  // grant deletes the writer's intent ask.intent); kRefused with the size the
  // semaphore has when ask.size differs; kExpired when the session is gone.
  virtual CallRef acquire_permit(const std::string& session, const std::string& name,
                                 const PermitAsk& ask, Duration timeout, AcquireCb cb) = 0;
  // Frees the entry (kind, name, permit) only where session and token match
  // (an intent's token is 0), and broadcasts its resource's release
  // (permit_resource) when a permit went. A kCandidate entry (token 0) is
  // withdrawn this way too (memory:// only until ADR 0047 step 2).
  virtual CallRef release_permit(const std::string& session, const std::string& name,
                                 PermitKind kind, uint64_t permit, uint64_t token, Duration timeout,
                                 DoneCb cb) = 0;
  // Writes `name`'s run record (ADR 0048) only while the lease is held by
  // `session` with `token` (the guard of a release), else kRefused kNotHolder.
  // A start (outcome kRunning) is applied only if there is no record or the
  // stored period id is below record.period_id; an end (any other outcome)
  // only if the stored period id equals it; else kRefused kPeriod. kExpired
  // when the session is gone. The record is per name: a release or the
  // holder's expiry keeps it, and acquire's kOk answers it. Backends without
  // it yet answer kError kRunRecordNotSupportedYet.
  virtual CallRef write_run(const std::string& session, const std::string& name, uint64_t token,
                            const RunRecord& record, Duration timeout, RunCb cb) = 0;
  // Frees every lease of the session at once and ends it; a backend with
  // candidates hands each lease over as release_handoff would.
  virtual CallRef close_session(const std::string& session, Duration timeout, DoneCb cb) = 0;
  // Reads every live session and the leases `names` (every lease the backend
  // knows when empty), for operators. Not one of the session's calls: it may
  // take more than one round trip and never changes anything.
  virtual CallRef inspect(const std::vector<std::string>& names, Duration timeout,
                          InspectCb cb) = 0;
  // The caller gave up on `call` (see the top of this file); a call that
  // already completed is ignored. Never completes anything inside itself.
  virtual void abandon(CallRef call) = 0;
  // Release broadcast: `fn(name, grant)` when any node releases a watched
  // `name`; `grant` says whom a handoff gave it to (ADR 0047), else empty.
  // A permit's resource is watched and broadcast as permit_resource(kind, name).
  // Best effort (the core's retry schedule is the safety net), and it may
  // come more than once, or for an unwatched name that was watched a moment
  // ago; a backend never delivers it for a name nobody here ever watched.
  virtual void on_released(ReleasedFn fn) = 0;
  // The client wants release broadcasts of `name` from now on (watch), or no
  // longer (unwatch). The client decides (the core for its contenders, the
  // engine for its observers; ADR 0040) and calls them balanced, once per
  // name: the backend keeps no count and infers nothing. A backend that
  // cannot rule out a release between the caller's last look at the name and
  // the watch taking effect reports `fn(name)` once after watch().
  virtual void watch(const std::string& name) = 0;
  virtual void unwatch(const std::string& name) = 0;
  // Stops all I/O and closes every handle; `done` runs once nothing of the
  // backend is left on the loop. Pending calls are dropped without completion.
  virtual void shutdown(std::function<void()> done) = 0;
};

struct MemoryFaults;

// What a backend gets from the client that owns it.
struct BackendContext {
  uv_loop_t* loop = nullptr;
  LogFn log;
  std::string client_name;
  // memory:// only: the client's test-only fault switches.
  std::shared_ptr<MemoryFaults> memory_faults;
};

enum class BackendError { kNone, kInvalid, kUnsupported };

// What a backend without candidates answers to a non-empty CandidateAsk.
constexpr char kCandidatesNotSupportedYet[] =
    "candidates are not supported on this backend yet (ADR 0047 step 2)";
inline AcquireReply candidates_not_supported_yet() {
  AcquireReply r;
  r.error = kCandidatesNotSupportedYet;
  return r;
}

// What a backend without run records (ADR 0048) answers to write_run.
constexpr char kRunRecordNotSupportedYet[] =
    "run records are not supported on this backend yet (ADR 0048)";
inline RunReply run_record_not_supported_yet() {
  RunReply r;
  r.error = kRunRecordNotSupportedYet;
  return r;
}
// The same through a DoneCb, for backends that fail calls as kDone ones.
inline std::function<void(const DoneReply&)> run_record_not_supported_done(
    std::function<void(const RunReply&)> cb) {
  return [cb = std::move(cb)](const DoneReply&) { cb(run_record_not_supported_yet()); };
}

// Makes the backend for `url`. On failure returns nullptr, sets `why` to
// kInvalid (malformed URL) or kUnsupported (unknown scheme, or not built in) and
// `error` to a message that never contains a password.
std::unique_ptr<Backend> make_backend(const BackendContext& ctx, const std::string& url,
                                      BackendError* why, std::string* error);

// The same URL with any password replaced by "***", for logs and snapshots.
std::string redact_url(const std::string& url);

// The DDL a DBA applies by hand for the backend of `url` (`simba schema`): the
// same statements the backend would install itself, for the URL's own options
// (PostgreSQL's schema=). Parses the URL only; never connects. On failure returns
// false with `why` kInvalid (malformed URL) or kUnsupported (a backend without a
// schema, an unknown scheme, or one not built in) and `error` a message that
// never contains a password.
bool backend_schema_script(const std::string& url, std::string* text, BackendError* why,
                           std::string* error);

}  // namespace simba

#endif
