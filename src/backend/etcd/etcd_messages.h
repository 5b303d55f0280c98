// The etcd backend's key layout and its messages: protobuf encoders for the
// requests and decoders for the answers (etcd_rpc.proto, by protoc-c), pure
// functions of bytes, so that they can be fuzzed without a server.
//
// Key layout ({p} = the URL's prefix, default /simba; ADR 0045):
//   {p}/s/{sid}   the session's marker, attached to its etcd lease; value = the
//                 client's name (for inspect). sid = the lease id in hex.
//   {p}/l/{name}  the lease of `name` while held: value = the holder's sid,
//                 attached to the holder's etcd lease, so that it goes with it
//                 (revoke, expiry). Its create_revision is the term's token.
//   {p}/t/{name}  written in the acquire's Txn with the lease key, never
//                 deleted: its mod_revision is the last token of `name`, for
//                 inspect once the lease is free.
//   {p}/run/{name} the name's run record (ADR 0048), attached to no etcd
//                 lease, so that it outlives the release and the expiry:
//                 value = run_value(record), whose first 20 bytes order by
//                 period id, so that a Txn's value compare decides a write.
// Permits (ADR 0046), {r} = permit_resource(kind, name): sem/{name} or rw/{name}:
//   {p}/p/{r}/{permit}  an entry (permit id in 20 decimal digits, so that the
//                 keys sort by it), attached to its session's etcd lease;
//                 value = "{kind} {sid} {token}" (kind: semaphore, read,
//                 write or intent; an intent's token is 0).
//   {p}/pn/{r}    the resource's counter, never deleted: value = "{seq}
//                 {epoch} {size}" (the last permit id taken, the last
//                 writer's token, the semaphore size its first holder set;
//                 the size counts only while an entry exists). Every grant
//                 and every intent writes it, so its mod_revision guards an
//                 acquire's Txn: the entries it was decided from gained none.
// Candidates (ADR 0047):
//   {p}/c/{name}/{sid}  a waiting contender of lease `name`, attached to its
//                 session's etcd lease; value = "{sid} {priority} {client}".
//                 Its create_revision is the candidate id (arrival order);
//                 the core keeps one contender per name per session.
// A lease key's token is its mod_revision: an acquire creates it (create ==
// mod), a handoff puts it again attached to the chosen candidate's lease (a
// Txn cannot delete and put one key), which only mod_revision tells.
#ifndef SIMBA_BACKEND_ETCD_ETCD_MESSAGES_H
#define SIMBA_BACKEND_ETCD_ETCD_MESSAGES_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend_types.h"

namespace simba::etcd_impl {

class EtcdKeys {
 public:
  explicit EtcdKeys(const std::string& prefix)
      : sessions_(prefix + "/s/"),
        leases_(prefix + "/l/"),
        tokens_(prefix + "/t/"),
        permits_(prefix + "/p/"),
        counters_(prefix + "/pn/"),
        candidates_(prefix + "/c/"),
        runs_(prefix + "/run/") {}
  std::string session(const std::string& sid) const { return sessions_ + sid; }
  std::string lease(const std::string& name) const { return leases_ + name; }
  std::string token(const std::string& name) const { return tokens_ + name; }
  std::string run(const std::string& name) const { return runs_ + name; }
  const std::string& runs_dir() const { return runs_; }
  const std::string& sessions_dir() const { return sessions_; }
  const std::string& leases_dir() const { return leases_; }
  const std::string& tokens_dir() const { return tokens_; }
  // `resource` is permit_resource(kind, name).
  std::string permit_dir(const std::string& resource) const { return permits_ + resource + "/"; }
  std::string permit(const std::string& resource, uint64_t permit) const;
  std::string counter(const std::string& resource) const { return counters_ + resource; }
  const std::string& permits_dir() const { return permits_; }
  // An entry's key back to its resource and permit id; false for any other key.
  bool parse_permit(const std::string& key, std::string* resource, uint64_t* permit) const;
  std::string candidate_dir(const std::string& name) const { return candidates_ + name + "/"; }
  std::string candidate(const std::string& name, const std::string& sid) const {
    return candidate_dir(name) + sid;
  }
  // A candidate's key back to its lease name and sid; false for any other key.
  bool parse_candidate(const std::string& key, std::string* name, std::string* sid) const;

