#include "backend/redis/redis_scripts.h"

#include <cstdint>
#include <string>

#include "backend/redis/redis_keys.h"
#include "core/backend_types.h"

namespace simba {
namespace {

// KEYS[1] session key; ARGV[1] lease ms, ARGV[2] value (client name).
// Returns the PTTL, or -1 if the id is taken.
constexpr char kOpenScript[] = R"lua(
if redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1], 'NX') then
  return redis.call('PTTL', KEYS[1])
end
return -1
)lua";

// KEYS[1] session key, KEYS[2] its lease set; ARGV[1] lease ms, ARGV[2] prefix,
// ARGV[3] sid. Returns {-1} if the session is gone, else {pttl, name, token, ...}
// for every lease of the set whose hash still names the session, and
// {pttl, ..., "kind/name/permit", token, ...} for every permit entry of the set
// (ADR 0046) its hash still gives the session (the others leave the set).
constexpr char kKeepAliveScript[] = R"lua(
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return {-1} end
local out = {redis.call('PTTL', KEYS[1])}
local names = redis.call('SMEMBERS', KEYS[2])
for _, n in ipairs(names) do
  local resource, permit = string.match(n, '^(.+)/(%d+)$')
  local kind, holder, token
  if resource then
    local v = redis.call('HGET', permits_key(ARGV[2], resource), 'e:' .. permit)
    if v then kind, holder, token = string.match(v, '^(%a+) (%S+) (%d+)$') end
    n = (kind or '') .. string.match(resource, '/.+$') .. '/' .. permit
  else
    local h = redis.call('HMGET', lease_key(ARGV[2], n), 'session', 'token')
    holder, token = h[1], h[2]
  end
  if holder == ARGV[3] then
    out[#out + 1] = n
    out[#out + 1] = token
  else
    redis.call('SREM', KEYS[2], resource and resource .. '/' .. permit or n)
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return out
)lua";

// KEYS[1] session key, KEYS[2] its lease set, KEYS[3] lease hash; ARGV[1] sid,
// ARGV[2] prefix, ARGV[3] name. Returns {-1} (our session is gone), {0, pttl}
// (held by a live session, ours included: never two terms of one name for one
// session; pttl -1 when unknown) or {1, token} followed, when the name has a
// run record (ADR 0048), by its five fields, read by the same HMGET: a new
// leader reads it at no extra cost.
// One write in the common case (every write is in the AOF and fsynced): the
// token and the holder in one HSET, and the name usually still in the set
// from an earlier term (a release leaves it to the keep-alive), with the
// set's expiry set only when the set is new.
constexpr char kAcquireScript[] = R"lua(
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return {-1} end
local h = redis.call('HMGET', KEYS[3], 'session', 'token', unpack(RUN_FIELDS))
local holder = h[1]
if holder and holder ~= '' then
  if holder == ARGV[1] then return {0, ttl} end
  local ht = redis.call('PTTL', session_key(ARGV[2], holder))
  if ht ~= -2 then return {0, ht} end
end
local token = (tonumber(h[2]) or 0) + 1
redis.call('HSET', KEYS[3], 'session', ARGV[1], 'token', string.format('%d', token))
if redis.call('SADD', KEYS[2], ARGV[3]) == 1 and ttl > 0 and redis.call('PTTL', KEYS[2]) == -1 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
if not h[3] then return {1, token} end
return {1, token, h[3], h[4], h[5], h[6], h[7]}
)lua";

// KEYS[1] lease hash; ARGV[1] sid, ARGV[2] token, ARGV[3] name, ARGV[4]
// channel. Frees the lease only where session and token match. The name stays
// in the session's lease set: the next keep-alive drops it unless the session
// holds the lease again by then, which saves a write here and one in acquire.
constexpr char kReleaseScript[] = R"lua(
local h = redis.call('HMGET', KEYS[1], 'session', 'token')
if h[1] == ARGV[1] and h[2] == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'session')
  redis.call('PUBLISH', ARGV[4], ARGV[3])
  return 1
end
return 0
)lua";

