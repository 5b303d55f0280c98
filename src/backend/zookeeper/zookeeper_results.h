// Decoders of what the ZooKeeper backend reads back: the session markers' data,
// the Stat of the token and lease nodes, turned into the core's reply types.
// Kept apart from the connection code so that tests/fuzz/ can feed them any
// node data and any Stat: nodes under the chroot can be written by any client
// with the right ACL, and must never make them overflow or misreport a token.
#ifndef SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_RESULTS_H
#define SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_RESULTS_H

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/backend_types.h"

namespace simba {

// A ZooKeeper session id as Simba names it: 16 lowercase hex digits.
std::string zk_hex_id(int64_t id);

// The data of {chroot}/sessions/{sid}: "{timeout_ms} {client name}".
struct ZkSessionRow {
  std::string client;
  int64_t timeout_ms = -1;  // -1 when the data does not start with a valid timeout
};
ZkSessionRow parse_session_marker(const std::string& data);

// The token an acquire won: the token node's mzxid after the multi, which must
// be positive. kOk with the token, or kError.
AcquireReply decode_zk_acquire_token(const struct Stat& token_stat);

// The inspect reply from the nodes read: the session markers (by sid), the
// names asked, and the Stat of each name's token and lease node found.
InspectReply build_zk_inspect(const std::map<std::string, ZkSessionRow>& sessions,
                              const std::set<std::string>& asked,
                              const std::map<std::string, struct Stat>& tokens,
                              const std::map<std::string, struct Stat>& leases);

// --- permits (ADR 0046) ------------------------------------------------------
// A resource node {chroot}/sem/{name} or {chroot}/rw/{name}: data = the
// semaphore's size or the write epoch, version = the last permit id taken.
// Its children, the entries, are "{kind}-{permit:010}" (sem-, read-, write-,
// intent-), each ephemeral with data = its token.

// "sem-0000000007" and back; nullopt for a name that is no entry of ours.
std::string zk_permit_child(PermitKind kind, uint64_t permit);
struct ZkPermitChild {
  PermitKind kind = PermitKind::kSemaphore;
  uint64_t permit = 0;
};
std::optional<ZkPermitChild> parse_zk_permit_child(const std::string& child);
// A resource node's or an entry's data: a decimal number below 2^63, or nullopt
// ("" reads as 0: a resource node never written).
std::optional<uint64_t> parse_zk_permit_number(const std::string& data);

// What acquire_permit does given a view of the resource node (its version and
// data) and its children, all read at or after that version: grant (a multi
// guarded by `version` setting the data to `data` and creating the entry
// `permit`, deleting the writer's intent `ask.intent` if `drop_intent`), leave
// an intent (the same multi, creating intent-`permit`), or answer at once
// (Held with the kept intent `permit`, Refused with `size`, or an error).
// `ask.intent` must be an intent of the asking session (0 otherwise).
struct ZkPermitPlan {
  enum What { kGrant, kIntent, kHeld, kRefused, kError } what = kError;
  uint64_t permit = 0;
  uint64_t token = 0;
  std::string data;
  bool drop_intent = false;
  uint32_t size = 0;
  std::string error;
};
ZkPermitPlan plan_zk_permit(const PermitAsk& ask, int32_t version, const std::string& data,
                            const std::vector<std::string>& children);

// The inspect row of entry `child` of `name` (data and Stat read from it), or
// nullopt when it is no entry; the holder's remaining time from `sessions`.
std::optional<LeaseInfo> zk_permit_row(const std::string& name, const std::string& child,
                                       const std::string& data, const struct Stat& st,
                                       const std::map<std::string, ZkSessionRow>& sessions);

}  // namespace simba

#endif
