/* The in-process fencing recipe (examples/fencing/fencing_inproc.c) passes the kit. */
#include "fencing_inproc.h"
#include "tck_test.h"

static int mem_reset(void *ud) {
  fence_mem_reset(ud);
  return 0;
}
static int mem_write(void *ud, uint64_t token, const char *value) {
  return fence_mem_write(ud, token, value);
}
static int mem_read(void *ud, char *buf, size_t cap) { return fence_mem_read(ud, buf, cap); }

int main(void) {
  fence_mem_t mem;
  simba_tck_resource_t res;
  simba_tck_options_t opts = tck_options(300);
  if (fence_mem_init(&mem) != 0) return 1;
  memset(&res, 0, sizeof res);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.reset = mem_reset;
  res.write = mem_write;
  res.read = mem_read;
  res.ud = &mem;
  tck_expect_pass("in-process recipe (check and write under one mutex)", &res, &opts);
  /* The defaults too (NULL options), on a smaller budget under the sanitizers. */
  if (getenv("SIMBA_SANITIZER") == NULL && getenv("SIMBA_VALGRIND") == NULL) {
    tck_expect_pass("in-process recipe, default options", &res, NULL);
  }
  fence_mem_destroy(&mem);
  return tck_finish("tck_inproc");
}
