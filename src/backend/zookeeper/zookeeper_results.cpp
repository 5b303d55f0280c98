#include "backend/zookeeper/zookeeper_results.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "backend/reply_parts.h"

namespace simba {

std::string zk_hex_id(int64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

ZkSessionRow parse_session_marker(const std::string& data) {
  ZkSessionRow row;
  const size_t sp = data.find(' ');
  const std::string num = data.substr(0, sp);
  // At most 13 digits: the library's duration ceiling (1e12 ms) fits, and no
  // accumulation can overflow.
  if (!num.empty() && num.size() <= 13 &&
      num.find_first_not_of("0123456789") == std::string::npos) {
    int64_t v = 0;
    for (char c : num) v = v * 10 + (c - '0');
    row.timeout_ms = std::min<int64_t>(v, kMaxReplyMs);
  }
  row.client = sp == std::string::npos ? std::string() : data.substr(sp + 1);
  return row;
}

AcquireReply decode_zk_acquire_token(const struct Stat& token_stat) {
  AcquireReply out;
  if (token_stat.mzxid <= 0) {
    out.error = "zookeeper: non-positive token (mzxid " + std::to_string(token_stat.mzxid) + ")";
    return out;
  }
  out.outcome = Outcome::kOk;
  out.token = static_cast<uint64_t>(token_stat.mzxid);
  return out;
}

InspectReply build_zk_inspect(const std::map<std::string, ZkSessionRow>& sessions,
                              const std::set<std::string>& asked,
                              const std::map<std::string, struct Stat>& tokens,
                              const std::map<std::string, struct Stat>& leases) {
  InspectReply out;
  out.outcome = Outcome::kOk;
  for (const auto& [id, row] : sessions) {
    out.sessions.push_back(
        SessionInfo{id, row.client, reply_ms(std::max<int64_t>(0, row.timeout_ms))});
  }
  for (const std::string& name : asked) {
    LeaseInfo li;
    li.name = name;
    auto t = tokens.find(name);
    auto l = leases.find(name);
    // zxids are positive; a negative one (never from a sound server) counts as none.
    if (t != tokens.end() && t->second.mzxid > 0) li.token = static_cast<uint64_t>(t->second.mzxid);
    if (l != leases.end()) {
      if (l->second.czxid > 0)
        li.token = std::max(li.token, static_cast<uint64_t>(l->second.czxid));
      li.holder = zk_hex_id(l->second.ephemeralOwner);
      auto h = sessions.find(li.holder);
      if (h != sessions.end() && h->second.timeout_ms >= 0) {
        li.holder_remaining = reply_ms(h->second.timeout_ms);
      }
    }
    out.leases.push_back(std::move(li));
  }
  return out;
}

namespace {

// The entry prefixes, by kind: the kind is in the node's name.
struct KindName {
  PermitKind kind;
  const char* prefix;
};
constexpr KindName kKindNames[] = {{PermitKind::kSemaphore, "sem-"},
                                   {PermitKind::kRead, "read-"},
                                   {PermitKind::kWrite, "write-"},
                                   {PermitKind::kIntent, "intent-"}};

}  // namespace

std::string zk_permit_child(PermitKind kind, uint64_t permit) {
  const char* prefix = "sem-";
  for (const KindName& k : kKindNames) {
    if (k.kind == kind) prefix = k.prefix;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%010llu", prefix, static_cast<unsigned long long>(permit));
  return buf;
}

std::optional<uint64_t> parse_zk_permit_number(const std::string& data) {
  // At most 18 digits: below 2^63, no accumulation can overflow.
  if (data.size() > 18 || data.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : data) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

std::optional<ZkPermitChild> parse_zk_permit_child(const std::string& child) {
  for (const KindName& k : kKindNames) {
    const size_t n = std::strlen(k.prefix);
    if (child.compare(0, n, k.prefix) != 0 || child.size() == n) continue;
    const std::optional<uint64_t> permit = parse_zk_permit_number(child.substr(n));
    if (!permit || *permit == 0) return std::nullopt;
    return ZkPermitChild{k.kind, *permit};
  }
  return std::nullopt;
}

ZkPermitPlan plan_zk_permit(const PermitAsk& ask, int32_t version, const std::string& data,
                            const std::vector<std::string>& children) {
  ZkPermitPlan plan;
  const bool semaphore = ask.kind == PermitKind::kSemaphore;
  if (!semaphore && ask.kind != PermitKind::kRead && ask.kind != PermitKind::kWrite) {
    plan.error = "zookeeper: no such permit kind";
    return plan;
  }
  if (semaphore && ask.size == 0) {
    plan.error = "zookeeper: a semaphore's size must be positive";
    return plan;
  }
  const std::optional<uint64_t> stored = parse_zk_permit_number(data);
  if (version < 0 || version == INT32_MAX || !stored) {
    // A node not written by Simba, or 2^31 permits taken (ADR 0011's wrap).
    plan.error = "zookeeper: the permit counter node has version " + std::to_string(version) +
                 " and data \"" + data.substr(0, 40) + "\"";
    return plan;
  }
  size_t entries = 0;
  bool read = false, write = false, intent = false, own_intent = false;
  for (const std::string& c : children) {
    const std::optional<ZkPermitChild> e = parse_zk_permit_child(c);
    if (!e) continue;  // nothing of ours
    entries += e->kind == PermitKind::kSemaphore;
    read |= e->kind == PermitKind::kRead;
    write |= e->kind == PermitKind::kWrite;
    intent |= e->kind == PermitKind::kIntent;
    own_intent |= e->kind == PermitKind::kIntent && ask.intent != 0 && e->permit == ask.intent;
  }
  bool in_the_way = false;
  if (semaphore) {
    if (entries > 0 && *stored != ask.size) {
      plan.what = ZkPermitPlan::kRefused;
      plan.size = static_cast<uint32_t>(std::min<uint64_t>(*stored, UINT32_MAX));
      return plan;
    }
    in_the_way = entries >= ask.size;
  } else if (ask.kind == PermitKind::kRead) {
    in_the_way = write || intent;
  } else {
    in_the_way = write || read;
  }
  const uint64_t next = static_cast<uint64_t>(version) + 1;
  if (!in_the_way) {
    plan.what = ZkPermitPlan::kGrant;
    plan.permit = next;
    plan.token = ask.kind == PermitKind::kRead ? *stored : next;
    // The size while held; the epoch, set by a writer, kept by a reader.
    plan.data = semaphore                        ? std::to_string(ask.size)
                : ask.kind == PermitKind::kWrite ? std::to_string(next)
                                                 : data;
    plan.drop_intent = own_intent;
    return plan;
  }
  plan.what = ZkPermitPlan::kHeld;
  if (ask.kind != PermitKind::kWrite || !ask.leave_intent) return plan;
  if (own_intent) {
    plan.permit = ask.intent;  // kept
    return plan;
  }
  plan.what = ZkPermitPlan::kIntent;
  plan.permit = next;
  plan.data = data;
  return plan;
}

std::optional<LeaseInfo> zk_permit_row(const std::string& name, const std::string& child,
                                       const std::string& data, const struct Stat& st,
                                       const std::map<std::string, ZkSessionRow>& sessions) {
  const std::optional<ZkPermitChild> e = parse_zk_permit_child(child);
  if (!e) return std::nullopt;
  LeaseInfo li;
  li.name = name;
  li.kind = e->kind;
  li.permit = e->permit;
  li.token = parse_zk_permit_number(data).value_or(0);
  li.holder = zk_hex_id(st.ephemeralOwner);
  auto h = sessions.find(li.holder);
  if (h != sessions.end() && h->second.timeout_ms >= 0) {
    li.holder_remaining = reply_ms(h->second.timeout_ms);
  }
  return li;
}

}  // namespace simba
