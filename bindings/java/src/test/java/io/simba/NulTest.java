package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import java.time.Duration;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.Test;

/** A string with U+0000 never reaches the library (a C string would end there); others cross as real UTF-8. */
class NulTest {
  private static void refused(String what, Executable call) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call, what);
    assertTrue(e.getMessage().contains("NUL"), e.getMessage());
    assertTrue(e.getMessage().contains(what), "says which string: " + e.getMessage());
  }

  @Test
  void aNameWithANulIsNotTheNameBeforeIt() {
    try (Simba a = open(); Simba b = open()) {
      String n = name("nul");
      try (LockTerm held = a.lock(n)) {
        // "n\0x" must not become "n": b would see it busy (or, on a, the same lease)
        refused("lease name contains a NUL byte at index " + n.length(), () -> b.tryLock(n + "\0-tenant-2"));
        refused("lease name", () -> b.lock(n + "\0x"));
        refused("lease name", () -> b.lock(n + "\0x", WAIT));
        refused("lease name", () -> b.lockAsync(n + "\0x", WAIT));
        refused("lease name", () -> b.election(n + "\0x").start(t -> {}));
        refused("lease name", () -> b.election(n + "\0x").runWhileLeader(t -> {}));
        refused("lease name", () -> b.election(n + "\0x").schedule(Duration.ZERO, Duration.ofSeconds(1), t -> {}));
        refused("group name", () -> b.group(n + "\0x", 2, t -> {}));
        refused("observed lease name", () -> b.observe(n + "\0x", Duration.ZERO, h -> {}));
        refused("inspected lease name", () -> b.inspect(WAIT, n, n + "\0x"));
        assertTrue(held.isValid());
      }
      // nothing above took or started anything: the name is free, and "n" is lockable on b
      b.tryLock(n).orElseThrow().close();
    }
  }

  @Test
  void theLibrarysNameCheckSaysNul() {
    Simba.checkLeaseName("jobs.tenant-1");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Simba.checkLeaseName("jobs\0-tenant-1"));
    assertTrue(e.getMessage().contains("NUL") && e.getMessage().contains("index 4"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> Simba.checkLeaseName("a/b"));
    assertFalse(e.getMessage().isEmpty());
    assertThrows(IllegalArgumentException.class, () -> Simba.checkLeaseName(""));
  }

  @Test
  void urlsAndConfigWithANul() {
    assumeMemory();
    refused("backend URL contains a NUL byte at index 12", () -> Simba.open("memory://acc\0 b"));
    refused("backend URL", () -> Simba.backendSchema("postgresql://h/db\0x"));
    refused("config value of client.name contains a NUL byte at index 1",
        () -> SimbaConfig.builder().clientName("a\0b").build());
    refused("config key", () -> SimbaConfig.builder().set("client.name\0x", "a").build());
    refused("config value of callback.threads", () -> SimbaConfig.builder().set("callback.threads", "2\0").build());
    // without the NUL both are fine, and a raw key is applied
    assertEquals("2", SimbaConfig.builder().set("callback.threads", "2").build().settings().get("callback.threads"));
    assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder().set("no.such.key", "1").build());
    assertThrows(IllegalArgumentException.class, () -> SimbaConfig.builder().set("loop.mode", "external"));
  }

  @Test
  void nonAsciiCrossesAsRealUtf8() {
    assumeMemory();
    String text = "\u00e9-\u20ac-\uD83D\uDE00"; // 2-, 3- and 4-byte UTF-8
    // client.name is printable ASCII: the library's refusal shows the bytes it got, real
    // UTF-8 (modified UTF-8 would have sent the emoji as two 3-byte surrogates, ED A0 BD ...)
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> SimbaConfig.builder().clientName("java-" + text).build());
    assertTrue(e.getMessage().contains("\\xC3\\xA9-\\xE2\\x82\\xAC-\\xF0\\x9F\\x98\\x80"), e.getMessage());
    // a Redis user name is any text: the snapshot's backend URL gives it back whole (nothing connects here)
    try (Simba s = Simba.open("redis://java-" + text + ":pw@127.0.0.1:1", config().build())) {
      assertEquals("redis://java-" + text + ":***@127.0.0.1:1", s.snapshot().backend(), "the password hidden");
    }
    IllegalArgumentException n = assertThrows(IllegalArgumentException.class, () -> Simba.checkLeaseName("caf\u00e9"));
    assertFalse(n.getMessage().contains("NUL"), n.getMessage());
  }
}
