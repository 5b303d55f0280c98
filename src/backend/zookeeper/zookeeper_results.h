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
#include <set>
#include <string>

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

}  // namespace simba

#endif
