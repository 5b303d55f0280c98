package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class ClientTest {
  @Test
  void versionMatchesTheHeader() {
    assertTrue(Simba.version().startsWith("1."), Simba.version());
    assertTrue(Native.versionNumber() >= 0x010300, "needs libsimba 1.3");
    assertEquals(Native.versionNumber(), Simba.versionNumber());
  }

  @Test
  void openSnapshotClose() {
    Simba s = open(config().clientName("java-snap").build());
    String lock = name("snap");
    assertEquals(SessionStatus.LIVE, s.status());
    try (LockTerm t = s.lock(lock)) {
      Snapshot snap = s.snapshot();
      assertEquals(SessionStatus.LIVE, snap.status());
      assertFalse(snap.sessionId().isEmpty());
      assertEquals("java-snap", snap.clientName());
      assertTrue(snap.remaining().toMillis() > 0);
      Snapshot.Lease l = snap.leases().stream().filter(x -> x.name().equals(lock)).findFirst().orElseThrow();
      assertTrue(l.lock());
      assertEquals(t.token(), l.token());
      assertTrue(snap.counters().get("acquires") >= 1);
    }
    s.close();
    assertEquals(SessionStatus.CLOSED, s.status());
    s.close(); // idempotent
    SimbaException e = assertThrows(SimbaException.class, () -> s.lock(lock));
    assertEquals(SimbaException.Code.CLOSED, e.code());
    assertThrows(SimbaException.class, s::snapshot);
  }

  @Test
  void inspectShowsTheBackendsLeases() {
    try (Simba s = open(config().clientName("java-inspect").build())) {
      String n = name("insp");
      try (LockTerm t = s.lock(n)) {
        String json = s.inspect(WAIT, n);
        assertTrue(json.contains("\"" + n + "\""), json);
        assertTrue(json.contains("\"token\":" + t.token()), json);
        assertTrue(json.contains("java-inspect"), json);
      }
      assertThrows(IllegalArgumentException.class, () -> s.inspect(Duration.ZERO, n));
    }
  }

  @Test
  void badUrls() {
    assumeMemory();
    assertThrows(IllegalArgumentException.class, () -> Simba.open("no-scheme"));
    SimbaException e = assertThrows(SimbaException.class, () -> Simba.open("nosuch://x"));
    assertEquals(SimbaException.Code.UNSUPPORTED, e.code());
    try (Simba s = Simba.open("memory://x")) {
      assertThrows(IllegalArgumentException.class, () -> s.election("bad name!").start(t -> {}));
      assertThrows(IllegalArgumentException.class, () -> s.lock("a/b"));
    }
  }

  @Test
  void sessionEventsOnTheExecutor() throws Exception {
    List<SessionEvent> events = new CopyOnWriteArrayList<>();
    List<String> threads = new CopyOnWriteArrayList<>();
    AtomicInteger submitted = new AtomicInteger();
    Executor ex = r -> {
      submitted.incrementAndGet();
      Thread t = new Thread(r, "host-executor");
      t.setDaemon(true);
      t.start();
    };
    assumeBackend();
    Simba s = Simba.open(URL, config().callbackExecutor(ex).onSessionEvent(e -> {
      events.add(e);
      threads.add(Thread.currentThread().getName());
    }).build());
    List<SessionEvent> late = new CopyOnWriteArrayList<>();
    AutoCloseable sub = s.onSessionEvent(late::add);
    assertTrue(s.awaitLive(WAIT));
    // A task the host executor has not started when the client closes runs on the
    // closing thread (simba.h), so the check below waits for the first delivery.
    await("SessionOpened delivered", () -> !events.isEmpty());
    String n = name("ev");
    s.lock(n).close();
    sub.close();
    s.close();
    assertTrue(late.stream().noneMatch(e -> e instanceof SessionEvent.SessionClosed), "nothing after unsubscribing");
    assertTrue(events.stream().anyMatch(e -> e instanceof SessionEvent.SessionClosed), events.toString());
    assertTrue(events.get(events.size() - 1) instanceof SessionEvent.SessionClosed, events.toString());
    assertTrue(submitted.get() > 0);
    assertTrue(events.get(0) instanceof SessionEvent.SessionOpened, events.toString());
    assertEquals("host-executor", threads.get(0), "callbacks run on the configured executor");
  }

  @Test
  void tasksTheHostNeverStartedRunAtClose() {
    assumeBackend();
    List<Runnable> held = new CopyOnWriteArrayList<>();
    List<SessionEvent> events = new CopyOnWriteArrayList<>();
    Simba s = Simba.open(URL, config().callbackExecutor(held::add).onSessionEvent(events::add).build());
    assertTrue(s.awaitLive(WAIT));
    assertTrue(events.isEmpty(), "the host has not run anything yet");
    s.close();
    assertTrue(events.get(0) instanceof SessionEvent.SessionOpened, events.toString());
    assertTrue(events.get(events.size() - 1) instanceof SessionEvent.SessionClosed, events.toString());
    int delivered = events.size();
    held.forEach(Runnable::run); // the host runs them late: each only frees its block
    assertEquals(delivered, events.size(), events.toString());
  }

  @Test
  void nativeThreadsDetachAndRefsAreFreed() throws Exception {
    long before = Native.liveRefs();
    Set<Thread> attachedBefore = libraryThreads();
    Simba s = open();
    String n = name("refs");
    LeaderTask task = s.election(n).runWhileLeader(term -> {
      assertTrue(Thread.currentThread().isDaemon(), "library threads are attached as daemons");
      term.awaitRevoked(WAIT);
    });
    await("elected", task::isLeader);
    get(s.election(n + ".2").start(t -> {}).stop());
    s.lockAsync(n + ".3", WAIT).toCompletableFuture().get().orElseThrow().close();
    assertTrue(Native.liveRefs() > before);
    Set<Thread> attachedOpen = libraryThreads();
    s.close();
    assertTrue(task.isStopped());
    assertFalse(task.hasHandle(), "the task's handle was freed by the close");
    assertEquals(before, Native.liveRefs(), "every global reference is freed once the client closed");
    assertFalse(attachedBefore.containsAll(attachedOpen), "the client's threads were attached");
    await("the client's library threads to exit and detach", () -> attachedBefore.containsAll(libraryThreads()));
  }

  private static Set<Thread> libraryThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("simba-native") && t.isAlive()).collect(Collectors.toSet());
  }

  @Test
  void closeFromACallbackDoesNotWait() {
    Simba s = open();
    AtomicInteger revoked = new AtomicInteger();
    s.election(name("cb-close")).start(new ElectionListener() {
      @Override
      public void onElected(Term term) {
        s.close(); // starts the close, returns
      }

      @Override
      public void onRevoked(Term term, RevokeReason reason) {
        assertEquals(RevokeReason.STOPPED, reason);
        revoked.incrementAndGet();
      }
    });
    get(s.closed());
    assertEquals(1, revoked.get());
    s.close();
    assertEquals(SessionStatus.CLOSED, s.status());
  }

  @Test
  void awaitLiveTimesOutOnAnUnreachableBackend() {
    assumeMemory();
    try (Simba s = Simba.open("redis://127.0.0.1:1", config().build())) {
      assertFalse(s.awaitLive(Duration.ofMillis(300)));
      assertNotEquals(SessionStatus.LIVE, s.status());
    }
  }

  /** set("callback.executor", "pool"): callbacks on the library's own (attached) threads, not a Java pool. */
  @Test
  void theLibrarysPoolRunsCallbacksWhenAsked() {
    SimbaConfig cfg = config().set("callback.executor", "pool").set("callback.threads", "1").build();
    assertEquals("pool", cfg.settings().get("callback.executor"));
    try (Simba s = open(cfg)) {
      BlockingQueue<String> threads = new LinkedBlockingQueue<>();
      Election e = s.election(name("libpool")).start(t -> threads.add(Thread.currentThread().getName()));
      assertEquals("simba-native", take(threads));
      get(e.stop());
      s.lock(name("libpool-lock")).close();
    }
  }
}
