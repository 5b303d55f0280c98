// Decoders of the Redis backend's replies: what each Lua script (and the
// subscriber connection) answers, turned into the core's reply types. Kept apart
// from the connection code so that tests/fuzz/ can feed them any reply the
// hiredis reader can produce: a server (or a network) Simba does not control
// must never make them read out of bounds or overflow.
#ifndef SIMBA_BACKEND_REDIS_REDIS_REPLIES_H
#define SIMBA_BACKEND_REDIS_REDIS_REPLIES_H

#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include "core/backend_types.h"

namespace simba {

// Gives `reader` (a fresh one, or an async context's before its first read)
// Simba's limits on what a server may make it allocate: hiredis 0.14 allocates
// an array's element table as soon as it reads the count, so "*2000000000\r\n"
// (14 bytes) would otherwise cost 16 GB. An array longer than
// kMaxReplyElements is refused as if out of memory: the reader fails and the
// connection is dropped.
void limit_redis_reader(redisReader* reader);
// A new reader with those limits (freed with redisReaderFree), or nullptr.
redisReader* make_redis_reader();
// Elements an array reply may have: Simba's longest replies (inspect) carry 5
// per lease name (and a run record's 5 in an array of its own); 4M elements
// is 800 thousand leases, a 32 MB table.
inline constexpr int kMaxReplyElements = 4 * 1024 * 1024;

// The reply's string (status, error or bulk string), "" for any other type.
std::string reply_str(const redisReply* r);
// An integer reply, or a string reply holding exactly a decimal integer.
bool reply_int(const redisReply* r, long long* out);

// Each decoder takes a reply that is neither NULL nor an error (the caller
// handles those) and fills every field of the result; on a malformed reply
// the result has outcome kError and an error message.
OpenReply decode_open_reply(const redisReply* r, const std::string& session_id);
KeepAliveReply decode_keep_alive_reply(const redisReply* r);
AcquireReply decode_acquire_reply(const redisReply* r);
AcquireReply decode_acquire_permit_reply(const redisReply* r);
InspectReply decode_inspect_reply(const redisReply* r);
RunReply decode_write_run_reply(const redisReply* r);
// A run record (ADR 0048) from its five fields (redis_layout::kRunFields) at
// `e`; false when one is malformed.
bool decode_run_record(const redisReply* const* e, RunRecord* out);

// A deep copy of a reply, for an answer that must outlive its callback (a
// write held until WAIT answers); freed by its own deleter, not by hiredis.
struct ReplyCopyFree {
  void operator()(redisReply* r) const;
};
using ReplyCopy = std::unique_ptr<redisReply, ReplyCopyFree>;
ReplyCopy copy_reply(const redisReply* r);

// A Sentinel's answer to SENTINEL get-master-addr-by-name: {ip, port}. False
// (with `why` set) for nil (the master is unknown) or anything malformed.
bool decode_master_addr(const redisReply* r, std::string* ip, int* port, std::string* why);

// A +switch-master message on a Sentinel's pub/sub connection:
// "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT". False for any other message.
bool decode_switch_master(const redisReply* r, std::string* name, std::string* ip, int* port);

// A message on the subscriber connection, {kind, channel, payload}.
struct SubscriberEvent {
  enum Kind { kIgnored, kReleased, kSubscribed } kind = kIgnored;
  std::string name;  // the lease name released, or whose channel was subscribed
};
// `channel_head` is "{prefix}:released:".
SubscriberEvent decode_subscriber_message(const redisReply* r, const std::string& channel_head);

}  // namespace simba

#endif
