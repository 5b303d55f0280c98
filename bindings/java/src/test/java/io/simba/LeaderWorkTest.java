package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class LeaderWorkTest {
  /** The README's example: work until interrupted by the revocation, then the stop completes. */
  @Test
  void runWhileLeaderIsInterruptedOnStop() {
    try (Simba s = open()) {
      BlockingQueue<String> log = new LinkedBlockingQueue<>();
      AtomicBoolean workExited = new AtomicBoolean();
      LeaderTask task = s.election(name("rwl")).runWhileLeader(term -> {
        log.add("start:" + term.token());
        try {
          while (true) {
            Thread.sleep(20); // one "batch" that never checks the term: only the interrupt ends it
          }
        } catch (InterruptedException e) {
          assertFalse(term.isValid(), "interrupted because the term was revoked");
          log.add("interrupted");
          Thread.sleep(50); // finishing: the lease stays held meanwhile
          workExited.set(true);
          throw e;
        }
      });
      assertTrue(take(log).startsWith("start:"));
      assertTrue(task.isLeader());
      var stopped = task.stop().toCompletableFuture();
      assertEquals("interrupted", take(log));
      get(stopped);
      assertTrue(workExited.get(), "the stop completes after the work returned");
      assertFalse(task.isLeader());
    }
  }

  /** The seed's loop: ensureValid before each step ends the work once the term is revoked. */
  @Test
  void ensureValidEndsTheSeedsLoop() {
    try (Simba s = open()) {
      BlockingQueue<String> log = new LinkedBlockingQueue<>();
      LeaderTask task = s.election(name("seed")).runWhileLeader(term -> {
        log.add("start");
        try {
          for (int batch = 0; ; batch++) {
            term.ensureValid(Duration.ofMillis(5));
            Thread.sleep(5);
          }
        } catch (TermExpiredException | InterruptedException e) {
          log.add("ended");
          throw e;
        }
      });
      assertEquals("start", take(log));
      get(task.stop());
      assertEquals("ended", log.poll());
    }
  }

  @Test
  void stopWaitsForWorkBeforeAnotherNodeStarts() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("handover");
      AtomicLong aExited = new AtomicLong();
      AtomicLong bStarted = new AtomicLong();
      BlockingQueue<Long> tokens = new LinkedBlockingQueue<>();
      LeaderTask ta = a.election(n).runWhileLeader(term -> {
        tokens.add(term.token());
        try {
          term.awaitRevoked(WAIT);
        } finally {
          long until = System.nanoTime() + 100_000_000L; // finishing, deaf to the interrupt
          while (System.nanoTime() < until) Thread.onSpinWait();
          aExited.set(System.nanoTime());
        }
      });
      long ta1 = take(tokens);
      LeaderTask tb = b.election(n).runWhileLeader(term -> {
        bStarted.set(System.nanoTime());
        tokens.add(term.token());
        term.awaitRevoked(WAIT);
      });
      get(ta.stop());
      long tb1 = take(tokens);
      assertTrue(tb1 > ta1);
      assertTrue(aExited.get() != 0 && bStarted.get() > aExited.get(), "b started after a's work exited");
      tb.close();
      assertTrue(tb.isStopped());
    }
  }

  @Test
  void workThatReturnsStepsDownAndRunsAgain() {
    try (Simba s = open()) {
      List<Long> tokens = new CopyOnWriteArrayList<>();
      LeaderTask task = s.election(name("again")).runWhileLeader(term -> tokens.add(term.token()));
      await("three terms", () -> tokens.size() >= 3);
      task.close();
      assertTrue(tokens.get(0) < tokens.get(1) && tokens.get(1) < tokens.get(2), tokens.toString());
    }
  }

  @Test
  void throwingWorkIsLoggedAndRetried() {
    try (Simba s = open()) {
      AtomicInteger runs = new AtomicInteger();
      LeaderTask task = s.election(name("throws")).runWhileLeader(term -> {
        runs.incrementAndGet();
        throw new IllegalStateException("expected by the test");
      });
      await("two runs", () -> runs.get() >= 2);
      task.close();
    }
  }

  @Test
  void scheduleRunsWithAFixedDelayOnOneTerm() {
    try (Simba s = open()) {
      List<Long> starts = new CopyOnWriteArrayList<>();
      Set<Long> tokens = ConcurrentHashMap.newKeySet();
      Set<Thread> threads = ConcurrentHashMap.newKeySet();
      LeaderTask task = s.election(name("sched")).schedule(Duration.ofMillis(50), Duration.ofMillis(30), term -> {
        starts.add(System.nanoTime());
        tokens.add(term.token());
        threads.add(Thread.currentThread());
        Thread.sleep(10);
      });
      await("four runs", () -> starts.size() >= 4);
      task.close();
      int n = starts.size();
      for (int i = 1; i < n; i++) {
        long gap = starts.get(i) - starts.get(i - 1);
        assertTrue(gap >= 35_000_000L, "10 ms run + 30 ms delay, got " + gap / 1_000_000 + " ms");
      }
      assertEquals(1, tokens.size(), "one term");
      assertEquals(1, threads.size(), "runs of one term are on one thread");
      Thread.yield();
      assertEquals(n, starts.size(), "no run after close returned");
      assertThrows(IllegalArgumentException.class,
          () -> s.election(name("bad")).schedule(Duration.ZERO, Duration.ZERO, t -> {}));
    }
  }

  @Test
  void stepDownOfATask() {
    try (Simba s = open()) {
      BlockingQueue<Long> tokens = new LinkedBlockingQueue<>();
      BlockingQueue<Boolean> interrupted = new LinkedBlockingQueue<>();
      Election e = s.election(name("tsd"));
      LeaderTask task = e.runWhileLeader(term -> {
        tokens.add(term.token());
        try {
          Thread.sleep(WAIT.toMillis());
        } catch (InterruptedException ie) {
          interrupted.add(true);
        }
      });
      long t1 = take(tokens);
      long t0 = System.nanoTime();
      get(e.stepDown(Duration.ofMillis(400)));
      assertEquals(Boolean.TRUE, take(interrupted));
      long t2 = take(tokens);
      assertTrue(System.nanoTime() - t0 >= 350_000_000L, "cooldown respected");
      assertTrue(t2 > t1);
      task.close();
    }
  }

  @Test
  void partitionGroupSpreadsAndRebalances() {
    try (Simba a = open(); Simba b = open()) {
      String g = name("grp");
      Map<String, String> holder = new ConcurrentHashMap<>();
      AtomicBoolean doubleHolder = new AtomicBoolean();
      GroupTask ga = a.group(g, 4, work(holder, "a", doubleHolder));
      await("a holds every partition", () -> holder.size() == 4);
      GroupTask gb = b.group(g, 4, work(holder, "b", doubleHolder));
      await("a 2/2 split", () -> count(holder, "a") == 2 && count(holder, "b") == 2);
      assertEquals(4, ga.partitions());
      gb.close();
      await("a takes every partition back", () -> count(holder, "a") == 4);
      ga.close();
      assertTrue(holder.isEmpty());
      assertFalse(doubleHolder.get(), "a partition never had two holders at once");
      assertThrows(IllegalArgumentException.class, () -> a.group(g, 0, t -> {}));
    }
  }

  private static LeaderWork work(Map<String, String> holder, String me, AtomicBoolean doubleHolder) {
    return term -> {
      int p = GroupTask.partitionOf(term);
      assertTrue(p >= 0 && p < 4);
      if (holder.putIfAbsent(term.name(), me) != null) doubleHolder.set(true);
      try {
        term.awaitRevoked(Duration.ofSeconds(60));
      } finally {
        holder.remove(term.name(), me);
      }
    };
  }

  private static long count(Map<String, String> holder, String me) {
    return holder.values().stream().filter(me::equals).count();
  }

  /** awaitRevoked never returns with the interrupt it was woken by still set (Java's convention). */
  @Test
  void awaitRevokedLeavesNoInterruptBehind() throws Exception {
    try (Simba s = open()) {
      BlockingQueue<String> seen = new LinkedBlockingQueue<>();
      LeaderTask task = s.election(name("intr")).runWhileLeader(term -> {
        boolean revoked = term.awaitRevoked(WAIT);
        seen.add(revoked + " " + Thread.currentThread().isInterrupted() + " " + term.isValid());
      });
      await("leader", task::isLeader);
      task.close();
      assertEquals("true false false", take(seen), "revoked: true, and the revocation's interrupt consumed");
    }
    // another interrupt: InterruptedException, the status cleared
    try (Simba s = open(); LockTerm t = s.lock(name("intr-lock"))) {
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, () -> t.awaitRevoked(WAIT));
      assertFalse(Thread.currentThread().isInterrupted(), "cleared with the exception");
      assertFalse(t.awaitRevoked(Duration.ofMillis(30)), "timeout: false");
      assertFalse(Thread.currentThread().isInterrupted());
      BlockingQueue<Boolean> out = new LinkedBlockingQueue<>();
      Thread sleeper = new Thread(() -> {
        try {
          t.awaitRevoked(WAIT);
          out.add(false);
        } catch (InterruptedException e) {
          out.add(!Thread.currentThread().isInterrupted());
        }
      });
      sleeper.start();
      Thread.sleep(50);
      sleeper.interrupt();
      assertEquals(Boolean.TRUE, take(out), "interrupted while waiting: thrown, status cleared");
      t.close();
      assertTrue(t.awaitRevoked(Duration.ZERO), "revoked: true at once");
      assertFalse(Thread.currentThread().isInterrupted());
    }
  }
}