 private:
  std::string sessions_, leases_, tokens_, permits_, counters_, candidates_, runs_;
};

// A permit entry's value, and back (false: not one).
std::string permit_value(PermitKind kind, const std::string& sid, uint64_t token);
bool parse_permit_value(const std::string& value, PermitKind* kind, std::string* sid,
                        uint64_t* token);

// A candidate's value, and back (false: not one).
struct CandidateValue {
  std::string sid, client;
  int32_t priority = 0;
};
std::string candidate_value(const CandidateValue& v);
bool parse_candidate_value(const std::string& value, CandidateValue* v);

// A resource's counter value, and back (false: not one).
struct PermitCounter {
  uint64_t seq = 0, epoch = 0;
  uint32_t size = 0;
};
std::string counter_value(const PermitCounter& c);
bool parse_counter_value(const std::string& value, PermitCounter* c);

// A run record's value, and back (false: not one): "{period} {started}
// {ended} {token} {outcome}", the period id in 20 bytes that sort as the
// numbers do (run_period_key), the outcome by its name.
std::string run_period_key(int64_t period_id);
std::string run_value(const RunRecord& r);
bool parse_run_value(const std::string& value, RunRecord* r);

// The range_end that makes a Range cover every key starting with `prefix`.
std::string prefix_end(const std::string& prefix);

// A session id: the etcd lease id as 16 lower-case hex digits, and back.
std::string session_id(int64_t lease);
bool parse_session_id(const std::string& sid, int64_t* lease);

struct Kv {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, lease = 0;
};

// --- requests -----------------------------------------------------------------

std::string grant_request(int64_t ttl_s);
std::string authenticate_request(const std::string& user, const std::string& password);
std::string revoke_request(int64_t lease);
std::string keep_alive_request(int64_t lease);
std::string time_to_live_request(int64_t lease);  // with the lease's keys
std::string put_request(const std::string& key, const std::string& value, int64_t lease);
// `serializable`: answered by the member from its own state, without a raft
// round (possibly behind: only for reads a Txn's guard checks afterwards).
std::string range_request(const std::string& key, const std::string& range_end,
                          bool serializable = false);
// One read-only Txn ranging each prefix: all read at one revision (inspect).
std::string snapshot_request(const std::vector<std::string>& prefixes);
// create_revision(lease key) == 0 ? put lease key (sid, lease) and token key : range lease key;
// both branches range the run key last (the new term's record, ADR 0048).
std::string acquire_request(const EtcdKeys& keys, const std::string& name, const std::string& sid,
                            int64_t lease);
// lease(lease key) == lease && mod_revision(lease key) == token ? delete lease key
std::string release_request(const EtcdKeys& keys, const std::string& name, int64_t lease,
                            int64_t token);
// acquire_request for a candidate (ADR 0047): the lease key absent ? put it,
// the token key, delete our candidate key : range lease key, (if `leave`:
// value(lease key) != sid ? put our candidate key `value`), range our
// candidate key; both branches range the run key last.
std::string acquire_candidate_request(const EtcdKeys& keys, const std::string& name,
                                      const std::string& sid, int64_t lease,
                                      const std::string& value, bool leave);
// The release of a term decided from the candidates read at `view_revision`:
// ours (lease, token) && no candidate key written after view_revision [&&
// create_revision(chosen) unchanged] ? [put lease key (chosen's sid and
// lease), token key, delete chosen | delete lease key when no chosen] : range
// lease key, range candidate dir.
std::string handoff_request(const EtcdKeys& keys, const std::string& name, int64_t lease,
                            int64_t token, const Kv* chosen, const std::string& chosen_sid,
                            int64_t view_revision);
// write_run (ADR 0048): lease(lease key) == lease && mod_revision(lease key)
// == token ? (a start: value(run key) below the period's, or the key absent;
// an end: the period's) ? put run key, range lease key : range run key
// : range run key, range the session's marker (gone: the session expired).
std::string write_run_request(const EtcdKeys& keys, const std::string& name, const std::string& sid,
                              int64_t lease, int64_t token, const RunRecord& record);
// create_revision(key) == id && lease(key) == lease ? delete key
std::string candidate_release_request(const std::string& key, int64_t id, int64_t lease);
// One permit acquire: mod_revision(counter) == counter_mod ? [range `dir`
// (the entries before the ops) if read_entries,] `ops` : range counter,
// range `dir`.
struct PermitOp {
  bool put = true;  // else a delete
  std::string key, value;
  int64_t lease = 0;
};
std::string permit_acquire_request(const std::string& counter, int64_t counter_mod,
                                   const std::string& dir, bool read_entries,
                                   const std::vector<PermitOp>& ops);
// value(key) == value && lease(key) == lease ? delete key
std::string permit_release_request(const std::string& key, const std::string& value, int64_t lease);
// A watch of the deletions of `key` (of [key, range_end) if range_end is not
// empty) from `start_revision` (0: now) with our id; of its puts too if `puts`.
std::string watch_create_request(const std::string& key, int64_t start_revision, int64_t watch_id,
                                 const std::string& range_end = "", bool puts = false);
std::string watch_cancel_request(int64_t watch_id);

// --- answers (false: undecodable) -----------------------------------------------

struct GrantAnswer {
  int64_t id = 0, ttl = 0;
  std::string error;
};
bool decode_grant(const uint8_t* data, size_t len, GrantAnswer* out);

// Authenticate: the token for the calls' `token` metadata (empty: none).
bool decode_authenticate(const uint8_t* data, size_t len, std::string* token);

// LeaseKeepAlive: the lease's TTL (<= 0: unknown or expired).
bool decode_keep_alive(const uint8_t* data, size_t len, int64_t* ttl);

struct TimeToLiveAnswer {
  int64_t ttl = -1;  // remaining seconds; -1 when the lease is gone
  std::vector<std::string> keys;
  int64_t revision = 0;  // the store's revision the answer was read at
};
bool decode_time_to_live(const uint8_t* data, size_t len, TimeToLiveAnswer* out);

struct TxnAnswer {
  bool succeeded = false;
  int64_t revision = 0;  // the store's revision after the Txn (a won acquire's token)
  std::vector<Kv> kvs;   // what the Txn's ranges read (nested Txns' too)
};
bool decode_txn(const uint8_t* data, size_t len, TxnAnswer* out);

struct RangeAnswer {
  int64_t revision = 0;
  std::vector<Kv> kvs;
};
bool decode_range(const uint8_t* data, size_t len, RangeAnswer* out);
// A snapshot_request's answer: one RangeAnswer per prefix, in order.
bool decode_snapshot(const uint8_t* data, size_t len, std::vector<RangeAnswer>* out);

struct WatchAnswer {
  int64_t watch_id = 0;
  int64_t revision = 0;
  bool created = false, canceled = false;
  int64_t compact_revision = 0;
  std::string cancel_reason;
  std::vector<std::string> deleted;  // the keys of its DELETE events
  std::vector<Kv> put;               // the keys of its PUT events
};
bool decode_watch(const uint8_t* data, size_t len, WatchAnswer* out);

}  // namespace simba::etcd_impl

#endif  // SIMBA_BACKEND_ETCD_ETCD_MESSAGES_H
