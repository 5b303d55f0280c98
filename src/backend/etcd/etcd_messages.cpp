#include "backend/etcd/etcd_messages.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string_view>

#include "etcd_rpc.pb-c.h"

namespace simba::etcd_impl {

namespace {

ProtobufCBinaryData bytes(const std::string& s) {
  return {s.size(), reinterpret_cast<uint8_t*>(const_cast<char*>(s.data()))};
}

std::string str(const ProtobufCBinaryData& b) {
  return b.len ? std::string(reinterpret_cast<const char*>(b.data), b.len) : std::string();
}

std::string pack(const ProtobufCMessage* m) {
  std::string out(protobuf_c_message_get_packed_size(m), '\0');
  protobuf_c_message_pack(m, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

// An unpacked message, freed with it.
template <typename T>
using Unpacked = std::unique_ptr<T, void (*)(T*)>;

template <typename T>
Unpacked<T> unpack(const ProtobufCMessageDescriptor& d, const uint8_t* data, size_t len) {
  auto* m = reinterpret_cast<T*>(protobuf_c_message_unpack(&d, nullptr, len, data));
  return Unpacked<T>(m, [](T* p) {
    protobuf_c_message_free_unpacked(reinterpret_cast<ProtobufCMessage*>(p), nullptr);
  });
}

Kv kv_of(const Etcdserverpb__KeyValue& k) {
  Kv out;
  out.key = str(k.key);
  out.value = str(k.value);
  out.create_revision = k.create_revision;
  out.mod_revision = k.mod_revision;
  out.lease = k.lease;
  return out;
}

void add_kvs(const Etcdserverpb__RangeResponse* r, std::vector<Kv>* out) {
  if (!r) return;
  for (size_t i = 0; i < r->n_kvs; ++i) {
    if (r->kvs[i]) out->push_back(kv_of(*r->kvs[i]));
  }
}

// Decimal digits only, at most 20, within 64 bits.
bool parse_u64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    const uint64_t d = static_cast<uint64_t>(ch - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// A number as the values' writer writes it: no leading zero.
bool parse_dec(std::string_view s, uint64_t* out) {
  return (s.size() == 1 || (!s.empty() && s[0] != '0')) && parse_u64(s, out);
}

// `s` split at single spaces into exactly `n` fields.
bool split_fields(std::string_view s, size_t n, std::string_view* fields) {
  for (size_t i = 0; i + 1 < n; ++i) {
    const size_t sp = s.find(' ');
    if (sp == std::string_view::npos) return false;
    fields[i] = s.substr(0, sp);
    s.remove_prefix(sp + 1);
  }
  if (s.find(' ') != std::string_view::npos) return false;
  fields[n - 1] = s;
  return true;
}

Etcdserverpb__RequestOp range_op(Etcdserverpb__RangeRequest* r, const std::string& key,
                                 const std::string& end) {
  r->key = bytes(key);
  r->range_end = bytes(end);
  Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
  op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
  op.request_range = r;
  return op;
}

// compare `a` && compare `b` ? delete `key`
std::string delete_if(const std::string& key, Etcdserverpb__Compare* a, Etcdserverpb__Compare* b) {
  Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
  del.key = bytes(key);
  Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
  op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
  op.request_delete_range = &del;
  Etcdserverpb__Compare* cmps[] = {a, b};
  Etcdserverpb__RequestOp* oks[] = {&op};
  Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
  txn.n_compare = 2;
  txn.compare = cmps;
  txn.n_success = 1;
  txn.success = oks;
  return pack(&txn.base);
}

// A Txn built from parts it owns (protobuf-c messages point into them, so
// they live in deques: stable addresses).
class TxnParts {
 public:
  using Target = Etcdserverpb__Compare__CompareTarget;
  using Result = Etcdserverpb__Compare__CompareResult;
  static constexpr Result kEqual = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;

  // target(key) result n, over [key, range_end) when range_end is given.
  Etcdserverpb__Compare* cmp(Target target, const std::string& key, int64_t n,
                             Result result = kEqual, const std::string& range_end = "") {
    Etcdserverpb__Compare& c = base_cmp(target, key, result, range_end);
    switch (target) {
      case ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE:
        c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        c.create_revision = n;
        break;
      case ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD:
        c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        c.mod_revision = n;
        break;
      case ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE:
        c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
        c.lease = n;
        break;
      default:
        c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
        c.version = n;
    }
    return &c;
  }
  Etcdserverpb__Compare* cmp_value(const std::string& key, const std::string& value,
                                   Result result) {
    Etcdserverpb__Compare& c =
        base_cmp(ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE, key, result, "");
    c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    c.value = own(value);
    return &c;
  }
  Etcdserverpb__RequestOp* put(const std::string& key, const std::string& value, int64_t lease) {
    puts_.push_back(ETCDSERVERPB__PUT_REQUEST__INIT);
    puts_.back().key = own(key);
    puts_.back().value = own(value);
    puts_.back().lease = lease;
    Etcdserverpb__RequestOp& op = new_op(ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT);
    op.request_put = &puts_.back();
    return &op;
  }
  Etcdserverpb__RequestOp* del(const std::string& key) {
    dels_.push_back(ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT);
    dels_.back().key = own(key);
    Etcdserverpb__RequestOp& op = new_op(ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE);
    op.request_delete_range = &dels_.back();
    return &op;
  }
  Etcdserverpb__RequestOp* range(const std::string& key, const std::string& range_end = "") {
    ranges_.push_back(ETCDSERVERPB__RANGE_REQUEST__INIT);
    ranges_.back().key = own(key);
    ranges_.back().range_end = own(range_end);
    Etcdserverpb__RequestOp& op = new_op(ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE);
    op.request_range = &ranges_.back();
    return &op;
  }
  Etcdserverpb__TxnRequest* txn(std::vector<Etcdserverpb__Compare*> cmps,
                                std::vector<Etcdserverpb__RequestOp*> oks,
                                std::vector<Etcdserverpb__RequestOp*> kos) {
    cmp_lists_.push_back(std::move(cmps));
    op_lists_.push_back(std::move(oks));
    auto& ok = op_lists_.back();
    op_lists_.push_back(std::move(kos));
    auto& ko = op_lists_.back();
    txns_.push_back(ETCDSERVERPB__TXN_REQUEST__INIT);
    Etcdserverpb__TxnRequest& t = txns_.back();
    t.n_compare = cmp_lists_.back().size();
    t.compare = cmp_lists_.back().data();
    t.n_success = ok.size();
    t.success = ok.data();
    t.n_failure = ko.size();
    t.failure = ko.data();
    return &t;
  }
  Etcdserverpb__RequestOp* nested(Etcdserverpb__TxnRequest* t) {
    Etcdserverpb__RequestOp& op = new_op(ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN);
    op.request_txn = t;
    return &op;
  }

 private:
  ProtobufCBinaryData own(const std::string& s) {
    strs_.push_back(s);
    return bytes(strs_.back());
  }
  Etcdserverpb__Compare& base_cmp(Target target, const std::string& key, Result result,
                                  const std::string& range_end) {
    cmps_.push_back(ETCDSERVERPB__COMPARE__INIT);
    Etcdserverpb__Compare& c = cmps_.back();
    c.target = target;
    c.result = result;
    c.key = own(key);
    c.range_end = own(range_end);
    return c;
  }
  Etcdserverpb__RequestOp& new_op(Etcdserverpb__RequestOp__RequestCase kind) {
    ops_.push_back(ETCDSERVERPB__REQUEST_OP__INIT);
    ops_.back().request_case = kind;
    return ops_.back();
  }
  std::deque<std::string> strs_;
  std::deque<Etcdserverpb__Compare> cmps_;
  std::deque<Etcdserverpb__PutRequest> puts_;
  std::deque<Etcdserverpb__DeleteRangeRequest> dels_;
  std::deque<Etcdserverpb__RangeRequest> ranges_;
  std::deque<Etcdserverpb__TxnRequest> txns_;
  std::deque<Etcdserverpb__RequestOp> ops_;
  std::deque<std::vector<Etcdserverpb__Compare*>> cmp_lists_;
  std::deque<std::vector<Etcdserverpb__RequestOp*>> op_lists_;
};

constexpr auto kCreate = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
constexpr auto kMod = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
constexpr auto kLease = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;

// The ranges' kvs of a Txn's answer, nested Txns' included.
void add_txn_kvs(const Etcdserverpb__TxnResponse* r, std::vector<Kv>* out) {
  if (!r) return;
  for (size_t i = 0; i < r->n_responses; ++i) {
    const Etcdserverpb__ResponseOp* op = r->responses[i];
    if (op && op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) {
      add_kvs(op->response_range, out);
    } else if (op && op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN) {
      add_txn_kvs(op->response_txn, out);
    }
  }
}

}  // namespace

std::string EtcdKeys::permit(const std::string& resource, uint64_t permit) const {
  char id[21];
  std::snprintf(id, sizeof id, "%020llu", static_cast<unsigned long long>(permit));
  return permit_dir(resource) + id;
}

bool EtcdKeys::parse_permit(const std::string& key, std::string* resource, uint64_t* permit) const {
  if (key.compare(0, permits_.size(), permits_) != 0) return false;
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos || slash <= permits_.size() || key.size() - slash != 21) {
    return false;
  }
  *resource = key.substr(permits_.size(), slash - permits_.size());
  return parse_u64(std::string_view(key).substr(slash + 1), permit);
}

bool EtcdKeys::parse_candidate(const std::string& key, std::string* name, std::string* sid) const {
  if (key.compare(0, candidates_.size(), candidates_) != 0) return false;
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos || slash <= candidates_.size()) return false;
  int64_t lease = 0;
  *sid = key.substr(slash + 1);
  *name = key.substr(candidates_.size(), slash - candidates_.size());
  return name->find('/') == std::string::npos && parse_session_id(*sid, &lease);
}

std::string candidate_value(const CandidateValue& v) {
  return v.sid + " " + std::to_string(v.priority) + " " + v.client;
}

bool parse_candidate_value(const std::string& value, CandidateValue* v) {
  // The client's name is last: it may hold spaces.
  const size_t a = value.find(' ');
  const size_t b = a == std::string::npos ? a : value.find(' ', a + 1);
  if (b == std::string::npos || a == 0) return false;
  const std::string prio = value.substr(a + 1, b - a - 1);
  char* end = nullptr;
  errno = 0;
  const long long p = std::strtoll(prio.c_str(), &end, 10);
  if (prio.empty() || *end || errno || p < INT32_MIN || p > INT32_MAX) return false;
  v->sid = value.substr(0, a);
  v->priority = static_cast<int32_t>(p);
  v->client = value.substr(b + 1);
  return true;
}

std::string permit_value(PermitKind kind, const std::string& sid, uint64_t token) {
  return std::string(permit_kind_name(kind)) + " " + sid + " " + std::to_string(token);
}

bool parse_permit_value(const std::string& value, PermitKind* kind, std::string* sid,
                        uint64_t* token) {
  std::string_view f[3];
  if (!split_fields(value, 3, f) || !parse_dec(f[2], token) || f[1].empty()) return false;
  for (PermitKind k :
       {PermitKind::kSemaphore, PermitKind::kRead, PermitKind::kWrite, PermitKind::kIntent}) {
    if (f[0] == permit_kind_name(k)) {
      *kind = k;
      *sid = std::string(f[1]);
      return true;
    }
  }
  return false;
}

std::string counter_value(const PermitCounter& c) {
  return std::to_string(c.seq) + " " + std::to_string(c.epoch) + " " + std::to_string(c.size);
}

bool parse_counter_value(const std::string& value, PermitCounter* c) {
  std::string_view f[3];
  uint64_t size = 0;
  if (!split_fields(value, 3, f) || !parse_dec(f[0], &c->seq) || !parse_dec(f[1], &c->epoch) ||
      !parse_dec(f[2], &size) || size > UINT32_MAX) {
    return false;
  }
  c->size = static_cast<uint32_t>(size);
  return true;
}

std::string run_period_key(int64_t period_id) {
  // Non-negative ids in 20 digits; negative ones as "-" and 19 digits of
  // id + 2^63 ('-' sorts below every digit).
  char buf[24];
  if (period_id >= 0) {
    std::snprintf(buf, sizeof buf, "%020lld", static_cast<long long>(period_id));
  } else {
    const uint64_t u = static_cast<uint64_t>(period_id) - (uint64_t{1} << 63);
    std::snprintf(buf, sizeof buf, "-%019llu", static_cast<unsigned long long>(u));
  }
  return buf;
}

std::string run_value(const RunRecord& r) {
  return run_period_key(r.period_id) + " " + std::to_string(r.started_ms) + " " +
         std::to_string(r.ended_ms) + " " + std::to_string(r.token) + " " +
         run_outcome_name(r.outcome);
}

bool parse_run_value(const std::string& value, RunRecord* r) {
  std::string_view f[5];
  if (!split_fields(value, 5, f) || f[0].size() != 20) return false;
  // Signed decimal as std::to_string writes it.
  auto parse_i64 = [](std::string_view s, int64_t* out) {
    const bool neg = !s.empty() && s[0] == '-';
    if (neg) s.remove_prefix(1);
    uint64_t u = 0;
    if (!parse_dec(s, &u) || (neg && u == 0)) return false;
    if (neg ? u > (uint64_t{1} << 63) : u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
    return true;
  };
  uint64_t u = 0;
  if (f[0][0] == '-') {
    if (!parse_u64(f[0].substr(1), &u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
    r->period_id = static_cast<int64_t>(u + (uint64_t{1} << 63));
  } else {
    if (!parse_u64(f[0], &u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
    r->period_id = static_cast<int64_t>(u);
  }
  if (!parse_i64(f[1], &r->started_ms) || !parse_i64(f[2], &r->ended_ms) ||
      !parse_dec(f[3], &r->token)) {
    return false;
  }
  for (RunOutcome o :
       {RunOutcome::kRunning, RunOutcome::kOk, RunOutcome::kFailed, RunOutcome::kAbandoned}) {
    if (f[4] == run_outcome_name(o)) {
      r->outcome = o;
      return true;
    }
  }
  return false;
}

std::string prefix_end(const std::string& prefix) {
  // etcd's rule: the prefix with its last byte below 0xff incremented.
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string session_id(int64_t lease) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(static_cast<uint64_t>(lease)));
  return buf;
}

bool parse_session_id(const std::string& sid, int64_t* lease) {
  if (sid.size() != 16 || sid.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return false;
  }
  *lease = static_cast<int64_t>(std::strtoull(sid.c_str(), nullptr, 16));
  return *lease > 0;
}

std::string grant_request(int64_t ttl_s) {
  Etcdserverpb__LeaseGrantRequest r = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
  r.ttl = ttl_s;
  return pack(&r.base);
}

std::string authenticate_request(const std::string& user, const std::string& password) {
  Etcdserverpb__AuthenticateRequest r = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
  r.name = const_cast<char*>(user.c_str());
  r.password = const_cast<char*>(password.c_str());
  return pack(&r.base);
}

std::string revoke_request(int64_t lease) {
  Etcdserverpb__LeaseRevokeRequest r = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
  r.id = lease;
  return pack(&r.base);
}

std::string keep_alive_request(int64_t lease) {
  Etcdserverpb__LeaseKeepAliveRequest r = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
  r.id = lease;
  return pack(&r.base);
}

std::string time_to_live_request(int64_t lease) {
  Etcdserverpb__LeaseTimeToLiveRequest r = ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
  r.id = lease;
  r.keys = 1;
  return pack(&r.base);
}

std::string put_request(const std::string& key, const std::string& value, int64_t lease) {
  Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;
  r.key = bytes(key);
  r.value = bytes(value);
  r.lease = lease;
  return pack(&r.base);
}

std::string range_request(const std::string& key, const std::string& range_end, bool serializable) {
  Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
  r.key = bytes(key);
  r.range_end = bytes(range_end);
  r.serializable = serializable;
  return pack(&r.base);
}

std::string snapshot_request(const std::vector<std::string>& prefixes) {
  std::vector<std::string> ends;
  std::vector<Etcdserverpb__RangeRequest> ranges(prefixes.size());
  std::vector<Etcdserverpb__RequestOp> ops(prefixes.size());
  std::vector<Etcdserverpb__RequestOp*> op_ptrs;
  ends.reserve(prefixes.size());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    ends.push_back(prefix_end(prefixes[i]));
    ranges[i] = ETCDSERVERPB__RANGE_REQUEST__INIT;
    ranges[i].key = bytes(prefixes[i]);
    ranges[i].range_end = bytes(ends[i]);
    ops[i] = ETCDSERVERPB__REQUEST_OP__INIT;
    ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    ops[i].request_range = &ranges[i];
    op_ptrs.push_back(&ops[i]);
  }
  Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;  // no compare: success
  txn.n_success = op_ptrs.size();
  txn.success = op_ptrs.data();
  return pack(&txn.base);
}

std::string acquire_request(const EtcdKeys& keys, const std::string& name, const std::string& sid,
                            int64_t lease) {
  const std::string lease_key = keys.lease(name), token_key = keys.token(name);
  Etcdserverpb__Compare absent = ETCDSERVERPB__COMPARE__INIT;
  absent.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
  absent.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
  absent.key = bytes(lease_key);
  absent.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
  absent.create_revision = 0;
  Etcdserverpb__PutRequest put_lease = ETCDSERVERPB__PUT_REQUEST__INIT;
  put_lease.key = bytes(lease_key);
  put_lease.value = bytes(sid);
  put_lease.lease = lease;
  Etcdserverpb__PutRequest put_token = ETCDSERVERPB__PUT_REQUEST__INIT;
  put_token.key = bytes(token_key);
  Etcdserverpb__RangeRequest read = ETCDSERVERPB__RANGE_REQUEST__INIT, read_run = read;
  read.key = bytes(lease_key);
  const std::string run_key = keys.run(name);
  read_run.key = bytes(run_key);
  Etcdserverpb__RequestOp won1 = ETCDSERVERPB__REQUEST_OP__INIT,
                          won2 = ETCDSERVERPB__REQUEST_OP__INIT,
                          held = ETCDSERVERPB__REQUEST_OP__INIT,
                          run = ETCDSERVERPB__REQUEST_OP__INIT;
  won1.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
  won1.request_put = &put_lease;
  won2.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
  won2.request_put = &put_token;
  held.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
  held.request_range = &read;
  run.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
  run.request_range = &read_run;
  Etcdserverpb__Compare* cmps[] = {&absent};
  Etcdserverpb__RequestOp *oks[] = {&won1, &won2, &run}, *kos[] = {&held, &run};
  Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
  txn.n_compare = 1;
  txn.compare = cmps;
  txn.n_success = 3;
  txn.success = oks;
  txn.n_failure = 2;
  txn.failure = kos;
  return pack(&txn.base);
}

std::string release_request(const EtcdKeys& keys, const std::string& name, int64_t lease,
                            int64_t token) {
  const std::string lease_key = keys.lease(name);
  Etcdserverpb__Compare ours = ETCDSERVERPB__COMPARE__INIT, term = ETCDSERVERPB__COMPARE__INIT;
  ours.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
  ours.key = bytes(lease_key);
  ours.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
  ours.lease = lease;
  term.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
  term.key = bytes(lease_key);
  term.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
  term.mod_revision = token;
  return delete_if(lease_key, &ours, &term);
}

std::string acquire_candidate_request(const EtcdKeys& keys, const std::string& name,
                                      const std::string& sid, int64_t lease,
                                      const std::string& value, bool leave) {
  TxnParts p;
  const std::string lk = keys.lease(name), ck = keys.candidate(name, sid);
  std::vector<Etcdserverpb__RequestOp*> held = {p.range(lk)};
  if (leave) {
    // Held by this session (a handoff's grant): no candidate entry beside it.
    held.push_back(
        p.nested(p.txn({p.cmp_value(lk, sid, ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL)},
                       {p.put(ck, value, lease)}, {})));
  }
  held.push_back(p.range(ck));
  held.push_back(p.range(keys.run(name)));
  auto* t = p.txn(
      {p.cmp(kCreate, lk, 0)},
      {p.put(lk, sid, lease), p.put(keys.token(name), "", 0), p.del(ck), p.range(keys.run(name))},
      held);
  return pack(&t->base);
}

std::string handoff_request(const EtcdKeys& keys, const std::string& name, int64_t lease,
                            int64_t token, const Kv* chosen, const std::string& chosen_sid,
                            int64_t view_revision) {
  TxnParts p;
  const std::string lk = keys.lease(name), dir = keys.candidate_dir(name);
  // No candidate came or changed since the view (one that left changes the
  // choice only if it is the chosen one), and the chosen key is still there,
  // so its etcd lease is live (etcd deletes a lease's keys as it ends it).
  std::vector<Etcdserverpb__Compare*> cmps = {
      p.cmp(kLease, lk, lease), p.cmp(kMod, lk, token),
      p.cmp(kMod, dir, view_revision + 1, ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS,
            prefix_end(dir))};
  std::vector<Etcdserverpb__RequestOp*> ops = {p.del(lk)};
  if (chosen) {
    cmps.push_back(p.cmp(kCreate, chosen->key, chosen->create_revision));
    ops = {p.put(lk, chosen_sid, chosen->lease), p.put(keys.token(name), "", 0),
           p.del(chosen->key)};
  }
  auto* t = p.txn(cmps, ops, {p.range(lk), p.range(dir, prefix_end(dir))});
  return pack(&t->base);
}

std::string write_run_request(const EtcdKeys& keys, const std::string& name, const std::string& sid,
                              int64_t lease, int64_t token, const RunRecord& record) {
  constexpr auto kLess = ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS;
  constexpr auto kGreater = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
  TxnParts p;
  const std::string lk = keys.lease(name), rk = keys.run(name);
  const std::string period = run_period_key(record.period_id);
  // Applied: the lease key read (no refusal reads it), so the answer tells.
  const std::vector<Etcdserverpb__RequestOp*> applied = {p.put(rk, run_value(record), 0),
                                                         p.range(lk)};
  const std::vector<Etcdserverpb__RequestOp*> refused = {p.range(rk)};
  Etcdserverpb__TxnRequest* rule = nullptr;
  if (record.outcome == RunOutcome::kRunning) {
    // A value compare fails on an absent key (etcd's rule): then the nested
    // Txn starts the first period.
    rule = p.txn({p.cmp_value(rk, period, kLess)}, applied,
                 {p.nested(p.txn({p.cmp(kCreate, rk, 0)}, applied, refused))});
  } else {
    // "{period} ..." sorts above "{period}" and below "{period}!" (' ' < '!').
    rule = p.txn({p.cmp_value(rk, period, kGreater), p.cmp_value(rk, period + "!", kLess)}, applied,
                 refused);
  }
  auto* t = p.txn({p.cmp(kLease, lk, lease), p.cmp(kMod, lk, token)}, {p.nested(rule)},
                  {p.range(rk), p.range(keys.session(sid))});
  return pack(&t->base);
}

std::string candidate_release_request(const std::string& key, int64_t id, int64_t lease) {
  TxnParts p;
  auto* t = p.txn({p.cmp(kCreate, key, id), p.cmp(kLease, key, lease)}, {p.del(key)}, {});
  return pack(&t->base);
}

std::string permit_acquire_request(const std::string& counter, int64_t counter_mod,
                                   const std::string& dir, bool read_entries,
                                   const std::vector<PermitOp>& ops) {
  const std::string dir_end = prefix_end(dir);
  Etcdserverpb__Compare guard = ETCDSERVERPB__COMPARE__INIT;
  guard.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
  guard.key = bytes(counter);
  guard.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
  guard.mod_revision = counter_mod;
  Etcdserverpb__RangeRequest r_entries = ETCDSERVERPB__RANGE_REQUEST__INIT,
                             r_counter = ETCDSERVERPB__RANGE_REQUEST__INIT,
                             r_entries2 = ETCDSERVERPB__RANGE_REQUEST__INIT;
  std::vector<Etcdserverpb__PutRequest> puts(ops.size());
  std::vector<Etcdserverpb__DeleteRangeRequest> dels(ops.size());
  std::vector<Etcdserverpb__RequestOp> oks;
  oks.reserve(ops.size() + 1);
  if (read_entries) oks.push_back(range_op(&r_entries, dir, dir_end));
  for (size_t i = 0; i < ops.size(); ++i) {
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    if (ops[i].put) {
      puts[i] = ETCDSERVERPB__PUT_REQUEST__INIT;
      puts[i].key = bytes(ops[i].key);
      puts[i].value = bytes(ops[i].value);
      puts[i].lease = ops[i].lease;
      op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
      op.request_put = &puts[i];
    } else {
      dels[i] = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
      dels[i].key = bytes(ops[i].key);
      op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
      op.request_delete_range = &dels[i];
    }
    oks.push_back(op);
  }
  Etcdserverpb__RequestOp kos[] = {range_op(&r_counter, counter, ""),
                                   range_op(&r_entries2, dir, dir_end)};
  std::vector<Etcdserverpb__RequestOp*> ok_ptrs;
  for (auto& op : oks) ok_ptrs.push_back(&op);
  Etcdserverpb__RequestOp* ko_ptrs[] = {&kos[0], &kos[1]};
  Etcdserverpb__Compare* cmps[] = {&guard};
  Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
  txn.n_compare = 1;
  txn.compare = cmps;
  txn.n_success = ok_ptrs.size();
  txn.success = ok_ptrs.data();
  txn.n_failure = 2;
  txn.failure = ko_ptrs;
  return pack(&txn.base);
}

std::string permit_release_request(const std::string& key, const std::string& value,
                                   int64_t lease) {
  Etcdserverpb__Compare same = ETCDSERVERPB__COMPARE__INIT, ours = ETCDSERVERPB__COMPARE__INIT;
  same.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
  same.key = bytes(key);
  same.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
  same.value = bytes(value);
  ours.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
  ours.key = bytes(key);
  ours.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
  ours.lease = lease;
  return delete_if(key, &same, &ours);
}

std::string watch_create_request(const std::string& key, int64_t start_revision, int64_t watch_id,
                                 const std::string& range_end, bool puts) {
  Etcdserverpb__WatchCreateRequest c = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
  c.key = bytes(key);
  c.range_end = bytes(range_end);
  c.start_revision = start_revision;
  Etcdserverpb__WatchCreateRequest__FilterType no_put =
      ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
  c.n_filters = puts ? 0 : 1;
  c.filters = puts ? nullptr : &no_put;
  c.watch_id = watch_id;
  Etcdserverpb__WatchRequest r = ETCDSERVERPB__WATCH_REQUEST__INIT;
  r.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
  r.create_request = &c;
  return pack(&r.base);
}

std::string watch_cancel_request(int64_t watch_id) {
  Etcdserverpb__WatchCancelRequest c = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
  c.watch_id = watch_id;
  Etcdserverpb__WatchRequest r = ETCDSERVERPB__WATCH_REQUEST__INIT;
  r.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
  r.cancel_request = &c;
  return pack(&r.base);
}

bool decode_grant(const uint8_t* data, size_t len, GrantAnswer* out) {
  auto r = unpack<Etcdserverpb__LeaseGrantResponse>(etcdserverpb__lease_grant_response__descriptor,
                                                    data, len);
  if (!r) return false;
  out->id = r->id;
  out->ttl = r->ttl;
  out->error = r->error ? r->error : "";
  return true;
}

bool decode_authenticate(const uint8_t* data, size_t len, std::string* token) {
  auto r = unpack<Etcdserverpb__AuthenticateResponse>(
      etcdserverpb__authenticate_response__descriptor, data, len);
  if (!r) return false;
  *token = r->token ? r->token : "";
  return true;
}

bool decode_keep_alive(const uint8_t* data, size_t len, int64_t* ttl) {
  auto r = unpack<Etcdserverpb__LeaseKeepAliveResponse>(
      etcdserverpb__lease_keep_alive_response__descriptor, data, len);
  if (!r) return false;
  *ttl = r->ttl;
  return true;
}

bool decode_time_to_live(const uint8_t* data, size_t len, TimeToLiveAnswer* out) {
  auto r = unpack<Etcdserverpb__LeaseTimeToLiveResponse>(
      etcdserverpb__lease_time_to_live_response__descriptor, data, len);
  if (!r) return false;
  out->ttl = r->ttl;
  out->revision = r->header ? r->header->revision : 0;
  out->keys.clear();
  for (size_t i = 0; i < r->n_keys; ++i) out->keys.push_back(str(r->keys[i]));
  return true;
}

bool decode_txn(const uint8_t* data, size_t len, TxnAnswer* out) {
  auto r = unpack<Etcdserverpb__TxnResponse>(etcdserverpb__txn_response__descriptor, data, len);
  if (!r) return false;
  out->succeeded = r->succeeded;
  out->revision = r->header ? r->header->revision : 0;
  out->kvs.clear();
  add_txn_kvs(r.get(), &out->kvs);
  return true;
}

bool decode_range(const uint8_t* data, size_t len, RangeAnswer* out) {
  auto r = unpack<Etcdserverpb__RangeResponse>(etcdserverpb__range_response__descriptor, data, len);
  if (!r) return false;
  out->revision = r->header ? r->header->revision : 0;
  out->kvs.clear();
  add_kvs(r.get(), &out->kvs);
  return true;
}

bool decode_snapshot(const uint8_t* data, size_t len, std::vector<RangeAnswer>* out) {
  auto r = unpack<Etcdserverpb__TxnResponse>(etcdserverpb__txn_response__descriptor, data, len);
  if (!r || !r->succeeded) return false;
  out->clear();
  for (size_t i = 0; i < r->n_responses; ++i) {
    const Etcdserverpb__ResponseOp* op = r->responses[i];
    if (!op || op->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) {
      return false;
    }
    RangeAnswer a;
    a.revision = r->header ? r->header->revision : 0;
    add_kvs(op->response_range, &a.kvs);
    out->push_back(std::move(a));
  }
  return true;
}

bool decode_watch(const uint8_t* data, size_t len, WatchAnswer* out) {
  auto r = unpack<Etcdserverpb__WatchResponse>(etcdserverpb__watch_response__descriptor, data, len);
  if (!r) return false;
  out->watch_id = r->watch_id;
  out->revision = r->header ? r->header->revision : 0;
  out->created = r->created;
  out->canceled = r->canceled;
  out->compact_revision = r->compact_revision;
  out->cancel_reason = r->cancel_reason ? r->cancel_reason : "";
  out->deleted.clear();
  out->put.clear();
  for (size_t i = 0; i < r->n_events; ++i) {
    const Etcdserverpb__Event* e = r->events[i];
    if (e && e->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE && e->kv) {
      out->deleted.push_back(str(e->kv->key));
    } else if (e && e->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT && e->kv) {
      out->put.push_back(kv_of(*e->kv));
    }
  }
  return true;
}

}  // namespace simba::etcd_impl
