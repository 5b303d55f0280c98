package io.simba;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.Executor;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class ConfigTest {
  @BeforeEach
  void once() {
    TestSupport.assumeMemory();
  }

  @Test
  void defaultsAreTheSeeds() {
    SimbaConfig c = SimbaConfig.builder().build();
    assertEquals(Duration.ofSeconds(15), c.leaseDuration());
    assertEquals(Duration.ofSeconds(5), c.renewInterval());
    assertEquals(0.01, c.drift(), 1e-9);
    assertEquals(Duration.ofMillis(50), c.margin());
    assertEquals(Duration.ofMillis(2500), c.retryJitter());
    assertEquals(Duration.ofMillis(100), c.minBackoff());
    assertNull(c.callbackExecutor());
  }

  @Test
  void derivedValuesFollowTheLease() {
    SimbaConfig c = SimbaConfig.builder().leaseDuration(Duration.ofSeconds(3)).build();
    assertEquals(Duration.ofSeconds(1), c.renewInterval());
    assertEquals(Duration.ofMillis(500), c.retryJitter());
    SimbaConfig d = c.toBuilder().leaseDuration(Duration.ofSeconds(6)).build();
    assertEquals(Duration.ofSeconds(2), d.renewInterval(), "toBuilder keeps derived values derived");
    assertEquals(Duration.ofSeconds(1), c.renewInterval(), "the original is unchanged");
  }

  @Test
  void renewTwiceMustFitInTheLease() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> SimbaConfig.builder().leaseDuration(Duration.ofSeconds(10)).renewInterval(Duration.ofSeconds(6)).build());
    assertTrue(e.getMessage().contains("renew"), e.getMessage());
    assertTrue(e.getMessage().contains("2"), "names the rule: " + e.getMessage());
  }

  @Test
  void leaseMinusDriftAndMarginMustExceedRenew() {
    // 2 x 4.9 s <= 10 s holds, but 10 s x 0.5 - 50 ms > 4.9 s does not
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder()
        .leaseDuration(Duration.ofSeconds(10)).renewInterval(Duration.ofMillis(4900)).drift(0.49)
        .margin(Duration.ofMillis(200)).build());
    assertTrue(e.getMessage().contains("drift") || e.getMessage().contains("margin"), e.getMessage());
  }

  @Test
  void badValues() {
    assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder().drift(0.5).build());
    assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder().leaseDuration(Duration.ofMillis(-1)));
    assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder().leaseDuration(Duration.ZERO).build());
  }

  @Test
  void toBuilderCopiesEverything() {
    Executor ex = Runnable::run;
    SimbaConfig c = SimbaConfig.builder().leaseDuration(Duration.ofSeconds(9)).renewInterval(Duration.ofSeconds(2))
        .drift(0.02).margin(Duration.ofMillis(70)).retryJitter(Duration.ZERO).minBackoff(Duration.ofMillis(300))
        .callbackExecutor(ex).clientName("n1").build();
    SimbaConfig d = c.toBuilder().build();
    assertEquals(c.leaseDuration(), d.leaseDuration());
    assertEquals(c.renewInterval(), d.renewInterval());
    assertEquals(0.02, d.drift(), 1e-9);
    assertEquals(Duration.ofMillis(70), d.margin());
    assertEquals(Duration.ZERO, d.retryJitter());
    assertEquals(Duration.ofMillis(300), d.minBackoff());
    assertSame(ex, d.callbackExecutor());
    assertEquals("n1", d.clientName());
  }
}
