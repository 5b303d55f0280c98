/* simba_bench's report: the verdicts on the targets, the table on stdout, and
 * the JSON file (--json). Every Simba figure is reported as a multiple of the
 * raw baseline of this run. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <simba.h>
#include <stdio.h>
#include <string.h>

#include "bench_cycle.h"
#include "simba_bench.h"

static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

static const char *verdict(int met) { return met ? "met" : "MISSED"; }

static void print_row(const char *label, const bench_stats_t *s, const char *extra) {
  printf("  %-44s %6zu %9.1f %9.1f %9.1f  %s\n", label, s->n, s->p50_us, s->p90_us, s->p99_us,
         extra ? extra : "");
}

/* The baseline round trip of a raw result. */
static const bench_stats_t *baseline(const raw_result_t *r) { return &r->op[RAW_OP_WRITE]; }

typedef struct verdicts {
  double cycle_ratio, cycle_ratio_p99, handover_rtts, handover_rtts_p99; /* judged */
  double cycle_tight, cycle_tight_p99, handover_tight, handover_tight_p99;
  int cycle_met, handover_met;
  const lease_result_t *ka; /* the row at TARGET_KEEPALIVE_LEASES, if measured */
  int ka_calls;             /* server calls per keep-alive (raw_backend_t) */
  int ka_met;
} verdicts_t;

/* Each target is judged against the baseline measured in the same conditions
 * (ADR 0013): the cycle against the raw round trips alternating with it, the
 * handover, which starts from processes idle for --handover-gap-ms, against
 * the raw round trip after the same idle pause. The ratios to the tight-loop
 * round trip of the start are printed too (`*_tight`). */
static verdicts_t judge(const raw_backend_t *rb, const results_t *r) {
  verdicts_t v;
  memset(&v, 0, sizeof v);
  const double rtt = r->raw.done ? baseline(&r->raw)->p50_us : NAN;
  const double rtt99 = r->raw.done ? baseline(&r->raw)->p99_us : NAN;
  v.cycle_tight = r->cycle.done ? ratio(r->cycle.cycle.p50_us, 2 * rtt) : NAN;
  v.cycle_tight_p99 = r->cycle.done ? ratio(r->cycle.cycle.p99_us, 2 * rtt99) : NAN;
  if (r->paired_done) {
    v.cycle_ratio = ratio(r->paired_cycle.p50_us, 2 * r->paired_rtt.p50_us);
    v.cycle_ratio_p99 = ratio(r->paired_cycle.p99_us, 2 * r->paired_rtt.p99_us);
  } else {
    v.cycle_ratio = v.cycle_tight;
    v.cycle_ratio_p99 = v.cycle_tight_p99;
  }
  v.cycle_met = v.cycle_ratio <= TARGET_CYCLE_RATIO;
  v.handover_tight = r->handover.done ? ratio(r->handover.h.p50_us, rtt) : NAN;
  v.handover_tight_p99 = r->handover.done ? ratio(r->handover.h.p99_us, rtt99) : NAN;
  if (r->handover.done && r->raw_idle.n) {
    v.handover_rtts = ratio(r->handover.h.p50_us, r->raw_idle.p50_us);
    v.handover_rtts_p99 = ratio(r->handover.h.p99_us, r->raw_idle.p99_us);
  } else {
    v.handover_rtts = v.handover_tight;
    v.handover_rtts_p99 = v.handover_tight_p99;
  }
  v.handover_met = v.handover_rtts <= TARGET_HANDOVER_RTTS;
  for (int i = 0; i < r->n_leases; i++) {
    const lease_result_t *x = &r->leases[i];
    if (x->leases == TARGET_KEEPALIVE_LEASES && !x->slow) v.ka = x;
  }
  /* Exactly one keep-alive per renew interval: as many as whole periods. */
  v.ka_calls = rb->calls_per_keep_alive > 0 ? rb->calls_per_keep_alive : 1;
  v.ka_met = v.ka && v.ka->ok &&
             fabs(v.ka->periods - round(v.ka->periods)) < v.ka->period_tolerance &&
             v.ka->server_calls == (uint64_t)llround(v.ka->periods) * (uint64_t)v.ka_calls;
  return v;
}

/* ------------------------------------------------------------------------- */
/* The table */

