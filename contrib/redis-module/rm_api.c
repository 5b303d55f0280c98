/* The Redis module API pointers declared in rm_api.h, and their loader. */
#include "rm_api.h"

#include <string.h>

#define RM_DEFINE(ret, name, params) ret(*RedisModule_##name) params = NULL;
RM_API_FUNCTIONS(RM_DEFINE)
#undef RM_DEFINE

typedef int (*rm_get_api_fn)(const char *name, void *out);

int rm_api_load(RedisModuleCtx *ctx, const char **missing) {
  /* The documented entry point: the context's first word is RedisModule_GetApi. */
  void *first;
  rm_get_api_fn get_api;
  memcpy(&first, (const void *)ctx, sizeof first);
  /* A data pointer to a function pointer: the server stored it this way. */
  memcpy(&get_api, &first, sizeof get_api);
  *missing = NULL;
  if (get_api == NULL) {
    *missing = "RedisModule_GetApi";
    return RM_ERR;
  }
#define RM_LOAD(ret, name, params)                                        \
  if (get_api("RedisModule_" #name, (void *)&RedisModule_##name) != RM_OK || \
      RedisModule_##name == NULL) {                                       \
    *missing = "RedisModule_" #name;                                      \
    return RM_ERR;                                                        \
  }
  RM_API_FUNCTIONS(RM_LOAD)
#undef RM_LOAD
  return RM_OK;
}
