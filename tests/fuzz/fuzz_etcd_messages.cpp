// The etcd backend's answer decoders: any bytes (a server or network Simba
// does not control) decode or are refused, never crash, and what they return
// is bounded by the input.
#include "backend/etcd/etcd_messages.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace simba::etcd_impl;
  GrantAnswer g;
  (void)decode_grant(data, size, &g);
  FUZZ_CHECK(g.error.size() <= size, "grant error longer than the input");
  int64_t ttl = 0;
  (void)decode_keep_alive(data, size, &ttl);
  TimeToLiveAnswer t;
  if (decode_time_to_live(data, size, &t)) {
    FUZZ_CHECK(t.keys.size() <= size, "%zu keys from %zu bytes", t.keys.size(), size);
  }
  TxnAnswer x;
  if (decode_txn(data, size, &x)) {
    FUZZ_CHECK(x.kvs.size() <= size, "%zu kvs from %zu bytes", x.kvs.size(), size);
  }
  std::vector<RangeAnswer> snapshot;
  if (decode_snapshot(data, size, &snapshot)) {
    FUZZ_CHECK(snapshot.size() <= size, "%zu ranges from %zu bytes", snapshot.size(), size);
  }
  RangeAnswer r;
  if (decode_range(data, size, &r)) {
    for (const Kv& kv : r.kvs) FUZZ_CHECK(kv.key.size() <= size, "key longer than the input");
  }
  WatchAnswer w;
  if (decode_watch(data, size, &w)) {
    FUZZ_CHECK(w.deleted.size() <= size, "%zu events from %zu bytes", w.deleted.size(), size);
  }
  // A session id from the answer's bytes: parsed only in its own form.
  int64_t lease = 0;
  const std::string sid(reinterpret_cast<const char*>(data), size < 16 ? size : 16);
  if (parse_session_id(sid, &lease)) FUZZ_CHECK(session_id(lease) == sid, "sid %s", sid.c_str());
  // Permit entries, counters and keys (ADR 0046): what reads back writes back.
  const std::string text(reinterpret_cast<const char*>(data), size);
  simba::PermitKind kind = simba::PermitKind::kLease;
  std::string owner, resource;
  uint64_t token = 0, permit = 0;
  if (parse_permit_value(text, &kind, &owner, &token)) {
    FUZZ_CHECK(permit_value(kind, owner, token) == text, "entry %s", text.c_str());
  }
  PermitCounter counter;
  if (parse_counter_value(text, &counter)) {
    FUZZ_CHECK(counter_value(counter) == text, "counter %s", text.c_str());
  }
  // Run records (ADR 0048): what reads back writes back.
  simba::RunRecord run;
  if (parse_run_value(text, &run)) FUZZ_CHECK(run_value(run) == text, "run %s", text.c_str());
  const EtcdKeys keys("/p");
  if (keys.parse_permit(text, &resource, &permit)) {
    FUZZ_CHECK(resource.size() < size, "resource longer than the key");
  }
  return 0;
}
