/* The options every command takes (cli.h: cli_common_t), from the environment
 * and the command line, and the client they open. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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

bool cli_common_init(cli_common_t *common) {
  common->backend = getenv("SIMBA_BACKEND");
  common->cfg = NULL;
  common->client_named = false;
  if (simba_config_new(&common->cfg) != SIMBA_OK) {
    LOG_ERROR("%s", simba_last_error());
    return false;
  }
  for (size_t k = 0; k < N_CONFIG_OPTIONS; ++k) {
    const char *v = getenv(kConfigOptions[k].env);
    if (!v || !*v) continue;
    if (!set_key(common->cfg, kConfigOptions[k].env, kConfigOptions[k].key, v)) return false;
    if (strcmp(kConfigOptions[k].key, "client.name") == 0) common->client_named = true;
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