// KEYS[1] session key, KEYS[2] lease hash; ARGV[1] sid, ARGV[2] the guard
// token, ARGV[3..7] the record (period id, started, ended, its token, outcome
// name). ADR 0048, as memory_store.cpp: applied only while the hash names the
// session with that token (a release's guard), a start only above the stored
// period id, an end only to it; period ids compared as decimal strings, exact
// beyond 2^53 where Lua's numbers are not. Returns {code} or {code, the five
// stored fields}: code -1 (our session is gone), 0 (applied), 1 (refused: not
// the holder), 2 (refused: the period).
constexpr char kWriteRunScript[] = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local h = redis.call('HMGET', KEYS[2], 'session', 'token', unpack(RUN_FIELDS))
local function below(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  return a < b
end
local code = 0
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then
  code = 1
elseif ARGV[7] == RUN_RUNNING then
  if h[3] and not below(h[3], ARGV[3]) then code = 2 end
elseif h[3] ~= ARGV[3] then
  code = 2
end
if code == 0 then
  local fields = {}
  for i, f in ipairs(RUN_FIELDS) do
    fields[#fields + 1] = f
    fields[#fields + 1] = ARGV[i + 2]
  end
  redis.call('HSET', KEYS[2], unpack(fields))
  return {0, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]}
end
if not h[3] then return {code} end
return {code, h[3], h[4], h[5], h[6], h[7]}
)lua";

// KEYS[1] session key, KEYS[2] its lease set; ARGV[1] sid, ARGV[2] prefix.
// Frees (and publishes) every lease the session holds, then ends it.
// Its permit entries (ADR 0046) too, publishing once per resource.
constexpr char kCloseScript[] = R"lua(
local names = redis.call('SMEMBERS', KEYS[2])
local freed, resources, seen = 0, {}, {}
for _, n in ipairs(names) do
  local resource, permit = string.match(n, '^(.+)/(%d+)$')
  if resource then
    local k, f = permits_key(ARGV[2], resource), 'e:' .. permit
    local v = redis.call('HGET', k, f)
    if v and string.match(v, '^%a+ (%S+) ') == ARGV[1] then
      redis.call('HDEL', k, f)
      if not seen[resource] then
        seen[resource] = true
        resources[#resources + 1] = resource
      end
    end
  else
    local k = lease_key(ARGV[2], n)
    if redis.call('HGET', k, 'session') == ARGV[1] then
      redis.call('HDEL', k, 'session')
      redis.call('PUBLISH', released_channel(ARGV[2], n), n)
      freed = freed + 1
    end
  end
end
for _, resource in ipairs(resources) do
  permits_freed(ARGV[2], resource)
  freed = freed + 1
end
redis.call('DEL', KEYS[1], KEYS[2])
return freed
)lua";

// KEYS[1] session key, KEYS[2] its lease set, KEYS[3] the name's permits hash;
// ARGV[1] sid, ARGV[2] prefix, ARGV[3] kind (semaphore|read|write), ARGV[4]
// size, ARGV[5] the writer's intent (0: none), ARGV[6] '1' for a blocking
// writer (leaves or keeps an intent when held), ARGV[7] the resource
// (permit_resource). ADR 0046, as memory_store.cpp: entries of dead sessions
// are swept (and the resource published); then a semaphore is full at its
// size, a read meets a write or an intent, a write meets a write or a read.
// Returns {-1} (our session is gone), {1, permit, token}, {0, the first other
// holder's pttl or -1, the intent left or kept or 0} or {2, size} (refused).
constexpr char kAcquirePermitScript[] = R"lua(
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return {-1} end
local sid, kind = ARGV[1], ARGV[3]
local all = redis.call('HGETALL', KEYS[3])
local seq, epoch, size = 0, 0, 0
local live, ttls, swept = {}, {}, false
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if f == 'seq' then seq = tonumber(v)
  elseif f == 'epoch' then epoch = tonumber(v)
  elseif f == 'size' then size = tonumber(v)
  else
    local k, s = string.match(v, '^(%a+) (%S+) ')
    s = s or ''
    local t = ttls[s]
    if not t then
      t = redis.call('PTTL', session_key(ARGV[2], s))
      ttls[s] = t
    end
    if t == -2 then
      redis.call('HDEL', KEYS[3], f)
      swept = true
    else
      live[#live + 1] = {f, k, s, t}
    end
  end
end
if swept then permits_freed(ARGV[2], ARGV[7]) end
local busy = false
if kind == 'semaphore' then
  if #live > 0 and size ~= tonumber(ARGV[4]) then return {2, size} end
  busy = #live >= tonumber(ARGV[4])
else
  local blocks = kind == 'read' and 'intent' or 'read'
  for _, e in ipairs(live) do busy = busy or e[2] == 'write' or e[2] == blocks end
end
local mine = 'e:' .. ARGV[5]
local function note(permit)
  if redis.call('SADD', KEYS[2], ARGV[7] .. '/' .. permit) == 1 and ttl > 0 and
     redis.call('PTTL', KEYS[2]) == -1 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end
if busy then
  local left = -1
  for _, e in ipairs(live) do
    if e[2] ~= 'intent' and e[3] ~= sid and (left < 0 or e[4] < left) then left = e[4] end
  end
  if kind ~= 'write' or ARGV[6] ~= '1' then return {0, left, 0} end
  for _, e in ipairs(live) do
    if e[1] == mine and e[2] == 'intent' and e[3] == sid then return {0, left, tonumber(ARGV[5])} end
  end
  seq = seq + 1
  local p = string.format('%d', seq)
  redis.call('HSET', KEYS[3], 'seq', p, 'e:' .. p, 'intent ' .. sid .. ' 0')
  note(p)
  return {0, left, seq}
end
if kind == 'write' then
  for _, e in ipairs(live) do
    if e[1] == mine and e[2] == 'intent' and e[3] == sid then redis.call('HDEL', KEYS[3], mine) end
  end
end
seq = seq + 1
local p = string.format('%d', seq)
local token = p
local fields = {'seq', p}
if kind == 'write' then
  fields[3], fields[4] = 'epoch', p
elseif kind == 'read' then
  token = string.format('%d', epoch)
elseif #live == 0 then
  fields[3], fields[4] = 'size', ARGV[4]
end
fields[#fields + 1] = 'e:' .. p
fields[#fields + 1] = kind .. ' ' .. sid .. ' ' .. token
redis.call('HSET', KEYS[3], unpack(fields))
note(p)
return {1, seq, tonumber(token)}
)lua";

// KEYS[1] the name's permits hash; ARGV[1] sid, ARGV[2] permit, ARGV[3] kind,
// ARGV[4] token, ARGV[5] prefix, ARGV[6] the resource. Frees the entry only
// where session, kind and token match, and publishes the resource. As a
// lease's release, the entry stays in the session's set until the next
// keep-alive.
constexpr char kReleasePermitScript[] = R"lua(
local f = 'e:' .. ARGV[2]
if redis.call('HGET', KEYS[1], f) ~= ARGV[3] .. ' ' .. ARGV[1] .. ' ' .. ARGV[4] then return 0 end
redis.call('HDEL', KEYS[1], f)
permits_freed(ARGV[5], ARGV[6])
return 1
)lua";

// ARGV[1] prefix, ARGV[2] the prefix escaped for a SCAN pattern, ARGV[3..] lease
// names (every lease under the prefix when none). Returns {sessions, leases,
// permits}: sessions {id, client name, pttl, ...} of every live session, leases
// {name, token, holder, holder pttl, run, ...} with holder '' (pttl -2) when free or
// when its session is gone, as acquire sees it, and run the name's run record
// (its five fields, or {} when it has none), permits {kind, name, permit,
// token, holder, holder pttl, ...} of the live sessions' entries of the
// semaphores and read/write locks of those names. Read-only; for operators: the
// SCANs walk the whole keyspace, so name the leases on a big server.
constexpr char kInspectScript[] = R"lua(
local p = ARGV[1]
local function scan(pattern)
  local keys, cursor = {}, '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = r[1]
    for _, k in ipairs(r[2]) do keys[#keys + 1] = k end
  until cursor == '0'
  return keys
end
local sessions = {}
local sfrom = string.len(session_key(p, '')) + 1
for _, k in ipairs(scan(session_key(ARGV[2], '*'))) do
  if string.sub(k, -string.len(LEASES_SUFFIX)) ~= LEASES_SUFFIX then
    local ttl = redis.call('PTTL', k)
    if ttl ~= -2 then
      sessions[#sessions + 1] = string.sub(k, sfrom)
      sessions[#sessions + 1] = redis.call('GET', k) or ''
      sessions[#sessions + 1] = ttl
    end
  end
end
local names = {}
if #ARGV > 2 then
  for i = 3, #ARGV do names[#names + 1] = ARGV[i] end
else
  local lfrom = string.len(lease_key(p, '')) + 1
  for _, k in ipairs(scan(lease_key(ARGV[2], '*'))) do names[#names + 1] = string.sub(k, lfrom) end
end
local leases = {}
for _, n in ipairs(names) do
  local h = redis.call('HMGET', lease_key(p, n), 'session', 'token', unpack(RUN_FIELDS))
  local holder, ttl = h[1] or '', -2
  if holder ~= '' then ttl = redis.call('PTTL', session_key(p, holder)) end
  if ttl == -2 then holder = '' end
  leases[#leases + 1] = n
  leases[#leases + 1] = h[2] or '0'
  leases[#leases + 1] = holder
  leases[#leases + 1] = ttl
  leases[#leases + 1] = h[3] and {h[3], h[4], h[5], h[6], h[7]} or {}
end
local permits = {}
local function list(resource, name)
  local all = redis.call('HGETALL', permits_key(p, resource .. name))
  for i = 1, #all, 2 do
    local permit = string.match(all[i], '^e:(%d+)$')
    local kind, holder, token = string.match(all[i + 1], '^(%a+) (%S+) (%d+)$')
    local ttl = -2
    if permit and holder then ttl = redis.call('PTTL', session_key(p, holder)) end
    if ttl ~= -2 then
      for _, x in ipairs({kind, name, permit, token, holder, ttl}) do permits[#permits + 1] = x end
    end
  end
end
for _, resource in ipairs({SEM_RESOURCE, RW_RESOURCE}) do
  if #ARGV > 2 then
    for i = 3, #ARGV do list(resource, ARGV[i]) end
  else
    local from = string.len(permits_key(p, resource)) + 1
    for _, k in ipairs(scan(permits_key(ARGV[2], resource) .. '*')) do
      list(resource, string.sub(k, from))
    end
  end
end
return {sessions, leases, permits}
)lua";

}  // namespace

// SHA-1 of a script, as 40 lower-case hex digits: the name EVALSHA calls it by.
std::string sha1_hex(const std::string& text) {
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  std::string msg = text;
  const uint64_t bits = static_cast<uint64_t>(text.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back('\0');
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((bits >> (i * 8)) & 0xffu));
  auto rol = [](uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  for (size_t off = 0; off < msg.size(); off += 64) {
    uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(msg.data() + off + 4 * i);
      w[i] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    }
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999u;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1u;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDCu;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6u;
      }
      const uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rol(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h) {
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(v >> shift) & 0xfu]);
  }
  return out;
}

namespace {

// A permit's hash from its resource (permit_resource: "sem/NAME" or
// "rw/NAME"), and what follows a permit entry's going: a semaphore without
// entries drops its size (its seq alone is left), and the release is published.
constexpr char kLuaPermits[] = R"lua(
local function is_semaphore(resource)
  return string.sub(resource, 1, string.len(SEM_RESOURCE)) == SEM_RESOURCE
end
local function permits_key(p, resource)
  if is_semaphore(resource) then
    return p .. SEM_KEY .. string.sub(resource, string.len(SEM_RESOURCE) + 1)
  end
  return p .. RW_KEY .. string.sub(resource, string.len(RW_RESOURCE) + 1)
end
local function permits_freed(p, resource)
  local k = permits_key(p, resource)
  if is_semaphore(resource) and redis.call('HLEN', k) <= 2 then redis.call('HDEL', k, 'size') end
  redis.call('PUBLISH', released_channel(p, resource), resource)
end
)lua";

}  // namespace

std::string redis_lua_keys() {
  using namespace redis_layout;
  const std::string q = "'";
  std::string lua =
      "local function session_key(p, sid) return p .. " + q + kSession + q + " .. sid end\n";
  lua += "local LEASES_SUFFIX = " + q + kLeases + q + "\n";
  lua += "local function lease_key(p, name) return p .. " + q + kLease + q + " .. name end\n";
  lua += "local function released_channel(p, name) return p .. " + q + kReleased + q +
         " .. name end\n";
  lua += "local SEM_RESOURCE, RW_RESOURCE = " + q + permit_resource(PermitKind::kSemaphore, "") +
         q + ", " + q + permit_resource(PermitKind::kRead, "") + q + "\n";
  lua += "local SEM_KEY, RW_KEY = " + q + kSem + q + ", " + q + kRw + q + "\n";
  // The run record's fields in the lease hash (ADR 0048), in the order the
  // replies carry them.
  std::string sep = "local RUN_FIELDS = {";
  for (const char* f : kRunFields) {
    lua += sep + q + f + q;
    sep = ", ";
  }
  lua += "}\n";
  lua += "local RUN_RUNNING = " + q + run_outcome_name(RunOutcome::kRunning) + q + "\n";
  return lua + kLuaPermits;
}

namespace {

RedisScript make_script(const char* body) {
  RedisScript s;
  s.body = redis_lua_keys() + body;
  s.sha = sha1_hex(s.body);
  return s;
}

}  // namespace

const RedisScript& script(int which) {
  static const RedisScript scripts[] = {
      make_script(kOpenScript),          make_script(kKeepAliveScript),
      make_script(kAcquireScript),       make_script(kReleaseScript),
      make_script(kCloseScript),         make_script(kInspectScript),
      make_script(kAcquirePermitScript), make_script(kReleasePermitScript),
      make_script(kWriteRunScript)};
  return scripts[which];
}

}  // namespace simba
