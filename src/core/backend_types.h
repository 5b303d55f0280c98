// What a backend answers. Pure data shared by the core state machines, the
// backends and the simulation.
#ifndef SIMBA_CORE_BACKEND_TYPES_H
#define SIMBA_CORE_BACKEND_TYPES_H

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"

namespace simba {

enum class Outcome {
  kOk,       // the operation succeeded (for acquire: the lease is ours)
  kHeld,     // acquire: another live session holds the lease
  kExpired,  // the session does not exist (any more) on the backend
  kError,    // the backend answered an error or could not be reached
  kTimeout,  // no answer within the call's timeout
};

const char* outcome_name(Outcome o);

struct OwnedLease {
  std::string name;
  uint64_t token = 0;
  bool operator==(const OwnedLease& o) const { return name == o.name && token == o.token; }
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
};

struct DoneReply {
  Outcome outcome = Outcome::kError;  // kOk, kExpired, kError, kTimeout
  std::string error;
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
  uint64_t token = 0;             // the last token granted for the name
  std::string holder;             // the holding live session, "" when free
  Duration holder_remaining{-1};  // the holder's remaining validity, or negative
};

struct InspectReply {
  Outcome outcome = Outcome::kError;  // kOk, kError, kTimeout
  std::vector<SessionInfo> sessions;  // every live session
  std::vector<LeaseInfo> leases;      // the names asked for (all known ones if none)
  std::string error;
};

}  // namespace simba

#endif
