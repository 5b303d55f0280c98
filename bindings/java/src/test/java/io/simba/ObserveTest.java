package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** Observing a name's holder (simba_observe_start) and the metrics text (simba_client_metrics_text). */
class ObserveTest {
  private static int indexOf(List<Observer.Holder> seen, String session, long token) {
    for (int i = 0; i < seen.size(); i++) {
      Observer.Holder h = seen.get(i);
      if (session.equals(h.session()) && h.token() == token) return i;
    }
    return -1;
  }

  @Test
  void anObserverSeesAHandover() {
    try (Simba a = open(config().clientName("java-obs-a").build());
         Simba b = open(config().clientName("java-obs-b").build());
         Simba w = open()) {
      String n = name("obs");
      List<Observer.Holder> seen = new CopyOnWriteArrayList<>();
      Observer o = w.observe(n, Duration.ofMillis(50), seen::add);
      assertEquals(n, o.name());
      await("the first state", () -> !seen.isEmpty());
      assertTrue(seen.get(0).isFree(), "nobody holds a fresh name: " + seen);
      assertEquals(n, seen.get(0).name());
      String sa = a.snapshot().sessionId();
      String sb = b.snapshot().sessionId();
      long t1;
      try (LockTerm ta = a.lock(n)) {
        t1 = ta.token();
        await("holder a", () -> indexOf(seen, sa, t1) >= 0);
      }
      long t2;
      try (LockTerm tb = b.lock(n)) {
        t2 = tb.token();
        await("holder b", () -> indexOf(seen, sb, t2) >= 0);
      }
      assertTrue(t2 > t1, "b's token is larger");
      int ia = indexOf(seen, sa, t1);
      int ib = indexOf(seen, sb, t2);
      assertTrue(ia < ib, "a, then b: " + seen);
      assertEquals("java-obs-a", seen.get(ia).client());
      assertEquals("java-obs-b", seen.get(ib).client());
      assertFalse(seen.get(ib).isFree());
      assertEquals(seen.get(seen.size() - 1), o.last().orElseThrow());
      await("free again", () -> seen.get(seen.size() - 1).isFree());
      o.close();
      int after = seen.size();
      a.lock(n).close();
      sleep(200);
      assertEquals(after, seen.size(), "nothing after close");
      o.close(); // idempotent
    }
  }

  @Test
  void observersAreFreedByTheClose() {
    long before = Native.liveRefs();
    Simba s = open();
    List<Observer.Holder> seen = new CopyOnWriteArrayList<>();
    s.observe(name("obs-close"), Duration.ZERO, seen::add);
    Observer inCallback = s.observe(name("obs-cb"), Duration.ofMillis(10), h -> {});
    // from a callback: the close does not wait there, and frees on a thread of its own
    s.observe(name("obs-self"), Duration.ofMillis(10), h -> inCallback.close());
    await("a first state", () -> !seen.isEmpty());
    assertThrows(IllegalArgumentException.class, () -> s.observe(name("obs-bad"), Duration.ofMillis(5), h -> {}));
    s.close();
    await("every global reference freed", () -> Native.liveRefs() == before);
  }

  @Test
  void metricsCountWhatHappened() {
    String client = "java-metrics-" + UUID.randomUUID().toString().substring(0, 8);
    try (Simba s = open(config().clientName(client).build())) {
      String n = name("metrics");
      for (int i = 0; i < 3; i++) s.lock(n).close();
      String text = s.metricsText();
      String c = "{client=\"" + client + "\"";
      assertTrue(text.contains("# TYPE simba_acquires_total counter\n"), text);
      assertTrue(text.contains("simba_acquires_total" + c + "} 3\n"), text);
      assertTrue(text.contains("simba_terms_total" + c + "} 3\n"), text);
      assertTrue(text.contains("simba_releases_total" + c + "} 3\n"), text);
      assertTrue(text.contains("simba_revocations_total" + c + ",reason=\"STOPPED\"} 3\n"), text);
      assertTrue(text.contains("simba_leases_held" + c + "} 0\n"), text);
      assertTrue(text.contains("simba_session_state" + c + ",state=\"LIVE\"} 1\n"), text);
      assertTrue(text.contains("simba_sessions_opened_total" + c + "} 1\n"), text);
      try (LockTerm t = s.lock(n)) {
        assertTrue(s.metricsText().contains("simba_leases_held" + c + "} 1\n"));
      }
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }
}
