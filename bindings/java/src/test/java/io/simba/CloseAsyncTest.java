package io.simba;

import static io.simba.TestSupport.WAIT;
import static io.simba.TestSupport.assumeMemory;
import static io.simba.TestSupport.await;
import static io.simba.TestSupport.get;
import static io.simba.TestSupport.name;
import static io.simba.TestSupport.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The one close shape of libsimba 1.4 (closeAsync, simba_*_close_async) on memory://:
 * from outside and from the handle's own callback or work, the future completes exactly
 * once, after the handle's last callback, with the callback's global reference freed;
 * nothing of the handle runs after it.
 */
class CloseAsyncTest {
  /** The handle's callbacks, counted, and what the close's done saw. */
  static final class Probe {
    final AtomicInteger inside = new AtomicInteger();
    final AtomicInteger calls = new AtomicInteger();
    final AtomicInteger returned = new AtomicInteger();
    final AtomicInteger late = new AtomicInteger();
    final AtomicInteger done = new AtomicInteger();
    final AtomicInteger insideAtDone = new AtomicInteger(-1);
    final AtomicInteger returnedAtDone = new AtomicInteger(-1);
    volatile boolean sealed;
    final AtomicReference<CompletableFuture<Void>> closed = new AtomicReference<>();

    void enter() {
      inside.incrementAndGet();
      calls.incrementAndGet();
      if (sealed) late.incrementAndGet();
    }

    void exit() {
      returned.incrementAndGet();
      inside.decrementAndGet();
    }

    /** Records the close's future and what holds when it completes. */
    void closing(CompletableFuture<Void> f) {
      assertNotNull(f);
      f.whenComplete((v, e) -> {
        insideAtDone.set(inside.get());
        returnedAtDone.set(returned.get());
        sealed = true;
        done.incrementAndGet();
      });
      closed.set(f);
    }

    void expectClosedOnce(long refsBefore) throws InterruptedException {
      await("the close", () -> closed.get() != null);
      get(closed.get());
      await("the close's done", () -> done.get() == 1);
      Thread.sleep(200);
      assertEquals(1, done.get(), "done ran once");
      assertEquals(0, insideAtDone.get(), "no callback ran at done");
      assertEquals(0, late.get(), "no callback after done");
      await("the callbacks' references freed", () -> Native.liveRefs() <= refsBefore);
    }
  }

  static void freeName(Simba s, String name) {
    Optional<LockTerm> t = s.tryLock(name);
    assertTrue(t.isPresent(), name + " still held after the close's done");
    t.get().close();
  }