static void print_header(const options_t *o, const raw_backend_t *rb, const results_t *r) {
  printf("\nSimba %s benchmarks, %s\n", simba_version_string(), r->date);
  printf("machine: %s\n", r->machine);
  printf("server:  %s (%s), %s\n", r->server_version, r->durability, r->url_redacted);
  printf("calls:   %s\n", rb->calls_desc);
  printf("timing:  lease %lld ms, renew %lld ms; load average at start %s, at end %s\n\n",
         (long long)o->lease_ms, (long long)o->renew_ms, r->loadavg_start, r->loadavg_end);
  printf("  %-44s %6s %9s %9s %9s\n", "latency (us)", "n", "p50", "p90", "p99");
}

static void print_raw_rows(const options_t *o, const raw_backend_t *rb, const results_t *r) {
  char buf[160], label[96];
  if (r->raw.done) {
    for (int op = 0; op < RAW_OP_COUNT; op++) {
      char sv[64] = "";
      if (!isnan(r->raw.server_usec[op])) {
        snprintf(sv, sizeof sv, "%.1f us inside the server", r->raw.server_usec[op]);
      }
      snprintf(label, sizeof label, "%s%s", rb->op_label[op],
               op == RAW_OP_WRITE ? " = RTT (baseline)" : "");
      print_row(label, &r->raw.op[op], sv);
    }
    if (rb->write_pairs) {
      printf("  %-44s (RTT = one raw acquire + one raw release, halved)\n", "");
    }
    if (r->raw_idle.n) {
      snprintf(buf, sizeof buf, "after %d ms idle, like a handover", o->handover_gap_ms);
      print_row("raw RTT after an idle pause", &r->raw_idle, buf);
    }
  }
}

/* What a ratio to the raw baseline reads when --only left the baseline out. */
static const char NO_RAW_RTT[] = "(no raw RTT: --only left it out)";

static void print_cycle_rows(const results_t *r, const verdicts_t *v) {
  char buf[160];
  if (r->cycle.done) {
    snprintf(buf, sizeof buf, "%.2f x 2 RTT (p99 %.2f)", v->cycle_tight, v->cycle_tight_p99);
    print_row("lock acquire+release cycle", &r->cycle.cycle, r->raw.done ? buf : NO_RAW_RTT);
    snprintf(buf, sizeof buf, "%.2f RTT",
             ratio(r->cycle.acquire.p50_us, baseline(&r->raw)->p50_us));
    print_row("  acquire (simba_lock_acquire)", &r->cycle.acquire, r->raw.done ? buf : NULL);
    snprintf(buf, sizeof buf, "%.2f RTT",
             ratio(r->cycle.release.p50_us, baseline(&r->raw)->p50_us));
    print_row("  release (simba_lock_release)", &r->cycle.release, r->raw.done ? buf : NULL);
    if (isnan(r->cycle.server_usec_per_call)) {
      printf("  %-44s %.2f backend calls per cycle\n", "", r->cycle.server_calls_per_cycle);
    } else {
      printf("  %-44s %.2f backend calls per cycle, %.1f us each inside the server\n", "",
             r->cycle.server_calls_per_cycle, r->cycle.server_usec_per_call);
    }
  }
  if (r->paired_done) {
    print_row("raw RTT, alternating with the cycle below", &r->paired_rtt, NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT (p99 %.2f; target <= %.2f: %s)", v->cycle_ratio,
             v->cycle_ratio_p99, TARGET_CYCLE_RATIO, verdict(v->cycle_met));
    print_row("lock cycle, alternating with that RTT", &r->paired_cycle, buf);
  }
}

static void print_handover_rows(const results_t *r, const verdicts_t *v) {
  char buf[160];
  if (r->handover.done || r->handover.failed) {
    snprintf(buf, sizeof buf, "%.2f x the RTT after idle (p99 %.2f; target <= %.0f: %s)",
             v->handover_rtts, v->handover_rtts_p99, TARGET_HANDOVER_RTTS,
             verdict(v->handover_met));
    print_row("handover, step-down -> other's on_elected", &r->handover.h, buf);
    snprintf(buf, sizeof buf, "%.2f x the tight-loop RTT (p99 %.2f)", v->handover_tight,
             v->handover_tight_p99);
    print_row("  (same)", &r->handover.h, buf);
    print_row("  step-down call returns (into the loop)", &r->handover.hop_in, NULL);
    print_row("  old leader's on_revoked (release done)", &r->handover.release_done, NULL);
    print_row("  that on_revoked -> new on_elected", &r->handover.takeover, NULL);
    printf("  %-44s tokens strictly increasing: %s; old leader won its lease back %d times\n", "",
           r->handover.tokens_increasing ? "yes" : "NO", r->handover.regained);
  }
}

