// What a backend answers. Pure data shared by the core state machines, the
// backends and the simulation.
#ifndef SIMBA_CORE_BACKEND_TYPES_H
#define SIMBA_CORE_BACKEND_TYPES_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace simba {

enum class Outcome {
  kOk,       // the operation succeeded (for acquire: the lease is ours)
  kHeld,     // acquire: another live session holds the lease
  kExpired,  // the session does not exist (any more) on the backend
  kError,    // the backend answered an error or could not be reached
  kTimeout,  // no answer within the call's timeout
  kRefused,  // acquire_permit: the semaphore has another size (AcquireReply::size);
             // write_run: not applied (RunReply::refused says why)
};

const char* outcome_name(Outcome o);

// What an entry a session holds is (ADR 0046): a lease (a lock's or an
// election's), or a permit of a semaphore or a read/write lock, or a waiting
// writer's intent, or a waiting election's or lock's candidate entry of lease
// NAME (ADR 0047: token 0, its id from the name's candidate counter).
// Semaphore NAME, read/write lock NAME and lease NAME are unrelated resources.
enum class PermitKind : uint8_t { kLease = 0, kSemaphore, kRead, kWrite, kIntent, kCandidate };
// "lease", "semaphore", "read", "write", "intent", "candidate".
const char* permit_kind_name(PermitKind k);
// The name release broadcasts of an entry's resource travel under
// (Backend::watch, on_released): NAME for a lease, "sem/NAME" for a semaphore,
// "rw/NAME" for a read/write lock (its reads, writes and intents), NAME for a
// lease's candidate (a grant travels in the lease's own release). '/' is
// outside the lease-name rule, so these never meet a lease's name.
std::string permit_resource(PermitKind k, std::string_view name);

struct OwnedLease {
  std::string name;
  uint64_t token = 0;
  PermitKind kind = PermitKind::kLease;
  uint64_t permit = 0;  // a permit's or an intent's id; 0 for a lease
  bool operator==(const OwnedLease& o) const {
    return name == o.name && token == o.token && kind == o.kind && permit == o.permit;
  }
};

// What acquire_permit asks for (ADR 0046).
struct PermitAsk {
  PermitKind kind = PermitKind::kSemaphore;  // kSemaphore, kRead or kWrite
  uint32_t size = 0;                         // kSemaphore: the size the caller names
  uint64_t intent = 0;                       // kWrite: the intent this writer left before (0: none)
  // kWrite: a blocking writer, which leaves (or keeps) an intent when Held; a
  // try-write leaves none.
  bool leave_intent = false;
};

// What an acquire of a lease asks besides the lease (ADR 0047): whether to
// leave a candidate entry when Held, or the one it left before. Empty (the
// default) is a plain acquire.
struct CandidateAsk {
  // Leave a candidate entry when Held, or keep `id` (a try-once lock leaves none).
  bool leave = false;
  uint64_t id = 0;       // the candidate entry this contender left before (0: none)
  int32_t priority = 0;  // higher is chosen first; equal ones by arrival
  std::string client;    // the client's name (client.name), for a transfer's target
  bool empty() const { return !leave && id == 0; }
};

// Who a release handed a lease to (ADR 0047); empty when it was freed.
struct Grant {
  std::string session;
  uint64_t token = 0;
  bool empty() const { return session.empty(); }
  bool operator==(const Grant& o) const { return session == o.session && token == o.token; }
};

// A schedule's last run (ADR 0048), one per lease name, stored beside the
// lease: it outlives the lease's release and its holder's expiry.
enum class RunOutcome : uint8_t { kRunning = 0, kOk, kFailed, kAbandoned };
// "running", "ok", "failed", "abandoned".
const char* run_outcome_name(RunOutcome o);
struct RunRecord {
  int64_t period_id = 0;   // the period's scheduled instant, UTC epoch ms
  int64_t started_ms = 0;  // the writer's wall clock (or the backend's): display only
  int64_t ended_ms = 0;    // 0 while running
  uint64_t token = 0;      // the term that started the run
  RunOutcome outcome = RunOutcome::kRunning;
  bool operator==(const RunRecord& o) const {
    return period_id == o.period_id && started_ms == o.started_ms && ended_ms == o.ended_ms &&
           token == o.token && outcome == o.outcome;
  }
};

