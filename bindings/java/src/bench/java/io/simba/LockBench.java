package io.simba;

import java.time.Duration;
import java.util.Arrays;

/**
 * The lock cycle (acquire + release) through the Java binding and through the raw C
 * ABI (a loop of simba_lock_acquire + simba_lock_release in the JNI glue), on the same
 * client, in the same process and run, in alternating rounds. A third column is the
 * raw C loop on a client that uses the library's own callback pool instead of the
 * binding's Java executor (what a plain C program gets): the binding against C.
 * Each client is open only for its own rounds, as simba_cycle_bench's is alone in its
 * process: clients of one backend hear each other's releases (memory:// wakes every
 * client's loop at each release), which cost a cycle here 1-2 us more.
 * usage: LockBench URL [CYCLES_PER_ROUND [ROUNDS]]
 */
public final class LockBench {
  private LockBench() {}

  public static void main(String[] args) {
    String url = args.length > 0 ? args[0] : "memory://bench";
    int n = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 7;
    SimbaConfig cfg = SimbaConfig.builder().leaseDuration(Duration.ofSeconds(15)).build();
    SimbaConfig plain = cfg.toBuilder().set("callback.executor", "pool").build();
    String name = "bench.java-lock";
    String plainName = "bench.java-lock-c";
    try (Simba simba = open(url, cfg)) { // warm-up: JIT, connections
      javaCycles(simba, name, n);
      cCycles(simba, name, n);
    }
    double[] j = new double[rounds];
    double[] cs = new double[rounds];
    double[] cp = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      try (Simba simba = open(url, cfg)) {
        javaCycles(simba, name, n / 10);
        j[r] = javaCycles(simba, name, n) / (double) n / 1000.0;
        cs[r] = cCycles(simba, name, n) / (double) n / 1000.0;
      }
      try (Simba c = open(url, plain)) {
        cCycles(c, plainName, n / 10);
        cp[r] = cCycles(c, plainName, n) / (double) n / 1000.0;
      }
      System.out.printf("round %d: java %.2f us/cycle, C %.2f us/cycle, ratio %.3f; C on the library's pool %.2f us/cycle,"
          + " ratio %.3f%n", r, j[r], cs[r], j[r] / cs[r], cp[r], j[r] / cp[r]);
    }
    double mj = median(j);
    double mc = median(cs);
    double mp = median(cp);
    System.out.printf("%s, %d cycles x %d rounds: median java %.2f us/cycle, C %.2f us/cycle, ratio %.3f%n", url,
        n, rounds, mj, mc, mj / mc);
    // worded so that the line above stays the only "median java N us/cycle" (scripts/bench-bindings.sh)
    System.out.printf("%s, %d cycles x %d rounds: median C on the library's pool %.2f us/cycle, java / that %.3f%n",
        url, n, rounds, mp, mj / mp);
  }

  private static Simba open(String url, SimbaConfig cfg) {
    Simba s = Simba.open(url, cfg);
    if (!s.awaitLive(Duration.ofSeconds(10))) {
      s.close();
      throw new IllegalStateException("session not live: " + url);
    }
    return s;
  }

  private static long javaCycles(Simba simba, String name, int n) {
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      try (LockTerm t = simba.lock(name)) {
        if (t.token() <= 0) throw new AssertionError();
      }
    }
    return System.nanoTime() - t0;
  }

  private static long cCycles(Simba simba, String name, int n) {
    return simba.withHandle(h -> Native.benchLockCycles(h, name, n));
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }
}