/* The server's own lock (raw_backend_t.native_*). */
static void print_native_rows(const options_t *o, const raw_backend_t *rb, const results_t *r) {
  char buf[160];
  if (r->native_cycle_done) {
    print_row("native lock cycle (lock + unlock)", &r->native_cycle, NULL);
    snprintf(buf, sizeof buf, "%.2f x native cycle (p99 %.2f; target <= %.0f: %s)",
             ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us),
             ratio(r->native_simba_cycle.p99_us, r->native_cycle.p99_us), TARGET_NATIVE_CYCLE,
             verdict(ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us) <=
                     TARGET_NATIVE_CYCLE));
    print_row("lock cycle, alternating with the native one", &r->native_simba_cycle, buf);
  }
  if (r->native_handover_done) {
    snprintf(buf, sizeof buf, "unlock call -> other's lock returns, %d ms idle",
             o->handover_gap_ms);
    print_row("native lock handover", &r->native_handover, buf);
    if (r->handover.done) {
      const double x = ratio(r->handover.h.p50_us, r->native_handover.p50_us);
      printf("  %-44s Simba's handover = %.2f x the native one (p99 %.2f; target <= %.0f: %s)\n",
             "", x, ratio(r->handover.h.p99_us, r->native_handover.p99_us), TARGET_NATIVE_HANDOVER,
             verdict(x <= TARGET_NATIVE_HANDOVER));
    }
  }
  if (rb->native_lock_desc && r->native_error[0]) {
    printf("  %-44s native lock: %s\n", "", r->native_error);
  }
}

static const char *const kKindLabels[BENCH_KIND_COUNT] = {"lock", "semaphore", "read", "write"};

/* Each cycle as raw round trips (a lock cycle is two) and against the lock
 * cycle of the same blocks (issue 41). */
static void print_permit_rows(const results_t *r) {
  const permit_result_t *p = &r->permits;
  char buf[160], label[96];
  if (p->done) {
    printf("\n  permit cycles (semaphore of %u), each kind and the RTT in blocks of %d in turns:\n",
           p->permits, kPairBlock);
    print_row("raw RTT, in turns with the cycles below", &p->rtt, NULL);
    for (int k = 0; k < BENCH_KIND_COUNT; k++) {
      snprintf(label, sizeof label, "%s acquire+release cycle", kKindLabels[k]);
      snprintf(buf, sizeof buf, "%.2f RTT (p99 %.2f), acquire %.2f RTT, %.2f x lock",
               ratio(p->cycle[k].p50_us, p->rtt.p50_us), ratio(p->cycle[k].p99_us, p->rtt.p99_us),
               ratio(p->acquire[k].p50_us, p->rtt.p50_us),
               ratio(p->cycle[k].p50_us, p->cycle[BENCH_LOCK].p50_us));
      print_row(label, &p->cycle[k], buf);
    }
    for (int k = 0; k < BENCH_KIND_COUNT && p->counted; k++) {
      printf("  %-44s %.2f backend calls per %s cycle", "", p->calls_per_cycle[k], kKindLabels[k]);
      if (!isnan(p->usec_per_call[k]))
        printf(", %.1f us each inside the server", p->usec_per_call[k]);
      printf("\n");
    }
  }
  if (p->memory_done) {
    for (int k = 0; k < BENCH_KIND_COUNT; k++) {
      snprintf(label, sizeof label, "diag: %s cycle on memory://", kKindLabels[k]);
      snprintf(buf, sizeof buf, "%.2f x lock",
               ratio(p->memory_cycle[k].p50_us, p->memory_cycle[BENCH_LOCK].p50_us));
      print_row(label, &p->memory_cycle[k], buf);
    }
  }
}

