#include "backend/redis/redis_replies.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "backend/redis/redis_keys.h"
#include "backend/reply_parts.h"
#include "backend/url_parts.h"

namespace simba {

namespace {

constexpr size_t kRunFieldCount = std::size(redis_layout::kRunFields);

// hiredis' own reply functions, with createArray wrapped. Copied once from a
// reader's defaults (they are static in hiredis).
struct LimitedFunctions {
  redisReplyObjectFunctions fn{};
  void* (*create_array)(const redisReadTask*, int) = nullptr;
  bool ok = false;
};

void* create_array_limited(const redisReadTask* task, int elements);

const LimitedFunctions& limited_functions() {
  static const LimitedFunctions f = [] {
    LimitedFunctions l;
    redisReader* probe = redisReaderCreate();
    if (probe && probe->fn && probe->fn->createArray) {
      l.fn = *probe->fn;
      l.create_array = probe->fn->createArray;
      l.fn.createArray = create_array_limited;
      l.ok = true;
    }
    if (probe) redisReaderFree(probe);
    return l;
  }();
  return f;
}

void* create_array_limited(const redisReadTask* task, int elements) {
  // hiredis 0.14 passes the count read from the wire as an int (a count
  // beyond INT_MAX arrives truncated, possibly negative). NULL makes the
  // reader fail with "Out of memory" and the connection is dropped.
  if (elements < 0 || elements > kMaxReplyElements) return nullptr;
  return limited_functions().create_array(task, elements);
}

}  // namespace

void limit_redis_reader(redisReader* reader) {
  const LimitedFunctions& f = limited_functions();
  if (reader && f.ok) reader->fn = const_cast<redisReplyObjectFunctions*>(&f.fn);
}

redisReader* make_redis_reader() {
  redisReader* r = redisReaderCreate();
  if (r) limit_redis_reader(r);
  return r;
}

std::string reply_str(const redisReply* r) {
  if (!r || !r->str) return std::string();
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r->str, r->len);
    default:
      return std::string();
  }
}

bool reply_int(const redisReply* r, long long* out) {
  if (!r) return false;
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return true;
  }
  if (r->type == REDIS_REPLY_STRING) {
    // std::string stops strtoll at an embedded NUL only if we check the end
    // against the full length: "12\0junk" is not a number.
    const std::string s = reply_str(r);
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == ERANGE || end != s.c_str() + s.size()) return false;
    *out = v;
    return true;
  }
  return false;
}

OpenReply decode_open_reply(const redisReply* r, const std::string& session_id) {
  OpenReply out;
  long long pttl = 0;
  if (!reply_int(r, &pttl)) {
    out.error = "redis: unexpected reply to open";
  } else if (pttl < 0) {
    out.error = "redis: session id collision";
  } else {
    out.outcome = Outcome::kOk;
    out.session_id = session_id;
    out.remaining = reply_ms(pttl);
  }
  return out;
}

namespace {

// A permit entry's "kind/name/permit" (the keep-alive's name of one) into `l`.
bool parse_permit_entry(const std::string& s, OwnedLease* l) {
  const size_t a = s.find('/'), b = s.rfind('/');
  if (a == std::string::npos || b <= a + 1) return false;
  const std::string kind = s.substr(0, a);
  bool known = false;
  for (PermitKind k :
       {PermitKind::kSemaphore, PermitKind::kRead, PermitKind::kWrite, PermitKind::kIntent}) {
    if (kind == permit_kind_name(k)) {
      l->kind = k;
      known = true;
    }
  }
  // The permit id: 1 to 18 digits (below 2^63), not 0.
  const std::string digits = s.substr(b + 1);
  uint64_t permit = 0;
  if (!known || digits.empty() || digits.size() > 18) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    permit = permit * 10 + static_cast<uint64_t>(c - '0');
  }
  if (permit == 0) return false;
  l->permit = permit;
  l->name = s.substr(a + 1, b - a - 1);
  return true;
}

}  // namespace

