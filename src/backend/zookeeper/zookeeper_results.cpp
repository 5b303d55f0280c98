#include "backend/zookeeper/zookeeper_results.h"

#include <algorithm>
#include <cstdio>

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

}  // namespace simba