/* The diagnostics, --also-durability, and the baseline at the end. */
static void print_other_rows(const raw_backend_t *rb, const results_t *r) {
  char buf[160], label[96];
  if (r->diagnostics_done) {
    print_row("diag: cycle on memory:// (no I/O)", &r->memory_cycle, NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT: no thread hop",
             ratio(r->external_cycle.p50_us, 2 * baseline(&r->raw)->p50_us));
    print_row("diag: cycle, loop.mode=external", &r->external_cycle,
              r->raw.done ? buf : NO_RAW_RTT);
    print_row("diag: snapshot_json (no backend call)", &r->snapshot_hop, NULL);
  }
  if (r->host_executor_done) {
    const bench_stats_t *rows[2][2] = {{&r->host_memory_pool, &r->host_memory_host},
                                       {&r->host_remote_pool, &r->host_remote_host}};
    const double targets[2] = {TARGET_HOST_EXECUTOR_MEMORY, TARGET_HOST_EXECUTOR_REMOTE};
    for (int i = 0; i < 2; i++) {
      const double x = ratio(rows[i][1]->p50_us, rows[i][0]->p50_us);
      snprintf(label, sizeof label, "diag: cycle%s, default pool", i ? "" : " on memory://");
      print_row(label, rows[i][0], NULL);
      snprintf(label, sizeof label, "diag: cycle%s, host executor", i ? "" : " on memory://");
      snprintf(buf, sizeof buf, "%.2f x the pool (target <= %.2f: %s)", x, targets[i],
               verdict(x <= targets[i]));
      print_row(label, rows[i][1], buf);
    }
  }
  if (r->alt_done) {
    printf("\n  with %s:\n", r->alt_durability);
    snprintf(label, sizeof label, "%s = RTT", rb->op_label[RAW_OP_WRITE]);
    print_row(label, baseline(&r->alt_raw), NULL);
    snprintf(buf, sizeof buf, "%.2f x 2 RTT",
             ratio(r->alt_cycle.cycle.p50_us, 2 * baseline(&r->alt_raw)->p50_us));
    print_row("lock acquire+release cycle", &r->alt_cycle.cycle, buf);
  }
  if (r->raw_end.done) {
    snprintf(label, sizeof label, "%s again at the end", rb->op_label[RAW_OP_WRITE]);
    print_row(label, baseline(&r->raw_end), NULL);
  }
}

static void print_lease_table(const options_t *o, const results_t *r, const verdicts_t *v) {
  if (r->n_leases) {
    printf("\n  %7s %10s %10s %8s %9s %9s %11s %9s %9s %8s\n", "leases", "elect ms", "start ms",
           "periods", "calls", "calls/per", "server us/ka", "snap ka", "RSS MiB", "+MiB");
    int slow_rows = 0;
    for (int i = 0; i < r->n_leases; i++) {
      const lease_result_t *x = &r->leases[i];
      slow_rows += x->slow;
      if (!x->ok) {
        printf("  %6d%s  failed: %s\n", x->leases, x->slow ? "*" : " ", x->error);
      } else {
        char sus[32] = "-"; /* unknown with calls_untimed */
        if (!isnan(x->server_usec_per_call)) {
          snprintf(sus, sizeof sus, "%.0f", x->server_usec_per_call);
        }
        printf("  %6d%s %10.1f %10.1f %8.2f %9llu %9.2f %11s %9lld %9.1f %8.1f\n", x->leases,
               x->slow ? "*" : " ", x->elect_ms, x->start_ms, x->periods,
               (unsigned long long)x->server_calls, x->calls_per_period, sus,
               (long long)x->snapshot_keep_alives, (double)x->rss_kb / 1024.0,
               (double)(x->rss_kb - x->rss_before_kb) / 1024.0);
      }
      if (x->acquires_to_elect > x->leases || x->sessions_to_elect > 1) {
        printf("  %7s  to hold them all: %lld acquire calls, %lld sessions, %lld terms revoked\n",
               "", (long long)x->acquires_to_elect, (long long)x->sessions_to_elect,
               (long long)x->revoked);
      }
    }
    if (slow_rows) {
      printf("  * again after a failure, with lease %lld ms, renew %lld ms (not judged)\n",
             (long long)3 * o->slow_renew_ms, (long long)o->slow_renew_ms);
    }
    if (v->ka && v->ka->ok) {
      if (v->ka_calls > 1) {
        printf(
            "  keep-alive at %d leases: %.2f calls per renew interval = %.2f keep-alives of %d "
            "calls (target exactly 1: %s)\n",
            TARGET_KEEPALIVE_LEASES, v->ka->calls_per_period, v->ka->calls_per_period / v->ka_calls,
            v->ka_calls, verdict(v->ka_met));
      } else {
        printf("  keep-alive at %d leases: %.2f calls per renew interval (target exactly 1: %s)\n",
               TARGET_KEEPALIVE_LEASES, v->ka->calls_per_period, verdict(v->ka_met));
      }
    } else if (v->ka) {
      printf(
          "  keep-alive at %d leases: not measured, the client did not keep them all (target "
          "exactly 1: %s)\n",
          TARGET_KEEPALIVE_LEASES, verdict(0));
    }
  }
}

