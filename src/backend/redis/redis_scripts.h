// The Redis backend's Lua scripts (one per operation, so each is one round
// trip) and the SHA-1 that EVALSHA calls each by. The data model they work on
// is written once, in redis_keys.h.
#ifndef SIMBA_BACKEND_REDIS_REDIS_SCRIPTS_H
#define SIMBA_BACKEND_REDIS_REDIS_SCRIPTS_H

#include <string>

namespace simba {

enum RedisScriptId {
  kOpen = 0,
  kKeepAlive,
  kAcquire,
  kRelease,
  kClose,
  kInspect,
  kAcquirePermit,
  kReleasePermit,
  kWriteRun,
  kScriptCount
};

// A script (its key functions, redis_keys.h, then its body) and the SHA-1
// EVALSHA names it by.
struct RedisScript {
  std::string body;
  std::string sha;
};

// The script `which` (a RedisScriptId), its SHA-1 computed once.
const RedisScript& script(int which);

// SHA-1 of `text`, as 40 lower-case hex digits (what SCRIPT LOAD answers).
std::string sha1_hex(const std::string& text);

}  // namespace simba

#endif
