/* Fencing recipe: a resource kept in Redis (docs/fencing.md).
 *
 * One Lua script compares the token with the highest accepted one and writes
 * both the token and the value, atomically on the server. The two keys share the
 * hash tag {resource}, so they live in one hash slot and the script also runs on
 * Redis Cluster:
 *
 *     {resource}:token   the highest token accepted
 *     {resource}:value   the value written with it
 *
 * Lua numbers are doubles: tokens are compared exactly up to 2^53, far above what
 * Simba's backends hand out (+1 per term; ZooKeeper's czxid is epoch << 32 | counter).
 */
#ifndef SIMBA_EXAMPLE_FENCING_REDIS_H
#define SIMBA_EXAMPLE_FENCING_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* The script: KEYS[1] = {resource}:token, KEYS[2] = {resource}:value,
 * ARGV[1] = token, ARGV[2] = value. Returns 1 (accepted) or 0 (stale). */
extern const char fence_redis_script[];

/* Write @p value to @p resource with the writer's token, in one EVAL:
 * 1 accepted, 0 rejected (stale owner: nothing changed), -1 error (connection
 * or Redis error; the write may or may not have landed, so retry with the SAME
 * token and value, which an accepted first attempt accepts again). */
int fence_redis_write(redisContext *c, const char *resource, uint64_t token, const char *value);

/* Read the value: 1 (copied into buf, NUL-terminated), 0 (none), -1 error. */
int fence_redis_read(redisContext *c, const char *resource, char *buf, size_t cap);

/* Delete the resource's two keys: 0, or -1 on error. */
int fence_redis_delete(redisContext *c, const char *resource);

#endif