void print_report(const options_t *o, const raw_backend_t *rb, const results_t *r) {
  const verdicts_t v = judge(rb, r);
  print_header(o, rb, r);
  print_raw_rows(o, rb, r);
  print_cycle_rows(r, &v);
  print_handover_rows(r, &v);
  print_native_rows(o, rb, r);
  print_other_rows(rb, r);
  print_permit_rows(r);
  print_lease_table(o, r, &v);
  if (r->handover.failed) printf("\nhandover phase failed: %s\n", r->handover.error);
  printf("\n");
}

/* ------------------------------------------------------------------------- */
/* JSON */

static void json_raw(bench_json_t *j, const char *key, const raw_backend_t *rb,
                     const raw_result_t *r) {
  static const char *const names[RAW_OP_COUNT] = {"ping", "read", "write"};
  bench_json_begin_object(j, key);
  for (int op = 0; op < RAW_OP_COUNT; op++) {
    bench_json_begin_object(j, names[op]);
    bench_json_string(j, "what", rb->op_desc[op]);
    bench_json_stats(j, "latency", &r->op[op]);
    bench_json_double(j, "server_usec_per_call", r->server_usec[op]);
    bench_json_end_object(j);
  }
  bench_json_string(j, "baseline", "write");
  bench_json_end_object(j);
}

static void json_cycle(bench_json_t *j, const char *key, const cycle_result_t *c, double rtt_us) {
  bench_json_begin_object(j, key);
  bench_json_stats(j, "cycle", &c->cycle);
  bench_json_stats(j, "acquire", &c->acquire);
  bench_json_stats(j, "release", &c->release);
  bench_json_double(j, "cycle_p50_over_two_rtt", ratio(c->cycle.p50_us, 2 * rtt_us));
  bench_json_double(j, "server_calls_per_cycle", c->server_calls_per_cycle);
  bench_json_double(j, "server_usec_per_call", c->server_usec_per_call);
  bench_json_int(j, "snapshot_acquires", c->acquires);
  bench_json_int(j, "snapshot_releases", c->releases);
  bench_json_int(j, "snapshot_terms", c->terms);
  bench_json_end_object(j);
}

/* The run: date, version, machine, backend and options. */
static void json_run(bench_json_t *j, const options_t *o, const raw_backend_t *rb,
                     const results_t *r) {
  bench_json_int(j, "schema", 1);
  bench_json_string(j, "date", r->date);
  bench_json_string(j, "simba_version", simba_version_string());
  bench_json_begin_object(j, "machine");
  bench_json_string(j, "description", r->machine);
  bench_json_int(j, "cpus", r->cpus);
  bench_json_string(j, "loadavg_start", r->loadavg_start);
  bench_json_string(j, "loadavg_end", r->loadavg_end);
  bench_json_end_object(j);
  bench_json_begin_object(j, "backend");
  bench_json_string(j, "name", rb->name);
  bench_json_string(j, "url", r->url_redacted);
  bench_json_string(j, "server", r->server_version);
  bench_json_string(j, "durability", r->durability);
  bench_json_string(j, "server_calls_counted_with", rb->calls_desc);
  bench_json_int(j, "server_counts_lag_ms", rb->counts_lag_ms);
  bench_json_bool(j, "baseline_is_mean_of_acquire_and_release", rb->write_pairs);
  bench_json_end_object(j);
  bench_json_begin_object(j, "options");
  bench_json_int(j, "rtt_iterations", o->rtt_iterations);
  bench_json_int(j, "cycle_iterations", o->cycle_iterations);
  bench_json_int(j, "permit_iterations", o->permit_iterations);
  bench_json_int(j, "warmup", o->warmup);
  bench_json_int(j, "handovers", o->handovers);
  bench_json_int(j, "handover_gap_ms", o->handover_gap_ms);
  bench_json_int(j, "handover_cooldown_ms", o->handover_cooldown_ms);
  bench_json_int(j, "lease_duration_ms", o->lease_ms);
  bench_json_int(j, "renew_interval_ms", o->renew_ms);
  bench_json_int(j, "window_periods", o->window_periods);
  bench_json_int(j, "elect_timeout_s", o->elect_timeout_s);
  bench_json_int(j, "slow_renew_ms", o->slow_renew_ms);
  bench_json_end_object(j);
}

