#include "backend/redis/redis_scripts.h"

#include <cstdint>
#include <string>

#include "backend/redis/redis_keys.h"

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
// for every lease of the set whose hash still names the session (the others
// leave the set).
constexpr char kKeepAliveScript[] = R"lua(
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return {-1} end
local out = {redis.call('PTTL', KEYS[1])}
local names = redis.call('SMEMBERS', KEYS[2])
for _, n in ipairs(names) do
  local h = redis.call('HMGET', lease_key(ARGV[2], n), 'session', 'token')
  if h[1] == ARGV[3] then
    out[#out + 1] = n
    out[#out + 1] = h[2]
  else
    redis.call('SREM', KEYS[2], n)
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return out
)lua";

// KEYS[1] session key, KEYS[2] its lease set, KEYS[3] lease hash; ARGV[1] sid,
// ARGV[2] prefix, ARGV[3] name. Returns {-1} (our session is gone), {0, pttl}
// (held by a live session, ours included: never two terms of one name for one
// session; pttl -1 when unknown) or {1, token}.
// One write in the common case (every write is in the AOF and fsynced): the
// token and the holder in one HSET, and the name usually still in the set
// from an earlier term (a release leaves it to the keep-alive), with the
// set's expiry set only when the set is new.
constexpr char kAcquireScript[] = R"lua(
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return {-1} end
local h = redis.call('HMGET', KEYS[3], 'session', 'token')
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
return {1, token}
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

// KEYS[1] session key, KEYS[2] its lease set; ARGV[1] sid, ARGV[2] prefix.
// Frees (and publishes) every lease the session holds, then ends it.
constexpr char kCloseScript[] = R"lua(
local names = redis.call('SMEMBERS', KEYS[2])
local freed = 0
for _, n in ipairs(names) do
  local k = lease_key(ARGV[2], n)
  if redis.call('HGET', k, 'session') == ARGV[1] then
    redis.call('HDEL', k, 'session')
    redis.call('PUBLISH', released_channel(ARGV[2], n), n)
    freed = freed + 1
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
return freed
)lua";

// ARGV[1] prefix, ARGV[2] the prefix escaped for a SCAN pattern, ARGV[3..] lease
// names (every lease under the prefix when none). Returns {sessions, leases}:
// sessions {id, client name, pttl, ...} of every live session, leases {name,
// token, holder, holder pttl, ...} with holder '' (pttl -2) when free or when
// its session is gone, as acquire sees it. Read-only; for operators: the SCANs
// walk the whole keyspace, so name the leases on a big server.
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
  local h = redis.call('HMGET', lease_key(p, n), 'session', 'token')
  local holder, ttl = h[1] or '', -2
  if holder ~= '' then ttl = redis.call('PTTL', session_key(p, holder)) end
  if ttl == -2 then holder = '' end
  leases[#leases + 1] = n
  leases[#leases + 1] = h[2] or '0'
  leases[#leases + 1] = holder
  leases[#leases + 1] = ttl
end
return {sessions, leases}
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

std::string redis_lua_keys() {
  using namespace redis_layout;
  const std::string q = "'";
  return "local function session_key(p, sid) return p .. " + q + kSession + q +
         " .. sid end\n"
         "local LEASES_SUFFIX = " +
         q + kLeases + q +
         "\n"
         "local function lease_key(p, name) return p .. " +
         q + kLease + q +
         " .. name end\n"
         "local function released_channel(p, name) return p .. " +
         q + kReleased + q + " .. name end\n";
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
  static const RedisScript scripts[] = {make_script(kOpenScript),    make_script(kKeepAliveScript),
                                        make_script(kAcquireScript), make_script(kReleaseScript),
                                        make_script(kCloseScript),   make_script(kInspectScript)};
  return scripts[which];
}

}  // namespace simba
