// The ZooKeeper backend's decoders: session marker data (any bytes a client
// with write access could put there), token and lease node Stats (any values),
// and the inspect reply built from them; permits' entry names, resource node
// data and the plan made on them (ADR 0046).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/zookeeper/zookeeper_results.h"
#include "fuzz_common.h"

namespace {

constexpr int64_t kMaxNs = 1'000'000'000'000LL * 1'000'000LL;

struct Stat read_stat(fuzz::Input& in) {
  struct Stat st {};
  st.czxid = in.int64();
  st.mzxid = in.int64();
  st.ephemeralOwner = in.int64();
  st.version = static_cast<int32_t>(in.int64());
  return st;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  std::map<std::string, simba::ZkSessionRow> sessions;
  std::set<std::string> asked;
  std::map<std::string, struct Stat> tokens, leases;
  const int nsessions = in.byte() % 8;
  for (int i = 0; i < nsessions; ++i) {
    const bool known_id = in.byte() & 1;
    const int64_t owner = in.int64();
    const std::string id = known_id ? simba::zk_hex_id(owner) : in.str(20);
    const simba::ZkSessionRow row = simba::parse_session_marker(in.str(80));
    FUZZ_CHECK(row.timeout_ms >= -1 && row.timeout_ms <= 1'000'000'000'000, "timeout %lld",
               static_cast<long long>(row.timeout_ms));
    sessions[id] = row;
  }
  const int nnames = in.byte() % 8;
  for (int i = 0; i < nnames; ++i) {
    const std::string name = in.str(20);
    asked.insert(name);
    const uint8_t has = in.byte();
    if (has & 1) tokens[name] = read_stat(in);
    if (has & 2) leases[name] = read_stat(in);
  }
  const simba::AcquireReply a = simba::decode_zk_acquire_token(read_stat(in));
  FUZZ_CHECK(a.outcome != simba::Outcome::kOk || (a.token > 0 && a.token <= INT64_MAX), "token");
  const simba::InspectReply r = simba::build_zk_inspect(sessions, asked, tokens, leases);
  FUZZ_CHECK(r.leases.size() == asked.size(), "one lease row per name asked");
  for (const auto& s : r.sessions) {
    FUZZ_CHECK(s.remaining.count() >= 0 && s.remaining.count() <= kMaxNs, "session remaining");
  }
  for (const auto& l : r.leases) {
    FUZZ_CHECK(l.token <= INT64_MAX, "token from a negative zxid");
    FUZZ_CHECK(l.holder_remaining.count() <= kMaxNs, "lease remaining");
  }
  // Permits: any children and data a client with write access could leave.
  simba::PermitAsk ask;
  ask.kind = static_cast<simba::PermitKind>(in.byte() % 6);
  ask.size = static_cast<uint32_t>(in.int64());
  ask.leave_intent = in.byte() & 1;
  ask.intent = static_cast<uint64_t>(in.int64());
  const int32_t version = static_cast<int32_t>(in.int64());
  const std::string rdata = in.str(24);
  std::vector<std::string> children;
  const int nchildren = in.byte() % 8;
  for (int i = 0; i < nchildren; ++i) {
    children.push_back(in.str(24));
    if (const auto e = simba::parse_zk_permit_child(children.back())) {
      FUZZ_CHECK(e->permit > 0, "permit 0");
      FUZZ_CHECK(simba::parse_zk_permit_child(simba::zk_permit_child(e->kind, e->permit))->permit ==
                     e->permit,
                 "child name round trip");
    }
  }
  const simba::ZkPermitPlan plan = simba::plan_zk_permit(ask, version, rdata, children);
  if (plan.what == simba::ZkPermitPlan::kGrant || plan.what == simba::ZkPermitPlan::kIntent) {
    FUZZ_CHECK(version >= 0 && plan.permit == static_cast<uint64_t>(version) + 1, "next permit");
    FUZZ_CHECK(simba::parse_zk_permit_number(plan.data).has_value(), "data readable again");
  }
  struct Stat est = read_stat(in);
  if (const auto row = simba::zk_permit_row("n", in.str(24), in.str(24), est, sessions)) {
    FUZZ_CHECK(row->permit > 0 && row->token <= INT64_MAX, "permit row");
  }
  return 0;
}
