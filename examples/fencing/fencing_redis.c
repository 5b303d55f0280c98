/* Fencing recipe: one Lua script on Redis. See fencing_redis.h. */
#include "fencing_redis.h"

#include <string.h>

const char fence_redis_script[] =
    "local highest = tonumber(redis.call('get', KEYS[1]) or '0')\n"
    "if tonumber(ARGV[1]) < highest then\n"
    "  return 0\n"
    "end\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "redis.call('set', KEYS[2], ARGV[2])\n"
    "return 1\n";

int fence_redis_write(redisContext *c, const char *resource, uint64_t token, const char *value) {
  int rc = -1;
  /* hiredis passes each %s as one argument, spaces and all; "{%s}:token" keeps
   * the hash tag around the resource name. */
  redisReply *r = redisCommand(c, "EVAL %s 2 {%s}:token {%s}:value %llu %s", fence_redis_script,
                               resource, resource, (unsigned long long)token, value);
  if (r == NULL) return -1; /* connection error: c->errstr says which */
  if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
    rc = (int)r->integer;
  }
  freeReplyObject(r);
  return rc;
}

int fence_redis_read(redisContext *c, const char *resource, char *buf, size_t cap) {
  int rc = -1;
  redisReply *r;
  if (cap == 0) return -1;
  r = redisCommand(c, "GET {%s}:value", resource);
  if (r == NULL) return -1;
  if (r->type == REDIS_REPLY_NIL) {
    rc = 0;
  } else if (r->type == REDIS_REPLY_STRING) {
    size_t n = r->len < cap - 1 ? r->len : cap - 1;
    memcpy(buf, r->str, n);
    buf[n] = '\0';
    rc = 1;
  }
  freeReplyObject(r);
  return rc;
}

int fence_redis_delete(redisContext *c, const char *resource) {
  redisReply *r = redisCommand(c, "DEL {%s}:token {%s}:value", resource, resource);
  int rc = r != NULL && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
  if (r) freeReplyObject(r);
  return rc;
}
