package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class ElectionTest {
  /** Records every callback as "elected:TOKEN" / "revoked:TOKEN:REASON", checking they never overlap. */
  static final class Recorder implements ElectionListener {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();
    final List<Term> terms = new CopyOnWriteArrayList<>();
    final AtomicInteger inside = new AtomicInteger();
    final AtomicBoolean overlap = new AtomicBoolean();

    @Override
    public void onElected(Term term) {
      if (inside.incrementAndGet() != 1) overlap.set(true);
      assertTrue(term.isValid());
      terms.add(term);
      events.add("elected:" + term.token());
      inside.decrementAndGet();
    }

    @Override
    public void onRevoked(Term term, RevokeReason reason) {
      if (inside.incrementAndGet() != 1) overlap.set(true);
      assertFalse(term.isValid());
      assertEquals(Duration.ZERO, term.remaining());
      events.add("revoked:" + term.token() + ":" + reason);
      inside.decrementAndGet();
    }
  }

  @Test
  void electedThenRevokedOnStop() {
    try (Simba s = open()) {
      String n = name("el");
      Recorder r = new Recorder();
      Election e = s.election(n).start(r);
      String elected = take(r.events);
      assertTrue(elected.startsWith("elected:"));
      Term t = r.terms.get(0);
      assertEquals(n, t.name());
      assertTrue(e.isLeader());
      assertSame(t, e.term().orElseThrow());
      var revoked = t.revoked().toCompletableFuture();
      get(e.stop());
      // the stop completes after the last onRevoked
      assertEquals("revoked:" + t.token() + ":STOPPED", r.events.poll());
      assertEquals(RevokeReason.STOPPED, get(revoked));
      assertFalse(e.isLeader());
      assertFalse(r.overlap.get());
      assertSame(e.stop().toCompletableFuture().join(), null, "stop again completes");
      assertThrows(IllegalStateException.class, () -> e.stepDown(Duration.ZERO));
    }
  }

  @Test
  void startTwiceIsAStateError() {
    try (Simba s = open()) {
      String n = name("twice");
      Election e = s.election(n).start(t -> {});
      assertThrows(IllegalStateException.class, () -> e.start(t -> {}));
      assertThrows(IllegalStateException.class, () -> s.election(n).start(t -> {}));
      assertThrows(IllegalStateException.class, () -> s.election(n).runWhileLeader(t -> {}));
      get(e.stop());
      Election again = s.election(n).start(t -> {}); // free again once stopped
      get(again.stop());
    }
  }

  @Test
  void stepDownHandsOverAndCoolsDown() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("step");
      Recorder ra = new Recorder();
      Recorder rb = new Recorder();
      Election ea = a.election(n).start(ra);
      take(ra.events);
      Election eb = b.election(n).start(rb);
      long t0 = System.nanoTime();
      get(ea.stepDown(Duration.ofSeconds(30)));
      assertTrue(ra.events.poll().endsWith(":STEPPED_DOWN"));
      String got = take(rb.events);
      assertTrue(got.startsWith("elected:"));
      long tb = Long.parseLong(got.substring(8));
      assertTrue(tb > ra.terms.get(0).token());
      assertTrue(System.nanoTime() - t0 < WAIT.toNanos());
      // b stops: a is still cooling down, so nobody leads
      get(eb.stop());
      assertTrue(rb.events.poll().endsWith(":STOPPED"));
      assertNull(poll(ra.events, LEASE.multipliedBy(2)), "a does not contend during its cooldown");
      get(ea.stop());
      assertFalse(ra.overlap.get() || rb.overlap.get());
    }
  }

  @Test
  void closeRevokesWithStopped() {
    Simba s = open();
    Recorder r = new Recorder();
    s.election(name("close")).start(r);
    String el = take(r.events);
    s.close();
    assertEquals("revoked:" + el.substring(8) + ":STOPPED", r.events.poll());
    assertNull(r.events.poll());
  }

  @Test
  void tokensIncreaseAcrossTerms() {
    try (Simba s = open()) {
      String n = name("tok");
      long last = 0;
      for (int i = 0; i < 3; i++) {
        Recorder r = new Recorder();
        Election e = s.election(n).start(r);
        long tok = Long.parseLong(take(r.events).substring(8));
        assertTrue(tok > last, tok + " > " + last);
        last = tok;
        get(e.stop());
      }
    }
  }

  @Test
  void callbacksRunOnTheConfiguredExecutor() {
    var pool = Executors.newFixedThreadPool(4, r -> {
      Thread t = new Thread(r, "my-pool");
      t.setDaemon(true);
      return t;
    });
    try (Simba s = open(config().callbackExecutor(pool).build())) {
      BlockingQueue<String> threads = new LinkedBlockingQueue<>();
      Election e = s.election(name("ex")).start(new ElectionListener() {
        @Override
        public void onElected(Term term) {
          threads.add(Thread.currentThread().getName());
        }

        @Override
        public void onRevoked(Term term, RevokeReason reason) {
          threads.add(Thread.currentThread().getName());
        }
      });
      assertEquals("my-pool", take(threads));
      get(e.stop());
      assertEquals("my-pool", threads.poll());
    } finally {
      pool.shutdown();
    }
  }

  @Test
  void defaultExecutorThreadsAreDaemons() {
    try (Simba s = open()) {
      BlockingQueue<Thread> threads = new LinkedBlockingQueue<>();
      Election e = s.election(name("daemon")).start(t -> threads.add(Thread.currentThread()));
      Thread t = take(threads);
      assertTrue(t.isDaemon());
      assertTrue(t.getName().startsWith("simba-callback-"), t.getName());
      get(e.stop());
    }
  }

  /** The seed's rule: a rejected onElected is never delivered, and the election steps down for one lease. */
  @Test
  void rejectedOnElectedStepsDownForOneLease() {
    AtomicBoolean reject = new AtomicBoolean(true);
    AtomicInteger rejected = new AtomicInteger();
    AtomicInteger accepted = new AtomicInteger();
    var pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    Executor ex = r -> {
      if (reject.get()) {
        rejected.incrementAndGet();
        throw new RejectedExecutionException("test");
      }
      accepted.incrementAndGet();
      pool.execute(r);
    };
    reject.set(false);
    try (Simba s = open(config().callbackExecutor(ex).build())) {
      await("the SessionOpened event submitted", () -> accepted.get() > 0); // the next submit is onElected
      reject.set(true);
      Recorder r = new Recorder();
      Election e = s.election(name("reject")).start(r);
      await("a rejected submit", () -> rejected.get() > 0);
      long rejectedAt = System.nanoTime();
      reject.set(false);
      String el = take(r.events);
      long waited = System.nanoTime() - rejectedAt;
      assertTrue(el.startsWith("elected:"));
      assertTrue(waited >= LEASE.toNanos() * 8 / 10, "stepped down for about one lease: " + waited / 1_000_000 + " ms");
      get(e.stop());
      // the rejected term's onRevoked was not delivered either: exactly one pair
      assertTrue(r.events.poll().startsWith("revoked:" + el.substring(8) + ":"));
      assertNull(r.events.poll());
      assertEquals(1, r.terms.size());
    } finally {
      pool.shutdown();
    }
  }

  @Test
  void aThrowingListenerDoesNotBreakTheElection() {
    try (Simba s = open()) {
      BlockingQueue<RevokeReason> q = new LinkedBlockingQueue<>();
      Election e = s.election(name("throw")).start(new ElectionListener() {
        @Override
        public void onElected(Term term) {
          throw new RuntimeException("expected by the test");
        }

        @Override
        public void onRevoked(Term term, RevokeReason reason) {
          q.add(reason);
        }
      });
      await("leader", e::isLeader);
      get(e.stop());
      assertEquals(RevokeReason.STOPPED, q.poll());
    }
  }

  static <T> T poll(BlockingQueue<T> q, Duration d) {
    try {
      return q.poll(d.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void anElectionIsAutoCloseable() {
    try (Simba s = open()) {
      String n = name("autoclose");
      Recorder r = new Recorder();
      try (Election e = s.election(n).start(r)) {
        assertTrue(take(r.events).startsWith("elected:"));
        assertTrue(e.isLeader());
      }
      // close() waited for the stop: the last onRevoked has run, the name is free
      assertTrue(r.events.poll().endsWith(":STOPPED"));
      assertFalse(s.election(n).isLeader());
      s.tryLock(n).orElseThrow().close();
      try (Election idle = s.election(n)) {
        assertFalse(idle.isLeader(), "closing one never started does nothing");
      }
      try (Election w = s.election(n)) {
        LeaderTask t = w.runWhileLeader(term -> term.awaitRevoked(WAIT));
        await("leader", t::isLeader);
        w.close();
        assertTrue(t.isStopped());
        assertFalse(t.hasHandle(), "freed in the done of its stop");
      }
    }
  }
}
