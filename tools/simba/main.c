/* simba: run a command while leader, run a command under a lock, show what a
 * backend holds, follow who holds a name, and print a backend's DDL. The usage
 * and the dispatch; the options every command takes are in common.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char kUsage[] =
    "usage: simba [OPTIONS] COMMAND [ARGS...]\n"
    "\n"
    "Commands:\n"
    "  run NAME -- CMD [ARGS...]    run CMD whenever this process leads NAME\n"
    "                               (--listen ADDR: /healthz, /leader, /metrics)\n"
    "  lock NAME -- CMD [ARGS...]   run CMD once while holding the lock NAME\n"
    "  status [NAME...]             sessions and leases on the backend\n"
    "  watch NAME...                print each change of NAME's holder\n"
    "  schema                       print the DDL a postgresql:// backend installs\n"
    "\n"
    "Options (any command; also after the command name):\n"
    "  --backend URL          memory://, redis://, postgresql://, zookeeper:// or\n"
    "                         etcd:// URL (default: $SIMBA_BACKEND)\n"
    "  --lease-duration D     session lease ($SIMBA_SESSION_LEASE_DURATION, default 15s)\n"
    "  --renew-interval D     keep-alive interval ($SIMBA_SESSION_RENEW_INTERVAL)\n"
    "  --drift X              clock drift bound, e.g. 0.01 ($SIMBA_SESSION_DRIFT)\n"
    "  --margin D             safety margin ($SIMBA_SESSION_MARGIN)\n"
    "  --retry-jitter D       candidate retry jitter ($SIMBA_SESSION_RETRY_JITTER)\n"
    "  --min-backoff D        keep-alive backoff floor ($SIMBA_SESSION_MIN_BACKOFF)\n"
    "  --client-name TEXT     shown by `simba status` ($SIMBA_CLIENT_NAME)\n"
    "  --set KEY=VALUE        any configuration key of simba.h\n"
    "  -v, --verbose          more log lines (debug, and the library's info)\n"
    "  -q, --quiet            warnings and errors only\n"
    "  -h, --help             this help; `simba COMMAND --help` for a command's\n"
    "  --version              the library's version\n"
    "\n"
    "Durations are whole milliseconds with an optional suffix: 250ms, 15s, 2m.\n"
    "Exit statuses: docs/cli.md (124 lock timeout, 125 simba failed, 126/127 the\n"
    "command could not run, 128+N signal N; otherwise the command's own status).\n";

int main(int argc, char **argv) {
  cli_common_t common;
  int status = EXIT_SIMBA_FAILED;
  if (!cli_common_init(&common)) goto out;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(kUsage, stdout);
      status = 0;
      goto out;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("simba %s\n", simba_version_string());
      status = 0;
      goto out;
    }
    const int r = cli_common_option(&common, argc, argv, &i);
    if (r < 0) goto out;
    if (r == 0) {
      LOG_ERROR("unknown option %s (see simba --help)", argv[i]);
      goto out;
    }
  }
  if (i >= argc) {
    fputs(kUsage, stderr);
    goto out;
  }
  const char *command = argv[i];
  /* Commands see their own name as argv[0]. */
  if (strcmp(command, "run") == 0) {
    status = cli_run(&common, argc - i, argv + i);
  } else if (strcmp(command, "lock") == 0) {
    status = cli_lock(&common, argc - i, argv + i);
  } else if (strcmp(command, "status") == 0) {
    status = cli_status(&common, argc - i, argv + i);
  } else if (strcmp(command, "schema") == 0) {
    status = cli_schema(&common, argc - i, argv + i);
  } else if (strcmp(command, "watch") == 0) {
    status = cli_watch(&common, argc - i, argv + i);
  } else {
    LOG_ERROR(
        "unknown command \"%s\" (expected run, lock, status, watch or schema; see simba "
        "--help)",
        command);
  }
out:
  simba_config_free(common.cfg);
  return status;
}