KeepAliveReply decode_keep_alive_reply(const redisReply* r) {
  // {pttl, name1, token1, name2, token2, ...}; {-1} when the session is gone.
  // A permit entry's name is "kind/name/permit" (its token may be 0).
  KeepAliveReply out;
  long long v = 0;
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->elements % 2 != 1 ||
      !reply_int(r->element[0], &v)) {
    out.error = "redis: unexpected reply to keep-alive";
    return out;
  }
  if (v < 0) {
    out.outcome = Outcome::kExpired;
    return out;
  }
  out.outcome = Outcome::kOk;
  out.remaining = reply_ms(v);
  for (size_t i = 1; i + 1 < r->elements; i += 2) {
    long long token = 0;
    OwnedLease l{reply_str(r->element[i]), 0};
    const bool permit = l.name.find('/') != std::string::npos;
    if (permit && !parse_permit_entry(l.name, &l)) {
      out = KeepAliveReply();
      out.error = "redis: malformed permit entry in keep-alive reply";
      return out;
    }
    if (!reply_int(r->element[i + 1], &token) || token < (permit ? 0 : 1)) {
      out = KeepAliveReply();
      out.error = "redis: malformed token in keep-alive reply";
      return out;
    }
    l.token = static_cast<uint64_t>(token);
    out.owned.push_back(std::move(l));
  }
  return out;
}

bool decode_run_record(const redisReply* const* e, RunRecord* out) {
  long long v[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    if (!reply_int(e[i], &v[i])) return false;
  }
  const std::string outcome = reply_str(e[4]);
  bool known = false;
  for (RunOutcome o :
       {RunOutcome::kRunning, RunOutcome::kOk, RunOutcome::kFailed, RunOutcome::kAbandoned}) {
    if (outcome == run_outcome_name(o)) {
      out->outcome = o;
      known = true;
    }
  }
  if (!known || v[3] < 0) return false;
  out->period_id = v[0];
  out->started_ms = v[1];
  out->ended_ms = v[2];
  out->token = static_cast<uint64_t>(v[3]);
  return true;
}

AcquireReply decode_acquire_reply(const redisReply* r) {
  // {1, token} or {1, token, the five run record fields} won; {0, holder
  // pttl} held; {-1} our session is gone.
  long long code = 0, v = 0;
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !reply_int(r->element[0], &code) ||
      (code >= 0 && (r->elements < 2 || !reply_int(r->element[1], &v)))) {
    AcquireReply out;
    out.error = "redis: unexpected reply to acquire";
    return out;
  }
  AcquireReply out = acquire_reply(code, v, "redis");
  // A record edited by hand into something unreadable is left out rather than
  // failing a grant the server already made: write_run's script still guards
  // the stored period id, so no period starts twice for it.
  RunRecord run;
  if (out.outcome == Outcome::kOk && r->elements == 2 + kRunFieldCount &&
      decode_run_record(r->element + 2, &run)) {
    out.run = run;
  }
  return out;
}

RunReply decode_write_run_reply(const redisReply* r) {
  // {code} or {code, the five stored fields}: -1 our session is gone, 0
  // applied, 1 refused (not the holder), 2 refused (the period).
  RunReply out;
  long long code = 0;
  RunRecord stored;
  const bool readable = r->type == REDIS_REPLY_ARRAY && r->elements == 1 + kRunFieldCount &&
                        decode_run_record(r->element + 1, &stored);
  // An applied write answers what it stored, always readable; a refusal may
  // meet a record edited by hand, left out as acquire does.
  if (r->type != REDIS_REPLY_ARRAY || (r->elements != 1 && r->elements != 1 + kRunFieldCount) ||
      !reply_int(r->element[0], &code) || code < -1 || code > 2 || (code == 0 && !readable)) {
    out.error = "redis: unexpected reply to write_run";
    return out;
  }
  if (code < 0) {
    out.outcome = Outcome::kExpired;
    return out;
  }
  out.outcome = code == 0 ? Outcome::kOk : Outcome::kRefused;
  out.refused = code == 0   ? RunRefusal::kNone
                : code == 1 ? RunRefusal::kNotHolder
                            : RunRefusal::kPeriod;
  if (readable) out.stored = stored;
  return out;
}