static void json_handover(bench_json_t *j, const results_t *r, const verdicts_t *v) {
  bench_json_begin_object(j, "handover");
  bench_json_bool(j, "completed", r->handover.done);
  if (r->handover.failed) bench_json_string(j, "error", r->handover.error);
  bench_json_int(j, "handovers", r->handover.handovers);
  bench_json_stats(j, "latency", &r->handover.h);
  bench_json_double(j, "p50_in_rtt", v->handover_rtts);
  bench_json_double(j, "p99_in_rtt_p99", v->handover_rtts_p99);
  bench_json_double(j, "p50_in_idle_rtt", ratio(r->handover.h.p50_us, r->raw_idle.p50_us));
  bench_json_stats(j, "step_down_call_returned", &r->handover.hop_in);
  bench_json_stats(j, "old_leader_on_revoked", &r->handover.release_done);
  bench_json_stats(j, "on_revoked_to_new_on_elected", &r->handover.takeover);
  bench_json_bool(j, "tokens_strictly_increasing", r->handover.tokens_increasing);
  bench_json_int(j, "regained_by_old_leader", r->handover.regained);
  bench_json_int(j, "first_token", (int64_t)r->handover.first_token);
  bench_json_int(j, "last_token", (int64_t)r->handover.last_token);
  bench_json_end_object(j);
}

/* The baseline, the cycle, the handover and the diagnostics. */
/* The permit cycles: stats, and p50 and p99 as raw round trips. */
static void json_permits(bench_json_t *j, const permit_result_t *p) {
  bench_json_begin_object(j, "permit_cycles");
  bench_json_int(j, "block", kPairBlock);
  bench_json_int(j, "semaphore_permits", p->permits);
  bench_json_stats(j, "raw_rtt", &p->rtt);
  for (int k = 0; k < BENCH_KIND_COUNT; k++) {
    bench_json_begin_object(j, kKindLabels[k]);
    bench_json_stats(j, "cycle", &p->cycle[k]);
    bench_json_stats(j, "acquire", &p->acquire[k]);
    bench_json_double(j, "cycle_rtts_p50", ratio(p->cycle[k].p50_us, p->rtt.p50_us));
    bench_json_double(j, "cycle_rtts_p99", ratio(p->cycle[k].p99_us, p->rtt.p99_us));
    if (p->counted) {
      bench_json_double(j, "server_calls_per_cycle", p->calls_per_cycle[k]);
      bench_json_double(j, "server_usec_per_call", p->usec_per_call[k]);
    }
    if (p->memory_done) bench_json_stats(j, "memory_cycle", &p->memory_cycle[k]);
    bench_json_end_object(j);
  }
  bench_json_end_object(j);
}

