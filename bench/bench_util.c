#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

int64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void bench_samples_init(bench_samples_t *s) {
  s->v = NULL;
  s->n = s->cap = 0;
}

void bench_samples_free(bench_samples_t *s) {
  free(s->v);
  bench_samples_init(s);
}

int bench_samples_push(bench_samples_t *s, int64_t ns) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    int64_t *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = ns;
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Nearest rank: the smallest sample with at least p% of the samples at or below it. */
static double rank_us(const bench_samples_t *s, double p) {
  size_t k = (size_t)ceil(p / 100.0 * (double)s->n);
  if (k < 1) k = 1;
  if (k > s->n) k = s->n;
  return (double)s->v[k - 1] / 1e3;
}

bench_stats_t bench_summarize(bench_samples_t *s) {
  bench_stats_t st;
  memset(&st, 0, sizeof st);
  if (s->n == 0) return st;
  qsort(s->v, s->n, sizeof *s->v, cmp_i64);
  double sum = 0;
  for (size_t i = 0; i < s->n; i++) sum += (double)s->v[i];
  st.n = s->n;
  st.min_us = (double)s->v[0] / 1e3;
  st.max_us = (double)s->v[s->n - 1] / 1e3;
  st.mean_us = sum / (double)s->n / 1e3;
  st.p50_us = rank_us(s, 50);
  st.p90_us = rank_us(s, 90);
  st.p99_us = rank_us(s, 99);
  return st;
}

int64_t bench_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kb = strtoll(line + 6, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kb;
}

void bench_machine(char *buf, size_t len, int *cpus) {
  char model[160] = "unknown cpu";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        const char *colon = strchr(line, ':');
        if (colon) {
          colon++;
          while (*colon == ' ' || *colon == '\t') colon++;
          snprintf(model, sizeof model, "%s", colon);
          model[strcspn(model, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(f);
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  *cpus = n > 0 ? (int)n : 0;
  struct utsname u;
  if (uname(&u) == 0) {
    snprintf(buf, len, "%d cpus, %s, %s %s %s", *cpus, model, u.sysname, u.release, u.machine);
  } else {
    snprintf(buf, len, "%d cpus, %s", *cpus, model);
  }
}

void bench_utc_now(char *buf, size_t len) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --- JSON -------------------------------------------------------------------- */

void bench_json_init(bench_json_t *j, FILE *f) {
  memset(j, 0, sizeof *j);
  j->f = f;
  j->first[0] = 1;
}

static void put_escaped(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"':
        fputs("\\\"", f);
        break;
      case '\\':
        fputs("\\\\", f);
        break;
      case '\n':
        fputs("\\n", f);
        break;
      case '\t':
        fputs("\\t", f);
        break;
      default:
        if (*p < 0x20) {
          fprintf(f, "\\u%04x", *p);
        } else {
          fputc(*p, f);
        }
    }
  }
  fputc('"', f);
}

/* Separator, indentation and key of the next member. */
static void member(bench_json_t *j, const char *key) {
  if (!j->first[j->depth]) fputc(',', j->f);
  j->first[j->depth] = 0;
  if (j->depth > 0) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  if (key) {
    put_escaped(j->f, key);
    fputs(": ", j->f);
  }
}

static void open_level(bench_json_t *j, const char *key, char c) {
  member(j, key);
  fputc(c, j->f);
  if (j->depth < 31) j->depth++;
  j->first[j->depth] = 1;
}

static void close_level(bench_json_t *j, char c) {
  int empty = j->first[j->depth];
  if (j->depth > 0) j->depth--;
  if (!empty) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  fputc(c, j->f);
  if (j->depth == 0) fputc('\n', j->f);
}

void bench_json_begin_object(bench_json_t *j, const char *key) { open_level(j, key, '{'); }
void bench_json_end_object(bench_json_t *j) { close_level(j, '}'); }
void bench_json_begin_array(bench_json_t *j, const char *key) { open_level(j, key, '['); }
void bench_json_end_array(bench_json_t *j) { close_level(j, ']'); }

void bench_json_string(bench_json_t *j, const char *key, const char *value) {
  member(j, key);
  if (value) {
    put_escaped(j->f, value);
  } else {
    fputs("null", j->f);
  }
}

void bench_json_int(bench_json_t *j, const char *key, int64_t value) {
  member(j, key);
  fprintf(j->f, "%lld", (long long)value);
}

void bench_json_double(bench_json_t *j, const char *key, double value) {
  member(j, key);
  if (isnan(value) || isinf(value)) {
    fputs("null", j->f);
  } else {
    fprintf(j->f, "%.3f", value);
  }
}

void bench_json_bool(bench_json_t *j, const char *key, int value) {
  member(j, key);
  fputs(value ? "true" : "false", j->f);
}

void bench_json_stats(bench_json_t *j, const char *key, const bench_stats_t *s) {
  bench_json_begin_object(j, key);
  bench_json_int(j, "n", (int64_t)s->n);
  bench_json_double(j, "min_us", s->min_us);
  bench_json_double(j, "p50_us", s->p50_us);
  bench_json_double(j, "p90_us", s->p90_us);
  bench_json_double(j, "p99_us", s->p99_us);
  bench_json_double(j, "max_us", s->max_us);
  bench_json_double(j, "mean_us", s->mean_us);
  bench_json_end_object(j);
}
