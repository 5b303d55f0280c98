package io.simba;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Assumptions;

/** Shared helpers: the backend under test (from run-junit.sh), short leases, bounded waits. */
final class TestSupport {
  private TestSupport() {}

  static final String BACKEND = System.getProperty("simba.test.backend", "memory");
  static final String URL = System.getProperty("simba.test.url", "memory://java-tests");
  static final Duration LEASE = Duration.ofMillis(900);
  static final Duration WAIT = Duration.ofSeconds(10);

  static boolean isMemory() {
    return URL.startsWith("memory:");
  }

  static void assumeBackend() {
    Assumptions.assumeTrue(URL != null && !URL.isEmpty(), "no URL for " + BACKEND);
  }

  static void assumeMemory() {
    Assumptions.assumeTrue(isMemory(), "runs once, on memory://");
  }

  static void assumeNetworked() {
    Assumptions.assumeFalse(isMemory(), "needs a backend shared between processes");
  }

  static SimbaConfig.Builder config() {
    return SimbaConfig.builder().leaseDuration(LEASE).renewInterval(LEASE.dividedBy(3));
  }

  static Simba open() {
    return open(config().build());
  }

  static Simba open(SimbaConfig cfg) {
    assumeBackend();
    Simba s = Simba.open(URL, cfg);
    assertTrue(s.awaitLive(WAIT), "session not live on " + URL);
    return s;
  }

  /** A lease name no other test (or earlier run on a shared server) uses. */
  static String name(String base) {
    return "java." + base + "." + UUID.randomUUID().toString().substring(0, 8);
  }

  static void await(String what, BooleanSupplier cond) {
    long end = System.nanoTime() + WAIT.toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > end) fail("timed out waiting for " + what);
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fail("interrupted");
      }
    }
  }

  static <T> T get(CompletionStage<T> stage) {
    try {
      return stage.toCompletableFuture().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (Exception e) {
      throw new AssertionError("stage did not complete: " + e, e);
    }
  }

  static <T> T take(BlockingQueue<T> q) {
    try {
      T v = q.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
      if (v == null) fail("timed out waiting for an event");
      return v;
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }
}