static void json_phases(bench_json_t *j, const raw_backend_t *rb, const results_t *r,
                        const verdicts_t *v) {
  if (r->raw.done) json_raw(j, "raw", rb, &r->raw);
  if (r->raw_idle.n) bench_json_stats(j, "raw_write_after_idle_gap", &r->raw_idle);
  const double rtt = r->raw.done ? baseline(&r->raw)->p50_us : NAN;
  if (r->cycle.done) json_cycle(j, "lock_cycle", &r->cycle, rtt);
  if (r->paired_done) {
    bench_json_begin_object(j, "lock_cycle_paired");
    bench_json_int(j, "block", kPairBlock);
    bench_json_stats(j, "raw_rtt", &r->paired_rtt);
    bench_json_stats(j, "cycle", &r->paired_cycle);
    bench_json_end_object(j);
  }
  if (r->handover.done || r->handover.failed) json_handover(j, r, v);
  if (r->diagnostics_done) {
    bench_json_begin_object(j, "diagnostics");
    bench_json_stats(j, "memory_lock_cycle", &r->memory_cycle);
    bench_json_stats(j, "external_loop_lock_cycle", &r->external_cycle);
    bench_json_stats(j, "snapshot_json_call", &r->snapshot_hop);
    bench_json_end_object(j);
  }
  if (r->permits.done) json_permits(j, &r->permits);
  if (r->host_executor_done) {
    bench_json_begin_object(j, "host_executor_lock_cycle");
    bench_json_stats(j, "memory_default_pool", &r->host_memory_pool);
    bench_json_stats(j, "memory_host_executor", &r->host_memory_host);
    bench_json_double(j, "memory_ratio",
                      ratio(r->host_memory_host.p50_us, r->host_memory_pool.p50_us));
    bench_json_stats(j, "backend_default_pool", &r->host_remote_pool);
    bench_json_stats(j, "backend_host_executor", &r->host_remote_host);
    bench_json_double(j, "backend_ratio",
                      ratio(r->host_remote_host.p50_us, r->host_remote_pool.p50_us));
    bench_json_end_object(j);
  }
}

static void json_leases(bench_json_t *j, const raw_backend_t *rb, const results_t *r) {
  bench_json_begin_array(j, "leases");
  for (int i = 0; i < r->n_leases; i++) {
    const lease_result_t *x = &r->leases[i];
    bench_json_begin_object(j, NULL);
    bench_json_int(j, "leases", x->leases);
    bench_json_bool(j, "ok", x->ok);
    bench_json_bool(j, "slow_retry", x->slow);
    bench_json_int(j, "lease_duration_ms", x->lease_ms);
    bench_json_int(j, "renew_interval_ms", x->renew_ms);
    bench_json_int(j, "max_held_at_once", x->max_held);
    bench_json_int(j, "terms_revoked", x->revoked);
    bench_json_int(j, "sessions_opened", x->sessions_opened);
    bench_json_int(j, "acquire_calls_until_all_held", x->acquires_to_elect);
    bench_json_int(j, "sessions_until_all_held", x->sessions_to_elect);
    if (!x->ok) bench_json_string(j, "error", x->error);
    bench_json_double(j, "start_calls_ms", x->start_ms);
    bench_json_double(j, "time_to_elect_ms", x->elect_ms);
    bench_json_double(j, "close_ms", x->close_ms);
    bench_json_int(j, "renew_period_ms", x->renew_period_ms);
    bench_json_double(j, "window_ms", x->window_ms);
    bench_json_double(j, "window_periods", x->periods);
    bench_json_string(j, "window_bounds", rb->counts_lag_ms ? "observed count changes" : "clock");
    bench_json_double(j, "window_period_tolerance", x->period_tolerance);
    bench_json_int(j, "server_calls", (int64_t)x->server_calls);
    bench_json_double(j, "calls_per_renew_interval", x->calls_per_period);
    bench_json_double(j, "server_usec_per_keep_alive", x->server_usec_per_call);
    bench_json_int(j, "snapshot_keep_alives", x->snapshot_keep_alives);
    bench_json_int(j, "snapshot_acquires_in_window", x->snapshot_acquires);
    bench_json_int(j, "connected_clients", x->connected_clients);
    bench_json_int(j, "rss_kb", x->rss_kb);
    bench_json_int(j, "rss_before_client_kb", x->rss_before_kb);
    bench_json_end_object(j);
  }
  bench_json_end_array(j);
}