AcquireReply decode_acquire_permit_reply(const redisReply* r) {
  // {1, permit, token} granted; {0, holder pttl, intent} held; {2, size}
  // refused; {-1} our session is gone.
  AcquireReply out;
  long long code = 0, v[2] = {0, 0};
  const size_t want = r->type != REDIS_REPLY_ARRAY || r->elements < 1 ? 0
                      : !reply_int(r->element[0], &code)              ? 0
                      : code < 0                                      ? 1
                      : code == 2                                     ? 2
                                                                      : 3;
  bool ok = want > 0 && r->elements >= want && code <= 2;
  for (size_t i = 1; ok && i < want; ++i) ok = reply_int(r->element[i], &v[i - 1]);
  if (!ok) {
    out.error = "redis: unexpected reply to acquire_permit";
  } else if (code < 0) {
    out.outcome = Outcome::kExpired;
  } else if (code == 0) {
    out.outcome = Outcome::kHeld;
    out.holder_remaining = v[0] >= 0 ? reply_ms(v[0]) : Duration(-1);
    out.permit = v[1] > 0 ? static_cast<uint64_t>(v[1]) : 0;
  } else if (code == 2) {
    out.outcome = v[0] > 0 && v[0] <= UINT32_MAX ? Outcome::kRefused : Outcome::kError;
    out.size = out.outcome == Outcome::kRefused ? static_cast<uint32_t>(v[0]) : 0;
    if (out.outcome == Outcome::kError) out.error = "redis: malformed size in acquire_permit reply";
  } else if (v[0] <= 0 || v[1] < 0) {
    out.error = "redis: malformed permit in acquire_permit reply";
  } else {
    out.outcome = Outcome::kOk;
    out.permit = static_cast<uint64_t>(v[0]);
    out.token = static_cast<uint64_t>(v[1]);
  }
  return out;
}

InspectReply decode_inspect_reply(const redisReply* r) {
  // {{sid, client, pttl, ...}, {name, token, holder, pttl, run, ...},
  //  {kind, name, permit, token, holder, pttl, ...}}
  InspectReply out;
  const redisReply* sessions =
      r->type == REDIS_REPLY_ARRAY && r->elements == 3 ? r->element[0] : nullptr;
  const redisReply* leases = sessions ? r->element[1] : nullptr;
  const redisReply* permits = sessions ? r->element[2] : nullptr;
  if (!sessions || !leases || !permits || sessions->type != REDIS_REPLY_ARRAY ||
      sessions->elements % 3 != 0 || leases->type != REDIS_REPLY_ARRAY ||
      leases->elements % 5 != 0 || permits->type != REDIS_REPLY_ARRAY ||
      permits->elements % 6 != 0) {
    out.error = "redis: unexpected reply to inspect";
    return out;
  }
  for (size_t i = 0; i < sessions->elements; i += 3) {
    long long pttl = 0;
    if (!reply_int(sessions->element[i + 2], &pttl) || pttl < 0) pttl = 0;
    out.sessions.push_back(SessionInfo{reply_str(sessions->element[i]),
                                       reply_str(sessions->element[i + 1]), reply_ms(pttl)});
  }
  for (size_t i = 0; i < leases->elements; i += 5) {
    LeaseInfo info;
    // The run record: {} (none) or its five fields; a malformed one is left out.
    const redisReply* run = leases->element[i + 4];
    RunRecord record;
    if (run && run->type == REDIS_REPLY_ARRAY && run->elements == kRunFieldCount &&
        decode_run_record(run->element, &record)) {
      info.run = record;
    }
    long long token = 0, pttl = -1;
    if (!reply_int(leases->element[i + 1], &token)) token = 0;
    if (!reply_int(leases->element[i + 3], &pttl)) pttl = -1;
    info.name = reply_str(leases->element[i]);
    info.token = token > 0 ? static_cast<uint64_t>(token) : 0;
    info.holder = reply_str(leases->element[i + 2]);
    info.holder_remaining = info.holder.empty() || pttl < 0 ? Duration(-1) : reply_ms(pttl);
    out.leases.push_back(std::move(info));
  }
  for (size_t i = 0; i < permits->elements; i += 6) {
    OwnedLease entry;
    long long token = 0, pttl = -1;
    // A row this client cannot read (a kind it does not know) is left out.
    if (!parse_permit_entry(reply_str(permits->element[i]) + "/" +
                                reply_str(permits->element[i + 1]) + "/" +
                                reply_str(permits->element[i + 2]),
                            &entry)) {
      continue;
    }
    if (!reply_int(permits->element[i + 3], &token) || token < 0) token = 0;
    if (!reply_int(permits->element[i + 5], &pttl)) pttl = -1;
    LeaseInfo info;
    info.name = entry.name;
    info.kind = entry.kind;
    info.permit = entry.permit;
    info.token = static_cast<uint64_t>(token);
    info.holder = reply_str(permits->element[i + 4]);
    info.holder_remaining = pttl < 0 ? Duration(-1) : reply_ms(pttl);
    out.leases.push_back(std::move(info));
  }
  out.outcome = Outcome::kOk;
  return out;
}

