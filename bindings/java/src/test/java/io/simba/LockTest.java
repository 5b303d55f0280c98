package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class LockTest {
  @Test
  void lockTermLifecycle() {
    try (Simba s = open()) {
      String n = name("lock");
      LockTerm t = s.lock(n);
      assertEquals(n, t.name());
      assertTrue(t.token() > 0);
      assertTrue(t.isValid());
      assertNull(t.revokeReason());
      assertTrue(t.remaining().compareTo(Duration.ZERO) > 0);
      assertTrue(t.remaining().compareTo(LEASE) <= 0);
      t.ensureValid(Duration.ofMillis(10));
      assertThrows(TermExpiredException.class, () -> t.ensureValid(Duration.ofMinutes(5)));
      assertThrows(IllegalArgumentException.class, () -> t.ensureValid(Duration.ofMillis(-1)));
      CompletableFuture<RevokeReason> revoked = t.revoked().toCompletableFuture();
      assertFalse(revoked.isDone());
      t.close();
      assertTrue(t.isReleased());
      assertFalse(t.isValid());
      assertEquals(Duration.ZERO, t.remaining());
      assertEquals(RevokeReason.STOPPED, t.revokeReason());
      assertEquals(RevokeReason.STOPPED, get(revoked), "on_revoked has run when release returns");
      TermExpiredException e = assertThrows(TermExpiredException.class, () -> t.ensureValid(Duration.ZERO));
      assertEquals(SimbaException.Code.EXPIRED, e.code());
      assertEquals(RevokeReason.STOPPED, get(t.revoked()), "revoked() after the end completes too");
      t.close(); // idempotent
      try (LockTerm t2 = s.lock(n)) {
        assertTrue(t2.token() > t.token(), "tokens increase across terms");
      }
    }
  }

  /*
   * close() frees the native term at once (issue 36: not later on the Cleaner's thread), while
   * calls reading it on other threads keep it until they return: they see the term live or its
   * end, never freed memory, and an ended lock term answers the same before and after the free.
   */
  @Test
  void accessorsRacingACloseSeeTheTermOrItsEnd() throws Exception {
    try (Simba s = open()) {
      String n = name("race");
      for (int round = 0; round < 200; round++) {
        LockTerm t = s.lock(n);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        AtomicReference<Throwable> bad = new AtomicReference<>();
        Thread[] readers = new Thread[2];
        for (int i = 0; i < readers.length; i++) {
          readers[i] = new Thread(() -> {
            try {
              go.await();
              for (int k = 0; k < 50; k++) {
                t.isValid();
                t.remaining();
                try {
                  t.ensureValid(Duration.ZERO);
                } catch (TermExpiredException e) {
                  assertTrue(e.getMessage().contains("\"" + n + "\""), e.getMessage());
                }
                RevokeReason r = t.revokeReason();
                assertTrue(r == null || r == RevokeReason.STOPPED, String.valueOf(r));
                if (r != null) { // ended: it stays so, freed or not
                  assertFalse(t.isValid(), "valid after its end");
                  assertEquals(Duration.ZERO, t.remaining());
                  assertTrue(t.awaitRevoked(Duration.ZERO), "not revoked after its end");
                }
              }
            } catch (Throwable e) {
              bad.compareAndSet(null, e);
            }
          });
          readers[i].start();
        }
        go.countDown();
        t.close();
        for (Thread r : readers) r.join();
        if (bad.get() != null) throw new AssertionError("round " + round, bad.get());
        assertFalse(t.isValid());
        assertEquals(Duration.ZERO, t.remaining());
        assertEquals(RevokeReason.STOPPED, t.revokeReason());
        assertTrue(t.awaitRevoked(Duration.ZERO));
        assertEquals(RevokeReason.STOPPED, get(t.revoked()));
        TermExpiredException e = assertThrows(TermExpiredException.class, t::ensureValid);
        assertEquals("term of \"" + n + "\" (token " + t.token() + ") is no longer valid", e.getMessage());
      }
    }
  }

  @Test
  void tryLockAndTimeoutsAcrossClients() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("try");
      LockTerm held = a.tryLock(n).orElseThrow();
      assertEquals(Optional.empty(), b.tryLock(n));
      long t0 = System.nanoTime();
      assertEquals(Optional.empty(), b.lock(n, Duration.ofMillis(300)));
      assertTrue(System.nanoTime() - t0 >= 250_000_000L, "waited for the timeout");
      CompletableFuture<Optional<LockTerm>> waiting = b.lockAsync(n, WAIT).toCompletableFuture();
      assertFalse(waiting.isDone());
      held.close();
      try (LockTerm got = get(waiting).orElseThrow()) {
        assertTrue(got.isValid());
        assertTrue(got.token() > held.token());
        assertEquals(Optional.empty(), a.tryLock(n));
      }
    }
  }

  @Test
  void locksOfOneClientQueue() throws Exception {
    try (Simba s = open()) {
      String n = name("fifo");
      LockTerm first = s.lock(n);
      CompletableFuture<LockTerm> second = CompletableFuture.supplyAsync(() -> s.lock(n));
      Thread.sleep(100);
      assertFalse(second.isDone(), "a second lock of the name waits behind the first");
      first.close();
      try (LockTerm t = get(second)) {
        assertTrue(t.isValid());
      }
    }
  }

  /** One rule: a timeout is an empty Optional, blocking or not; busy too for tryLock; errors throw. */
  @Test
  void aTimeoutIsAnEmptyOptionalEverywhere() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("rule");
      try (LockTerm held = a.lock(n)) {
        assertEquals(Optional.empty(), b.tryLock(n), "busy");
        assertEquals(Optional.empty(), b.lock(n, Duration.ofMillis(100)), "timed out");
        assertEquals(Optional.empty(), b.election(n).lock(Duration.ZERO), "timed out at once");
        long t0 = System.nanoTime();
        assertEquals(Optional.empty(), get(b.lockAsync(n, Duration.ofMillis(150))), "timed out, not an exception");
        assertTrue(System.nanoTime() - t0 >= 100_000_000L, "waited for the timeout");
        assertEquals(Optional.empty(), get(b.election(n).lockAsync(Duration.ofMillis(10))));
        assertTrue(held.isValid());
      }
      assertThrows(IllegalArgumentException.class, () -> b.tryLock("bad name"), "errors are exceptions");
      assertThrows(IllegalArgumentException.class, () -> b.lockAsync("bad name", WAIT), "errors are exceptions");
    }
  }

  @Test
  void lockAsyncIsCanceledByClose() {
    try (Simba a = open()) {
      String n = name("async");
      Simba b = open();
      try (LockTerm held = a.lock(n)) {
        CompletableFuture<Optional<LockTerm>> pending = b.lockAsync(n, WAIT).toCompletableFuture();
        b.close();
        CompletionException e = assertThrows(CompletionException.class, pending::join);
        assertEquals(SimbaException.Code.CANCELED, ((SimbaException) e.getCause()).code());
        assertTrue(held.isValid());
      }
    }
  }

  @Test
  void closeEndsABlockedLock() throws Exception {
    try (Simba a = open()) {
      String n = name("blocked");
      Simba b = open();
      try (LockTerm held = a.lock(n)) {
        CompletableFuture<LockTerm> blocked = CompletableFuture.supplyAsync(() -> b.lock(n));
        Thread.sleep(100);
        assertFalse(blocked.isDone());
        b.close(); // must not wait for the blocked lock(), which must end
        ExecutionException e = assertThrows(ExecutionException.class, () -> blocked.get(WAIT.toMillis(), TimeUnit.MILLISECONDS));
        SimbaException se = (SimbaException) e.getCause();
        assertTrue(se.code() == SimbaException.Code.CLOSED || se.code() == SimbaException.Code.CANCELED, se.toString());
        assertTrue(held.isValid());
      }
    }
  }

  @Test
  void aLostLockTermIsReleasedByTheCleaner() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("gc");
      a.lock(n); // dropped without close
      await("the garbage-collected lock to be released", () -> {
        System.gc();
        Optional<LockTerm> t = b.tryLock(n);
        t.ifPresent(LockTerm::close);
        return t.isPresent();
      });
    }
  }

  @Test
  void blockingCallsFromACallbackAreRefused() {
    try (Simba s = open()) {
      String n = name("cb");
      AtomicReference<Throwable> seen = new AtomicReference<>();
      Election e = s.election(n).start(term -> {
        try {
          s.lock(n + ".other").close();
        } catch (Throwable t) {
          seen.set(t);
        }
      });
      await("the callback", () -> seen.get() != null);
      assertEquals(SimbaException.Code.WOULD_BLOCK, ((SimbaException) seen.get()).code());
      get(e.stop());
    }
  }

  @Test
  void lockingAStartedElectionNameIsAStateError() {
    try (Simba s = open()) {
      String n = name("both");
      Election e = s.election(n).start(t -> {});
      assertThrows(IllegalStateException.class, e::tryLock);
      await("elected", e::isLeader); // (a stop during the first attempt: see README, "ABI notes")
      get(e.stop());
      e.tryLock().orElseThrow().close();
    }
  }
}
