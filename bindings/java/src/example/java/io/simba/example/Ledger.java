package io.simba.example;

import io.simba.LeaderTask;
import io.simba.Simba;
import io.simba.SimbaConfig;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** The seed's runWhileLeader example, as a program: java io.simba.example.Ledger [URL] [SECONDS]. */
public final class Ledger {
  /** The protected resource: accepts a write only with a token at least the highest it accepted. */
  static final class FencedLedger {
    private long highestToken;
    private long settled;

    synchronized boolean settle(int batch, long fencingToken) {
      if (fencingToken < highestToken) return false;
      highestToken = fencingToken;
      settled++;
      return true;
    }

    synchronized long settled() {
      return settled;
    }
  }

  public static void main(String[] args) throws Exception {
    String url = args.length > 0 ? args[0] : "memory://ledger";
    long seconds = args.length > 1 ? Long.parseLong(args[1]) : 3;
    System.out.println("settled " + run(url, Duration.ofSeconds(seconds)) + " batches");
  }

  /** Leads "ledger" on {@code url} for {@code duration}; returns the batches settled. */
  public static long run(String url, Duration duration) throws InterruptedException {
    FencedLedger ledger = new FencedLedger();
    AtomicLong rejected = new AtomicLong();
    SimbaConfig config = SimbaConfig.builder().leaseDuration(Duration.ofSeconds(3)).build();
    try (Simba simba = Simba.open(url, config)) {
      LeaderTask task = simba.election("ledger").runWhileLeader(term -> {
        for (int batch = 0; ; batch++) {
          term.ensureValid(Duration.ofMillis(200)); // expected duration of one batch
          if (!ledger.settle(batch, term.token())) rejected.incrementAndGet();
          Thread.sleep(10);
        }
      });
      Thread.sleep(duration.toMillis());
      task.close(); // interrupts the work, waits for it, then releases the lease
    }
    if (rejected.get() != 0) throw new IllegalStateException(rejected + " stale writes");
    return ledger.settled();
  }
}
