package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** Semaphores and read/write locks (libsimba 1.5) on the backend under test. */
class PermitTest {
  /*
   * Two permits of size 2 (one client twice): the size holds for everyone, tokens increase
   * across permits, another size is refused by name (blocking and async), a lock of the
   * name is another resource, a waiter gets a released permit.
   */
  @Test
  void semaphorePermits() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("sem");
      LockTerm p1 = a.acquireSemaphore(n, 2);
      LockTerm p2 = a.tryAcquireSemaphore(n, 2).orElseThrow();
      assertEquals(TermKind.SEMAPHORE, p1.kind());
      assertEquals(n, p1.name());
      assertTrue(p1.token() > 0 && p2.token() > p1.token(), p1.token() + " " + p2.token());
      assertEquals(Optional.empty(), a.tryAcquireSemaphore(n, 2), "the client's own permits count");
      assertEquals(Optional.empty(), b.tryAcquireSemaphore(n, 2));
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> b.acquireSemaphore(n, 3, WAIT));
      assertTrue(e.getMessage().contains("has 2 permits, not 3"), e.getMessage());
      CompletableFuture<Optional<LockTerm>> refused = b.acquireSemaphoreAsync(n, 4, WAIT).toCompletableFuture();
      CompletionException ce = assertThrows(CompletionException.class, refused::join);
      Throwable cause = ce.getCause();
      assertInstanceOf(IllegalStateException.class, cause);
      assertTrue(cause.getMessage().contains("has 2 permits, not 4"), cause.getMessage());
      try (LockTerm l = b.tryLock(n).orElseThrow()) {
        assertEquals(TermKind.LOCK, l.kind());
      }
      CompletableFuture<Optional<LockTerm>> waiting = b.acquireSemaphoreAsync(n, 2, WAIT).toCompletableFuture();
      assertFalse(waiting.isDone());
      p1.close();
      assertEquals(RevokeReason.STOPPED, p1.revokeReason());
      try (LockTerm p3 = get(waiting).orElseThrow()) {
        assertTrue(p3.token() > p2.token());
        assertEquals(TermKind.SEMAPHORE, p3.kind());
        long t0 = System.nanoTime();
        assertEquals(Optional.empty(), b.acquireSemaphore(n, 2, Duration.ofMillis(300)));
        assertTrue(System.nanoTime() - t0 >= 250_000_000L, "waited for the timeout");
      }
      p2.close();
      try (LockTerm p = b.tryAcquireSemaphore(n, 5).orElseThrow()) { // no holder: a new size
        assertTrue(p.isValid());
      }
      for (int bad : new int[] {0, -1}) {
        assertThrows(IllegalArgumentException.class, () -> a.tryAcquireSemaphore(n, bad));
      }
    }
  }

  /*
   * Readers share the name and carry the write epoch; a writer excludes everyone and moves
   * it; a waiting writer holds new readers back and gets the name when the reads go.
   */
  @Test
  void readWriteLocks() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("rw");
      LockTerm r1 = a.rwLock(n, LockMode.READ);
      LockTerm r2 = b.tryRwLock(n, LockMode.READ).orElseThrow();
      assertEquals(TermKind.READ, r1.kind());
      assertEquals(0, r1.token(), "no writer yet");
      assertEquals(0, r2.token());
      assertEquals(Optional.empty(), b.tryRwLock(n, LockMode.WRITE));
      r1.close();
      r2.close();
      LockTerm w = a.rwLock(n, LockMode.WRITE, WAIT).orElseThrow();
      assertEquals(TermKind.WRITE, w.kind());
      assertTrue(w.token() > 0);
      assertEquals(Optional.empty(), b.tryRwLock(n, LockMode.READ));
      assertEquals(Optional.empty(), b.tryRwLock(n, LockMode.WRITE));
      w.close();
      LockTerm r = b.rwLock(n, LockMode.READ);
      assertEquals(w.token(), r.token(), "a read's token is the last writer's");
      CompletableFuture<Optional<LockTerm>> writer = a.rwLockAsync(n, LockMode.WRITE, WAIT).toCompletableFuture();
      await("the writer's intent", () -> {
        Optional<LockTerm> x = b.tryRwLock(n, LockMode.READ);
        x.ifPresent(LockTerm::close);
        return x.isEmpty();
      });
      r.close();
      try (LockTerm w2 = get(writer).orElseThrow()) {
        assertTrue(w2.token() > w.token());
        assertEquals(TermKind.WRITE, w2.kind());
      }
      assertThrows(IllegalArgumentException.class, () -> a.tryRwLock(n + "\0x", LockMode.READ));
      assertThrows(NullPointerException.class, () -> a.rwLockAsync(n, null, WAIT));
    }
  }

  /** Kind names from the library, an election's kind, permits revoked by the client's close. */
  @Test
  void kindsAndClose() {
    assertEquals("ELECTION", TermKind.ELECTION.toString());
    assertEquals("LOCK", TermKind.LOCK.toString());
    assertEquals("SEMAPHORE", TermKind.SEMAPHORE.toString());
    assertEquals("READ", TermKind.READ.toString());
    assertEquals("WRITE", TermKind.WRITE.toString());
    assertEquals("UNKNOWN", TermKind.UNKNOWN.toString());
    assertEquals("UNKNOWN(42)", TermKind.nameOf(42));
    assertEquals(TermKind.UNKNOWN, TermKind.of(42));
    assertEquals(TermKind.WRITE, TermKind.of(4));
    Simba s = open();
    String n = name("kinds");
    LockTerm p = s.tryAcquireSemaphore(n, 1).orElseThrow();
    LockTerm w = s.tryRwLock(n, LockMode.WRITE).orElseThrow(); // another namespace
    CompletableFuture<Term> elected = new CompletableFuture<>();
    try (Election e = s.election(name("kinds-election")).start(elected::complete)) {
      assertEquals(TermKind.ELECTION, get(elected).kind());
    }
    s.close();
    for (LockTerm t : new LockTerm[] {p, w}) {
      assertFalse(t.isValid());
      assertEquals(RevokeReason.STOPPED, t.revokeReason(), t.kind().toString());
      t.close(); // after the client's close: nothing left to release
    }
  }
}
