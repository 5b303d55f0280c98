package io.simba;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The second JVM of {@link HandoverTest}: leads NAME with runWhileLeader on URL and
 * prints LEADER token, INTERRUPTED, EXITED nanoTime; stops when its stdin says "stop".
 * usage: HandoverChild URL NAME LEASE_MS
 */
public final class HandoverChild {
  private HandoverChild() {}

  public static void main(String[] args) throws Exception {
    Duration lease = Duration.ofMillis(Long.parseLong(args[2]));
    SimbaConfig cfg = SimbaConfig.builder().leaseDuration(lease).renewInterval(lease.dividedBy(3)).build();
    try (Simba simba = Simba.open(args[0], cfg)) {
      simba.election(args[1]).runWhileLeader(term -> {
        say("LEADER " + term.token());
        try {
          while (true) {
            term.ensureValid(Duration.ofMillis(10));
            Thread.sleep(10);
          }
        } catch (InterruptedException | TermExpiredException e) {
          say("INTERRUPTED");
          long until = System.nanoTime() + 200_000_000L; // the last write of the term: the lease is
          while (System.nanoTime() < until) Thread.onSpinWait(); // still ours (deaf to a second interrupt)
          say("EXITED " + System.nanoTime()); // CLOCK_MONOTONIC: comparable across processes
        }
      });
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      String line;
      while ((line = in.readLine()) != null && !line.equals("stop")) {
        // wait
      }
    }
    say("CLOSED");
  }

  private static synchronized void say(String s) {
    System.out.println(s);
    System.out.flush();
  }
}
