package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** ZooKeeper caps the session timeout (30 s on the test server): a 60 s lease is shortened. */
class LeaseShortenedTest {
  @Test
  void sessionLeaseShortenedIsPublished() {
    Assumptions.assumeTrue(URL.startsWith("zookeeper:"), "needs ZooKeeper's maxSessionTimeout");
    BlockingQueue<SessionEvent> events = new LinkedBlockingQueue<>();
    SimbaConfig cfg = SimbaConfig.builder().leaseDuration(Duration.ofSeconds(60)).build();
    try (Simba s = Simba.open(URL, cfg)) {
      s.onSessionEvent(events::add);
      SessionEvent e;
      do {
        e = take(events);
      } while (!(e instanceof SessionEvent.SessionLeaseShortened));
      assertTrue(e.detailJson().startsWith("{"), e.detailJson());
      assertTrue(s.snapshot().leaseShortened());
      assertTrue(s.snapshot().renewPeriod().compareTo(Duration.ofSeconds(20)) < 0, s.snapshot().json());
    }
  }
}