  static void pause(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void electionFromOutsideAndFromItsCallback(boolean fromCallback) throws Exception {
    assumeMemory();
    try (Simba s = open(); Simba other = open()) {
      long refs = Native.liveRefs();
      String n = name("close-el");
      Election e = s.election(n);
      Probe p = new Probe();
      AtomicInteger revoked = new AtomicInteger();
      e.start(new ElectionListener() {
        @Override
        public void onElected(Term term) {
          p.enter();
          try {
            if (fromCallback) {
              p.closing(e.closeAsync());
              pause(50); // done waits for this callback to return
            }
          } finally {
            p.exit();
          }
        }

        @Override
        public void onRevoked(Term term, RevokeReason reason) {
          p.enter();
          revoked.incrementAndGet();
          p.exit();
        }
      });
      await("elected", () -> p.calls.get() == 1);
      if (!fromCallback) p.closing(e.closeAsync());
      p.expectClosedOnce(refs);
      assertEquals(0, revoked.get(), "the detached listener heard onRevoked");
      freeName(other, n);
      assertSame(p.closed.get(), e.closeAsync(), "a second closeAsync is the same close");
      e.close(); // after closeAsync: nothing left to do
    }
  }

  /** A stop asked for before completes first. */
  @Test
  void electionAfterAStop() throws Exception {
    assumeMemory();
    try (Simba s = open()) {
      Election e = s.election(name("close-stop"));
      Probe p = new Probe();
      e.start(t -> {
        p.enter();
        p.exit();
      });
      await("elected", () -> p.calls.get() == 1);
      CompletableFuture<Void> stopped = e.stop().toCompletableFuture();
      AtomicInteger stoppedAtDone = new AtomicInteger(-1);
      CompletableFuture<Void> f = e.closeAsync();
      f.whenComplete((v, x) -> stoppedAtDone.set(stopped.isDone() ? 1 : 0));
      p.closing(f);
      p.expectClosedOnce(Long.MAX_VALUE);
      assertEquals(1, stoppedAtDone.get(), "the earlier stop completed before the close");
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"task-outside", "task-own-work", "group-outside", "group-own-work"})
  void taskFromOutsideAndFromItsWork(String how) throws Exception {
    assumeMemory();
    boolean group = how.startsWith("group");
    boolean fromWork = how.endsWith("own-work");
    try (Simba s = open(); Simba other = open()) {
      long refs = Native.liveRefs();
      String n = name("close-task");
      Probe p = new Probe();
      AtomicReference<LeaderTask> task = new AtomicReference<>();
      LeaderWork work = term -> {
        p.enter();
        try {
          if (fromWork && p.calls.get() == 1) {
            while (task.get() == null) Thread.onSpinWait();
            p.closing(task.get().closeAsync());
          }
          while (!term.awaitRevoked(Duration.ofMillis(20))) {
            // the close revokes it
          }
          pause(100); // returns late: done waits for it
        } finally {
          p.exit();
        }
      };
      LeaderTask t = group ? s.group(n, 1, work) : s.election(n).runWhileLeader(work);
      task.set(t);
      await("the work", () -> p.calls.get() == 1);
      if (!fromWork) p.closing(t.closeAsync());
      p.expectClosedOnce(refs);
      assertEquals(p.calls.get(), p.returnedAtDone.get(), "every run of the work returned");
      freeName(other, group ? n + ".0" : n);
    }
  }

  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void observerFromOutsideAndFromItsListener(boolean fromListener) throws Exception {
    assumeMemory();
    try (Simba s = open(); Simba holder = open()) {
      long refs = Native.liveRefs();
      String n = name("close-obs");
      Probe p = new Probe();
      AtomicReference<Observer> self = new AtomicReference<>();
      Observer o = s.observe(n, Duration.ofMillis(20), h -> {
        p.enter();
        try {
          if (fromListener && !h.isFree()) {
            Observer me = self.getAndSet(null);
            if (me != null) {
              p.closing(me.closeAsync());
              pause(50);
            }
          }
        } finally {
          p.exit();
        }
      });
      await("a first state", () -> p.calls.get() >= 1);
      if (fromListener) {
        self.set(o);
        try (LockTerm held = holder.lock(n)) {
          await("the close from the listener", () -> p.closed.get() != null);
        }
      } else {
        p.closing(o.closeAsync());
      }
      p.expectClosedOnce(refs);
      holder.lock(n).close(); // a change nobody hears any more
      Thread.sleep(100);
      assertEquals(0, p.late.get());
      o.close(); // after closeAsync: nothing to do
    }
  }

  @Test
  void lockTermReleasesWithoutWaiting() throws Exception {
    assumeMemory();
    try (Simba s = open(); Simba other = open()) {
      String n = name("close-lock");
      LockTerm held = s.lock(n);
      CompletableFuture<RevokeReason> revoked = held.revoked().toCompletableFuture();
      AtomicInteger revokedAtDone = new AtomicInteger(-1);
      CompletableFuture<Void> f = held.closeAsync();
      f.whenComplete((v, e) -> revokedAtDone.set(revoked.isDone() ? 1 : 0));
      get(f);
      await("done", () -> revokedAtDone.get() >= 0);
      assertEquals(1, revokedAtDone.get(), "the term's revoked stage ran before the close's done");
      assertTrue(held.isReleased());
      assertFalse(held.isValid());
      assertEquals(RevokeReason.STOPPED, held.revokeReason());
      freeName(other, n);
      assertTrue(held.closeAsync().isDone(), "a second closeAsync completes at once");
      held.close(); // a no-op now

      // From a callback: the lock's own revoked stage of another lock term.
      LockTerm a = s.lock(name("close-lock-a"));
      LockTerm b = s.lock(name("close-lock-b"));
      AtomicReference<CompletableFuture<Void>> inCb = new AtomicReference<>();
      a.revoked().thenRun(() -> inCb.set(b.closeAsync()));
      a.close();
      await("the close from the callback", () -> inCb.get() != null);
      get(inCb.get());
      assertTrue(b.isReleased());
      freeName(other, b.name());
    }
  }
}
