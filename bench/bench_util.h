/* Helpers of the benchmark program: the monotonic clock, latency samples and
 * their percentiles, the process's RSS, and a small JSON writer. Plain C11 +
 * POSIX; nothing here knows Simba or a backend. */
#ifndef SIMBA_BENCH_UTIL_H
#define SIMBA_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the
 * machine, so two processes can compare their readings. */
int64_t bench_now_ns(void);
void bench_sleep_ns(int64_t ns);

/* A growable array of durations in nanoseconds. */
typedef struct bench_samples {
  int64_t *v;
  size_t n, cap;
} bench_samples_t;

void bench_samples_init(bench_samples_t *s);
void bench_samples_free(bench_samples_t *s);
/* Returns 0, or -1 when out of memory (the sample is dropped). */
int bench_samples_push(bench_samples_t *s, int64_t ns);

/* Summary of a sample set, in microseconds. */
typedef struct bench_stats {
  size_t n;
  double min_us, p50_us, p90_us, p99_us, max_us, mean_us;
} bench_stats_t;

/* Sorts the samples (in place) and summarizes them; percentiles are
 * nearest-rank. All zero when there is no sample. */
bench_stats_t bench_summarize(bench_samples_t *s);

/* VmRSS of this process in KiB, from /proc/self/status; -1 if unreadable. */
int64_t bench_rss_kb(void);

/* Machine description for the report: "<n> cpus, <model>, <kernel>". */
void bench_machine(char *buf, size_t len, int *cpus);
/* UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void bench_utc_now(char *buf, size_t len);

/* A minimal streaming JSON writer (no pretty printing beyond newlines between
 * members of an object). Keys and string values are escaped. */
typedef struct bench_json {
  FILE *f;
  int depth;
  int first[32]; /* per nesting level: no member written yet */
} bench_json_t;

void bench_json_init(bench_json_t *j, FILE *f);
void bench_json_begin_object(bench_json_t *j, const char *key); /* key NULL inside arrays/top */
void bench_json_end_object(bench_json_t *j);
void bench_json_begin_array(bench_json_t *j, const char *key);
void bench_json_end_array(bench_json_t *j);
void bench_json_string(bench_json_t *j, const char *key, const char *value);
void bench_json_int(bench_json_t *j, const char *key, int64_t value);
void bench_json_double(bench_json_t *j, const char *key, double value); /* NaN -> null */
void bench_json_bool(bench_json_t *j, const char *key, int value);
void bench_json_stats(bench_json_t *j, const char *key, const bench_stats_t *s);

#endif
