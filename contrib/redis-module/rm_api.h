/*
 * The few functions of the Redis module API (Redis 7.0) that simba_redis uses,
 * declared here from the documented API (https://redis.io/docs/reference/modules/
 * modules-api-ref/): Debian ships no redismodule.h. Each is a function pointer
 * that rm_api_load() fills through RedisModule_GetApi, the documented way a
 * module reaches the server: the first word of the RedisModuleCtx passed to
 * RedisModule_OnLoad is the address of RedisModule_GetApi.
 *
 * The types the server keeps opaque stay opaque here; the constants are the
 * documented values of REDISMODULE_OK, REDISMODULE_EVENTLOOP_READABLE,
 * REDISMODULE_EVENT_SHUTDOWN, ... (pinned by the server, which modules built
 * against older headers keep working with).
 */
#ifndef SIMBA_CONTRIB_RM_API_H
#define SIMBA_CONTRIB_RM_API_H

#include <stddef.h>
#include <stdint.h>

#define RM_OK 0
#define RM_ERR 1
#define RM_APIVER_1 1

#define RM_EVENTLOOP_READABLE 1

#define RM_EVENT_SHUTDOWN 5

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleBlockedClient RedisModuleBlockedClient;
typedef long long rm_mstime_t;
typedef uint64_t RedisModuleTimerID;

typedef struct RedisModuleEvent {
  uint64_t id;      /* RM_EVENT_* */
  uint64_t dataver; /* version of the structure passed as `data` */
} RedisModuleEvent;

typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
typedef void (*RedisModuleFreePrivDataFunc)(RedisModuleCtx *ctx, void *privdata);
typedef void (*RedisModuleTimerProc)(RedisModuleCtx *ctx, void *data);
typedef void (*RedisModuleEventLoopFunc)(int fd, void *user_data, int mask);
typedef void (*RedisModuleEventCallback)(RedisModuleCtx *ctx, RedisModuleEvent eid,
                                         uint64_t subevent, void *data);

/* X(return type, name, parameters): every function simba_redis calls. */
#define RM_API_FUNCTIONS(X)                                                                  \
  X(int, IsModuleNameBusy, (const char *name))                                               \
  X(void, SetModuleAttribs, (RedisModuleCtx * ctx, const char *name, int ver, int apiver))   \
  X(int, CreateCommand,                                                                      \
    (RedisModuleCtx * ctx, const char *name, RedisModuleCmdFunc cmdfunc, const char *strflags, \
     int firstkey, int lastkey, int keystep))                                                \
  X(RedisModuleCtx *, GetDetachedThreadSafeContext, (RedisModuleCtx * ctx))                  \
  X(void, FreeThreadSafeContext, (RedisModuleCtx * ctx))                                     \
  X(void, Log, (RedisModuleCtx * ctx, const char *level, const char *fmt, ...))              \
  X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len))                 \
  X(RedisModuleString *, CreateString, (RedisModuleCtx * ctx, const char *ptr, size_t len))  \
  X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * str))                       \
  X(int, WrongArity, (RedisModuleCtx * ctx))                                                 \
  X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *err))                            \
  X(int, ReplyWithSimpleString, (RedisModuleCtx * ctx, const char *msg))                     \
  X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long ll))                            \
  X(int, ReplyWithNull, (RedisModuleCtx * ctx))                                              \
  X(int, ReplyWithCString, (RedisModuleCtx * ctx, const char *buf))                          \
  X(int, ReplyWithStringBuffer, (RedisModuleCtx * ctx, const char *buf, size_t len))         \
  X(int, ReplyWithArray, (RedisModuleCtx * ctx, long len))                                   \
  X(int, ReplyWithMap, (RedisModuleCtx * ctx, long len))                                     \
  X(int, PublishMessage,                                                                     \
    (RedisModuleCtx * ctx, RedisModuleString * channel, RedisModuleString * message))        \
  X(RedisModuleTimerID, CreateTimer,                                                         \
    (RedisModuleCtx * ctx, rm_mstime_t period, RedisModuleTimerProc callback, void *data))   \
  X(int, StopTimer, (RedisModuleCtx * ctx, RedisModuleTimerID id, void **data))              \
  X(int, EventLoopAdd, (int fd, int mask, RedisModuleEventLoopFunc func, void *user_data))   \
  X(int, EventLoopDel, (int fd, int mask))                                                   \
  X(int, SubscribeToServerEvent,                                                             \
    (RedisModuleCtx * ctx, RedisModuleEvent event, RedisModuleEventCallback callback))       \
  X(RedisModuleBlockedClient *, BlockClient,                                                 \
    (RedisModuleCtx * ctx, RedisModuleCmdFunc reply_callback,                                \
     RedisModuleCmdFunc timeout_callback, RedisModuleFreePrivDataFunc free_privdata,         \
     long long timeout_ms))                                                                  \
  X(int, UnblockClient, (RedisModuleBlockedClient * bc, void *privdata))                     \
  X(void *, GetBlockedClientPrivateData, (RedisModuleCtx * ctx))

#define RM_DECLARE(ret, name, params) extern ret(*RedisModule_##name) params;
RM_API_FUNCTIONS(RM_DECLARE)
#undef RM_DECLARE

/*
 * Fill every pointer above from the server. Returns RM_OK, or RM_ERR with
 * *missing naming the first function the server does not have (an older Redis:
 * RedisModule_EventLoopAdd is 7.0).
 */
int rm_api_load(RedisModuleCtx *ctx, const char **missing);

#endif /* SIMBA_CONTRIB_RM_API_H */