/* --also-durability, the baseline at the end, and the server's own lock. */
static void json_others(bench_json_t *j, const raw_backend_t *rb, const results_t *r) {
  if (r->alt_done) {
    bench_json_begin_object(j, "alternate_durability");
    bench_json_string(j, "durability", r->alt_durability);
    json_raw(j, "raw", rb, &r->alt_raw);
    json_cycle(j, "lock_cycle", &r->alt_cycle, baseline(&r->alt_raw)->p50_us);
    bench_json_end_object(j);
  }
  if (r->raw_end.done) json_raw(j, "raw_at_end", rb, &r->raw_end);
  if (r->native_cycle_done || r->native_handover_done || r->native_error[0]) {
    bench_json_begin_object(j, "native_lock");
    bench_json_string(j, "what", rb->native_lock_desc);
    if (r->native_error[0]) bench_json_string(j, "error", r->native_error);
    if (r->native_cycle_done) {
      bench_json_int(j, "block", kPairBlock);
      bench_json_stats(j, "cycle", &r->native_cycle);
      bench_json_stats(j, "simba_cycle_alternating", &r->native_simba_cycle);
    }
    if (r->native_handover_done) bench_json_stats(j, "handover", &r->native_handover);
    bench_json_end_object(j);
  }
}

static void json_targets(bench_json_t *j, const results_t *r, const verdicts_t *v) {
  bench_json_begin_array(j, "targets");
  if (r->cycle.done && r->raw.done) {
    bench_json_begin_object(j, NULL);
    bench_json_string(j, "name",
                      "lock cycle p50 / (2 x raw RTT p50), alternating blocks (ADR 0013)");
    bench_json_double(j, "value", v->cycle_ratio);
    bench_json_double(j, "limit", TARGET_CYCLE_RATIO);
    bench_json_bool(j, "met", v->cycle_met);
    bench_json_double(j, "value_vs_tight_loop_rtt_at_start", v->cycle_tight);
    bench_json_end_object(j);
  }
  if (r->handover.done && r->raw.done) {
    bench_json_begin_object(j, NULL);
    bench_json_string(j, "name", "handover p50 / raw RTT p50 after the same idle pause");
    bench_json_double(j, "value", v->handover_rtts);
    bench_json_double(j, "limit", TARGET_HANDOVER_RTTS);
    bench_json_bool(j, "met", v->handover_met);
    bench_json_double(j, "value_vs_tight_loop_rtt", v->handover_tight);
    bench_json_end_object(j);
  }
  if (r->native_cycle_done) {
    const double x = ratio(r->native_simba_cycle.p50_us, r->native_cycle.p50_us);
    bench_json_begin_object(j, NULL);
    bench_json_string(j, "name", "lock cycle p50 / native lock cycle p50, alternating blocks");
    bench_json_double(j, "value", x);
    bench_json_double(j, "limit", TARGET_NATIVE_CYCLE);
    bench_json_bool(j, "met", x <= TARGET_NATIVE_CYCLE);
    bench_json_end_object(j);
  }
  if (r->native_handover_done && r->handover.done) {
    const double x = ratio(r->handover.h.p50_us, r->native_handover.p50_us);
    bench_json_begin_object(j, NULL);
    bench_json_string(j, "name", "handover p50 / native lock handover p50, same idle pause");
    bench_json_double(j, "value", x);
    bench_json_double(j, "limit", TARGET_NATIVE_HANDOVER);
    bench_json_bool(j, "met", x <= TARGET_NATIVE_HANDOVER);
    bench_json_end_object(j);
  }
  if (v->ka) {
    bench_json_begin_object(j, NULL);
    bench_json_string(j, "name", "keep-alive calls per renew interval at 10000 leases");
    bench_json_double(j, "value", v->ka->ok ? v->ka->calls_per_period / v->ka_calls : NAN);
    bench_json_double(j, "calls_per_keep_alive", v->ka_calls);
    if (!v->ka->ok) bench_json_string(j, "error", v->ka->error);
    bench_json_double(j, "limit", 1.0);
    bench_json_bool(j, "met", v->ka_met);
    bench_json_end_object(j);
  }
  bench_json_end_array(j);
}

int write_json(const char *path, const options_t *o, const raw_backend_t *rb, const results_t *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "simba_bench: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  const verdicts_t v = judge(rb, r);
  bench_json_t j;
  bench_json_init(&j, f);
  bench_json_begin_object(&j, NULL);
  json_run(&j, o, rb, r);
  json_phases(&j, rb, r, &v);
  if (r->n_leases) json_leases(&j, rb, r);
  json_others(&j, rb, r);
  json_targets(&j, r, &v);
  bench_json_end_object(&j);
  int rc = ferror(f) ? -1 : 0;
  if (fclose(f) != 0) rc = -1;
  if (rc != 0) fprintf(stderr, "simba_bench: error writing %s\n", path);
  return rc;
}