SubscriberEvent decode_subscriber_message(const redisReply* r, const std::string& channel_head) {
  SubscriberEvent ev;
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return ev;
  const std::string kind = reply_str(r->element[0]);
  if (kind == "message") {  // {"message", channel, name}
    ev.name = reply_str(r->element[2]);
    if (!ev.name.empty()) ev.kind = SubscriberEvent::kReleased;
  } else if (kind == "subscribe") {  // {"subscribe", channel, count}
    const std::string channel = reply_str(r->element[1]);
    if (channel.size() > channel_head.size() &&
        channel.compare(0, channel_head.size(), channel_head) == 0) {
      ev.kind = SubscriberEvent::kSubscribed;
      ev.name = channel.substr(channel_head.size());
    }
  }
  return ev;
}

void ReplyCopyFree::operator()(redisReply* r) const {
  if (!r) return;
  for (size_t i = 0; i < r->elements; ++i) (*this)(r->element[i]);
  delete[] r->element;
  delete[] r->str;
  delete r;
}

ReplyCopy copy_reply(const redisReply* r) {
  ReplyCopy out(new redisReply(*r));
  out->str = nullptr;
  out->element = nullptr;
  const size_t n = r->element ? r->elements : 0;
  out->elements = 0;
  if (r->str) {
    out->str = new char[r->len + 1];
    std::memcpy(out->str, r->str, r->len);
    out->str[r->len] = '\0';
  }
  if (n > 0) {
    out->element = new redisReply*[n]();
    for (size_t i = 0; i < n; ++i) {
      out->element[i] = r->element[i] ? copy_reply(r->element[i]).release() : nullptr;
      out->elements = i + 1;  // what the deleter frees, should a later copy throw
    }
  }
  return out;
}

bool decode_master_addr(const redisReply* r, std::string* ip, int* port, std::string* why) {
  if (r->type == REDIS_REPLY_NIL) {
    *why = "it does not know that master";
    return false;
  }
  long long p = 0;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !r->element[0] || !r->element[1] ||
      r->element[0]->type != REDIS_REPLY_STRING || !reply_int(r->element[1], &p) || p < 1 ||
      p > 65535 || reply_str(r->element[0]).empty()) {
    *why = "malformed answer to SENTINEL get-master-addr-by-name";
    return false;
  }
  *ip = reply_str(r->element[0]);
  *port = static_cast<int>(p);
  return true;
}

bool decode_switch_master(const redisReply* r, std::string* name, std::string* ip, int* port) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !r->element[0] || !r->element[1] ||
      !r->element[2] || reply_str(r->element[0]) != "message" ||
      reply_str(r->element[1]) != "+switch-master") {
    return false;
  }
  // Five words separated by single spaces.
  const std::string text = reply_str(r->element[2]);
  std::string words[5];
  size_t from = 0;
  for (int i = 0; i < 5; ++i) {
    const size_t sp = text.find(' ', from);
    if ((i < 4) == (sp == std::string::npos)) return false;
    words[i] = text.substr(from, sp - from);
    if (words[i].empty()) return false;
    from = sp + 1;
  }
  if (!parse_decimal(words[4], 1, 65535, port)) return false;
  *name = words[0];
  *ip = words[3];
  return true;
}

}  // namespace simba
