/* simba status [NAME...]: the sessions and leases a backend holds, as a table
 * or as the library's JSON (simba_client_inspect_json). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static const char kStatusUsage[] =
    "usage: simba status [NAME...] [--json] [--timeout D] [OPTIONS]\n"
    "\n"
    "Show the live sessions on the backend and, for each NAME (every lease the\n"
    "backend knows when none is given), its last token and its holder, then each\n"
    "permit held of a semaphore or read/write lock NAME (kind, permit id, token,\n"
    "holder; \"intent\" is a writer waiting). One read: it may be stale by the\n"
    "time it prints. memory:// backends live inside one process, so another\n"
    "process sees nothing of them.\n"
    "\n"
    "  --json         print the JSON of simba_client_inspect_json() (simba.h)\n"
    "  --timeout D    how long to wait for the backend (default 5s)\n"
    "\n"
    "Common options: simba --help.\n";

static void print_remaining(const json_value_t *ms) {
  if (!ms || ms->type != JSON_NUMBER) {
    printf("-");
    return;
  }
  printf("%.1fs", ms->number / 1000.0);
}

/* A permit entry's row has a "kind" (simba_client_inspect_json, 1.5); a lease's none. */
static bool is_permit(const json_value_t *row) {
  const json_value_t *kind = json_get(row, "kind");
  return kind && kind->type == JSON_STRING;
}

static double number_or_zero(const json_value_t *v) {
  return v && v->type == JSON_NUMBER ? v->number : 0.0;
}

/* The permits held: kind, permit id, token and holder of each entry. */
static void print_permits(const json_value_t *leases) {
  size_t n = 0;
  for (size_t i = 0; leases && i < leases->count; ++i) n += is_permit(&leases->items[i]);
  if (!n) return;
  printf("\nPERMITS (%zu)\n", n);
  printf("  %-32s %-9s %-8s %-8s %-34s %-24s %s\n", "NAME", "KIND", "PERMIT", "TOKEN", "HOLDER",
         "CLIENT", "EXPIRES IN");
  for (size_t i = 0; i < leases->count; ++i) {
    const json_value_t *p = &leases->items[i];
    if (!is_permit(p)) continue;
    printf("  %-32s %-9s %-8.0f %-8.0f %-34s %-24s ", json_string(p, "name"),
           json_string(p, "kind"), number_or_zero(json_get(p, "permit")),
           number_or_zero(json_get(p, "token")), json_string(p, "holder"),
           json_string(p, "holder_client"));
    print_remaining(json_get(p, "remaining_ms"));
    printf("\n");
  }
}

static void print_table(const json_value_t *root) {
  const json_value_t *backend = json_get(root, "backend");
  const json_value_t *sessions = json_get(root, "sessions");
  const json_value_t *leases = json_get(root, "leases");
  printf("backend %s\n\n", backend && backend->type == JSON_STRING ? backend->string : "?");

  size_t shown = 0;
  for (size_t i = 0; sessions && i < sessions->count; ++i) {
    const json_value_t *own = json_get(&sessions->items[i], "own");
    if (!(own && own->type == JSON_BOOL && own->boolean)) ++shown;
  }
  printf("SESSIONS (%zu)\n", shown);
  if (shown) printf("  %-34s %-24s %s\n", "ID", "CLIENT", "EXPIRES IN");
  for (size_t i = 0; sessions && i < sessions->count; ++i) {
    const json_value_t *s = &sessions->items[i];
    const json_value_t *own = json_get(s, "own");
    if (own && own->type == JSON_BOOL && own->boolean) continue; /* this status command's */
    printf("  %-34s %-24s ", json_string(s, "id"), json_string(s, "client"));
    print_remaining(json_get(s, "remaining_ms"));
    printf("\n");
  }

  size_t n_leases = 0;
  for (size_t i = 0; leases && i < leases->count; ++i) n_leases += !is_permit(&leases->items[i]);
  printf("\nLEASES (%zu)\n", n_leases);
  if (n_leases) {
    printf("  %-32s %-8s %-34s %-24s %s\n", "NAME", "TOKEN", "HOLDER", "CLIENT", "EXPIRES IN");
  }
  for (size_t i = 0; leases && i < leases->count; ++i) {
    const json_value_t *l = &leases->items[i];
    if (is_permit(l)) continue; /* under PERMITS */
    const json_value_t *token = json_get(l, "token");
    const json_value_t *holder = json_get(l, "holder");
    const bool held = holder && holder->type == JSON_STRING;
    printf("  %-32s %-8.0f %-34s %-24s ", json_string(l, "name"),
           token && token->type == JSON_NUMBER ? token->number : 0.0,
           held ? holder->string : "(free)", held ? json_string(l, "holder_client") : "");
    if (held) {
      print_remaining(json_get(l, "remaining_ms"));
    } else {
      printf("-");
    }
    printf("\n");
  }
  print_permits(leases);
}

int cli_status(cli_common_t *common, int argc, char **argv) {
  bool as_json = false;
  int64_t timeout_ms = 5000;
  const char **names = calloc((size_t)argc, sizeof *names);
  size_t n = 0;
  int status = EXIT_SIMBA_FAILED;
  if (!names) return EXIT_SIMBA_FAILED;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(kStatusUsage, stdout);
      status = 0;
      goto out;
    }
    if (strcmp(a, "--json") == 0) {
      as_json = true;
      continue;
    }
    if (strncmp(a, "--timeout", 9) == 0 && (a[9] == '\0' || a[9] == '=')) {
      const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !cli_parse_duration(v, &timeout_ms) || timeout_ms <= 0) {
        LOG_ERROR("--timeout needs a positive duration such as 500ms or 5s");
        goto out;
      }
      continue;
    }
    const int r = cli_common_option(common, argc, argv, &i);
    if (r < 0) goto out;
    if (r > 0) continue;
    if (a[0] == '-') {
      LOG_ERROR("status: unknown option %s (see simba status --help)", a);
      goto out;
    }
    names[n++] = a;
  }
  if (simba_config_set_logger(common->cfg, cli_library_log, NULL, SIMBA_LOG_DEBUG) != SIMBA_OK) {
    LOG_ERROR("%s", simba_last_error());
    goto out;
  }
  /* Name this command's own session, unless the user named it. */
  if (!common->client_named) {
    simba_config_set(common->cfg, "client.name", "simba status");
    common->client_named = true;
  }
  simba_client_t *c = cli_open_client(common);
  if (!c) goto out;
  char *json = NULL;
  if (simba_client_inspect_json(c, names, n, timeout_ms, &json) != SIMBA_OK) {
    LOG_ERROR("cannot read the backend: %s", simba_last_error());
  } else if (as_json) {
    printf("%s\n", json);
    status = 0;
  } else {
    json_value_t *root = json_parse(json);
    if (!root) {
      LOG_ERROR("unexpected answer from the library: %s", json);
    } else {
      print_table(root);
      json_free(root);
      status = 0;
    }
  }
  simba_free(json);
  simba_client_close(c);
out:
  free(names);
  return status;
}
