/* simba: run a command while leader, run a command under a lock, show what a
 * backend holds, follow who holds a name, and print a backend's DDL. Options
 * shared by every command, and the dispatch. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    "  --backend URL          memory://, redis://, postgresql:// or zookeeper:// URL\n"
    "                         (default: $SIMBA_BACKEND)\n"
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

/* Options that map onto one configuration key, with their environment variable. */
static const struct {
  const char *option;
  const char *key;
  const char *env;
} kConfigOptions[] = {
    {"--lease-duration", "session.lease-duration", "SIMBA_SESSION_LEASE_DURATION"},
    {"--renew-interval", "session.renew-interval", "SIMBA_SESSION_RENEW_INTERVAL"},
    {"--drift", "session.drift", "SIMBA_SESSION_DRIFT"},
    {"--margin", "session.margin", "SIMBA_SESSION_MARGIN"},
    {"--retry-jitter", "session.retry-jitter", "SIMBA_SESSION_RETRY_JITTER"},
    {"--min-backoff", "session.min-backoff", "SIMBA_SESSION_MIN_BACKOFF"},
    {"--client-name", "client.name", "SIMBA_CLIENT_NAME"},
};
#define N_CONFIG_OPTIONS (sizeof kConfigOptions / sizeof kConfigOptions[0])

static bool set_key(simba_config_t *cfg, const char *what, const char *key, const char *value) {
  if (simba_config_set(cfg, key, value) != SIMBA_OK) {
    LOG_ERROR("%s: %s", what, simba_last_error());
    return false;
  }
  return true;
}

static const char *option_value(const char *name, int argc, char **argv, int *i, bool *matched) {
  const char *arg = argv[*i];
  const size_t n = strlen(name);
  *matched = false;
  if (strncmp(arg, name, n) != 0) return NULL;
  if (arg[n] == '=') {
    *matched = true;
    return arg + n + 1;
  }
  if (arg[n] != '\0') return NULL;
  *matched = true;
  if (*i + 1 >= argc) {
    LOG_ERROR("%s needs a value", name);
    return NULL;
  }
  return argv[++*i];
}

int cli_common_option(cli_common_t *common, int argc, char **argv, int *i) {
  const char *arg = argv[*i];
  if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
    cli_verbosity = cli_verbosity < 0 ? 1 : cli_verbosity + 1;
    return 1;
  }
  if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
    cli_verbosity = -1;
    return 1;
  }
  bool matched = false;
  const char *v = option_value("--backend", argc, argv, i, &matched);
  if (matched) {
    if (!v) return -1;
    common->backend = v;
    return 1;
  }
  for (size_t k = 0; k < N_CONFIG_OPTIONS; ++k) {
    v = option_value(kConfigOptions[k].option, argc, argv, i, &matched);
    if (matched) {
      if (!v) return -1;
      if (strcmp(kConfigOptions[k].key, "client.name") == 0) common->client_named = true;
      return set_key(common->cfg, kConfigOptions[k].option, kConfigOptions[k].key, v) ? 1 : -1;
    }
  }
  v = option_value("--set", argc, argv, i, &matched);
  if (matched) {
    if (!v) return -1;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v) {
      LOG_ERROR("--set %s: expected KEY=VALUE", v);
      return -1;
    }
    char key[128];
    const size_t len = (size_t)(eq - v);
    if (len >= sizeof key) {
      LOG_ERROR("--set: key too long");
      return -1;
    }
    memcpy(key, v, len);
    key[len] = '\0';
    if (strcmp(key, "client.name") == 0) common->client_named = true;
    return set_key(common->cfg, "--set", key, eq + 1) ? 1 : -1;
  }
  return 0;
}

simba_client_t *cli_open_client(const cli_common_t *common) {
  if (!common->backend || !*common->backend) {
    LOG_ERROR("no backend: pass --backend URL or set SIMBA_BACKEND");
    return NULL;
  }
  if (!common->client_named) {
    /* Who this is, for `simba status` on another machine: host and pid. */
    char host[64] = "?", name[96];
    gethostname(host, sizeof host - 1);
    snprintf(name, sizeof name, "%s/%ld", host, (long)getpid());
    simba_config_set(common->cfg, "client.name", name);
  }
  if (simba_config_validate(common->cfg) != SIMBA_OK) {
    LOG_ERROR("configuration: %s", simba_last_error());
    return NULL;
  }
  simba_client_t *c = NULL;
  if (simba_client_open(&c, common->backend, common->cfg) != SIMBA_OK) {
    LOG_ERROR("cannot open the backend: %s", simba_last_error());
    return NULL;
  }
  return c;
}

int64_t cli_remaining_floor_ms(const simba_config_t *cfg) {
  int64_t lease = 0, renew = 0, margin = 0;
  double drift = 0;
  simba_config_get_ms(cfg, "session.lease-duration", &lease);
  simba_config_get_ms(cfg, "session.renew-interval", &renew);
  simba_config_get_ms(cfg, "session.margin", &margin);
  simba_config_get_double(cfg, "session.drift", &drift);
  return (int64_t)((double)lease * (1.0 - drift)) - margin - renew;
}

int main(int argc, char **argv) {
  cli_common_t common = {getenv("SIMBA_BACKEND"), NULL, false};
  if (simba_config_new(&common.cfg) != SIMBA_OK) {
    LOG_ERROR("%s", simba_last_error());
    return EXIT_SIMBA_FAILED;
  }
  int status = EXIT_SIMBA_FAILED;
  for (size_t k = 0; k < N_CONFIG_OPTIONS; ++k) {
    const char *v = getenv(kConfigOptions[k].env);
    if (!v || !*v) continue;
    if (!set_key(common.cfg, kConfigOptions[k].env, kConfigOptions[k].key, v)) goto out;
    if (strcmp(kConfigOptions[k].key, "client.name") == 0) common.client_named = true;
  }
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
    LOG_ERROR("unknown command \"%s\" (expected run, lock, status, watch or schema; see simba "
              "--help)", command);
  }
out:
  simba_config_free(common.cfg);
  return status;
}