// Why write_run refused (Outcome::kRefused).
enum class RunRefusal : uint8_t {
  kNone,
  kNotHolder,  // the lease is not held by that session with that token: a stale term
  kPeriod,     // a start at or below the stored period id, or an end of another period
};

// What write_run answers: kOk (applied), kRefused (not applied; `refused` says
// why), kExpired (the session is gone), kError, kTimeout.
struct RunReply {
  Outcome outcome = Outcome::kError;
  RunRefusal refused = RunRefusal::kNone;
  std::optional<RunRecord> stored{};  // kOk, kRefused: the name's record after the call
  std::string error;
};

struct OpenReply {
  Outcome outcome = Outcome::kError;
  std::string session_id;  // kOk: a new id, never reused
  Duration remaining{0};   // kOk: the validity the backend granted, on its clock
  std::string error;       // kError: the backend's words
};

struct KeepAliveReply {
  Outcome outcome = Outcome::kError;  // kOk, kExpired, kError, kTimeout
  Duration remaining{0};              // kOk: remaining validity measured by the backend
  std::vector<OwnedLease> owned;      // kOk: every lease this session holds
  std::string error;
};

struct AcquireReply {
  Outcome outcome = Outcome::kError;  // kOk, kHeld, kExpired, kError, kTimeout
  uint64_t token = 0;                 // kOk: the new term's token
  Duration holder_remaining{-1};      // kHeld: the holder's remaining validity, or negative
  std::string error;
  // acquire_permit: kOk the permit's id; kHeld the id of the writer's intent
  // left or kept (0: none). acquire_candidate: kHeld the candidate entry's id
  // left or kept (0: none).
  uint64_t permit = 0;
  uint32_t size = 0;  // acquire_permit kRefused: the size the semaphore has
  // acquire, acquire_candidate kOk: the name's run record (ADR 0048), if any,
  // so that a new leader reads it in the same call.
  std::optional<RunRecord> run{};
};

struct DoneReply {
  Outcome outcome = Outcome::kError;  // kOk, kExpired, kError, kTimeout
  std::string error;
};

// What release_handoff answers (ADR 0047): kOk, kExpired, kError, kTimeout as
// DoneReply; with kOk, who got the lease.
struct ReleaseReply {
  Outcome outcome = Outcome::kError;
  std::string error;
  Grant grant;                 // the chosen candidate's session and new token; empty: freed
  bool target_absent = false;  // a target was named but had no live candidate:
                               // the lease went as without one (grant says where)
};

// What inspect() reads: an operator's view of the backend (`simba status`).
// Never used for decisions: it may be stale by the time anyone reads it.
struct SessionInfo {
  std::string id;
  std::string client_name;  // as the session's client configured it ("" if unknown)
  Duration remaining{0};    // on the backend's clock
};

struct LeaseInfo {
  std::string name;
  uint64_t token = 0;                    // the last token granted for the name
  std::string holder;                    // the holding live session, "" when free
  Duration holder_remaining{-1};         // the holder's remaining validity, or negative
  PermitKind kind = PermitKind::kLease;  // a permit's row: its kind and id (ADR 0046)
  uint64_t permit = 0;
  std::optional<RunRecord> run{};  // a lease's run record (ADR 0048), if any
};

struct InspectReply {
  Outcome outcome = Outcome::kError;  // kOk, kError, kTimeout
  std::vector<SessionInfo> sessions;  // every live session
  std::vector<LeaseInfo> leases;      // the names asked for (all known ones if none)
  std::string error;
};

}  // namespace simba

#endif
