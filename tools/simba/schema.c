/* simba schema: print the DDL a backend installs (simba_backend_schema), for a
 * DBA to review and apply by hand. Parses the URL only: nothing connects. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char kSchemaUsage[] =
    "usage: simba schema [OPTIONS]\n"
    "\n"
    "Print the SQL script that creates Simba's tables and functions on the\n"
    "backend (postgresql:// only, in the URL's schema=, default public), as one\n"
    "transaction. Apply it with `psql -f FILE`, then run clients with\n"
    "create=false. Nothing connects: no server is needed.\n"
    "\n"
    "Common options: simba --help (only --backend matters here).\n";

int cli_schema(cli_common_t *common, int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(kSchemaUsage, stdout);
      return 0;
    }
    const int r = cli_common_option(common, argc, argv, &i);
    if (r < 0) return EXIT_SIMBA_FAILED;
    if (r > 0) continue;
    if (a[0] == '-') {
      LOG_ERROR("schema: unknown option %s (see simba schema --help)", a);
    } else {
      LOG_ERROR("schema: unexpected argument \"%s\" (see simba schema --help)", a);
    }
    return EXIT_SIMBA_FAILED;
  }
  if (!common->backend || !*common->backend) {
    LOG_ERROR("no backend: pass --backend URL or set SIMBA_BACKEND");
    return EXIT_SIMBA_FAILED;
  }
  char *text = NULL;
  const int rc = simba_backend_schema(common->backend, &text);
  if (rc != SIMBA_OK) {
    LOG_ERROR("schema: %s", simba_last_error());
    return EXIT_SIMBA_FAILED;
  }
  const int failed = fputs(text, stdout) == EOF || fflush(stdout) != 0;
  simba_free(text);
  if (failed) {
    LOG_ERROR("schema: cannot write the script to stdout");
    return EXIT_SIMBA_FAILED;
  }
  return 0;
}
