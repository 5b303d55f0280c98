package io.simba;

import static io.simba.TestSupport.*;
import static org.junit.jupiter.api.Assertions.*;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The enums keep their type; their text comes from the library; unknown values survive. */
class NamesTest {
  @BeforeEach
  void once() {
    assumeMemory();
  }

  @Test
  void revokeReasons() {
    assertEquals("STOPPED", RevokeReason.STOPPED.toString());
    assertEquals("TAKEN_OVER", RevokeReason.TAKEN_OVER.toString());
    assertEquals("DEADLINE_PASSED", RevokeReason.nameOf(3));
    for (RevokeReason r : RevokeReason.values()) {
      if (r != RevokeReason.UNKNOWN) assertEquals(r.toString(), Native.name(Native.NAME_REVOKE_REASON, r.code()));
      if (r != RevokeReason.UNKNOWN) assertSame(r, RevokeReason.of(r.code()));
    }
    assertNull(RevokeReason.of(0), "NONE: not revoked");
    assertSame(RevokeReason.UNKNOWN, RevokeReason.of(9), "a reason from a newer library");
    assertEquals("UNKNOWN(9)", RevokeReason.nameOf(9));
    assertEquals("UNKNOWN", RevokeReason.UNKNOWN.toString());
  }

  @Test
  void sessionStatuses() {
    assertEquals("SUSPENDED", SessionStatus.SUSPENDED.toString());
    assertSame(SessionStatus.LIVE, SessionStatus.of(1));
    assertSame(SessionStatus.UNKNOWN, SessionStatus.of(7));
    assertSame(SessionStatus.UNKNOWN, SessionStatus.parse("HIBERNATING"));
    assertSame(SessionStatus.CLOSED, SessionStatus.parse("CLOSED"));
  }

  @Test
  void events() {
    SessionEvent e = SessionEvent.of(5, "{}");
    assertTrue(e instanceof SessionEvent.SessionLeaseShortened);
    assertEquals("SESSION_LEASE_SHORTENED", e.name());
    assertEquals(5, e.type());
    assertEquals("SESSION_OPENED", SessionEvent.of(0, "{}").name());
    SessionEvent u = SessionEvent.of(42, "{\"x\":1}");
    SessionEvent.SessionUnknown su = assertInstanceOf(SessionEvent.SessionUnknown.class, u, "passed on, not dropped");
    assertEquals(42, su.type());
    assertEquals("UNKNOWN", su.name());
    assertEquals("{\"x\":1}", su.detailJson());
  }

  @Test
  void errorCodes() {
    assertEquals("EBUSY", SimbaException.Code.BUSY.toString());
    assertEquals("EINVAL", SimbaException.Code.INVALID.toString());
    assertEquals("ECANCELED", SimbaException.Code.CANCELED.toString());
    assertFalse(SimbaException.Code.TIMED_OUT.description().isEmpty());
    for (SimbaException.Code c : SimbaException.Code.values()) {
      if (c != SimbaException.Code.UNKNOWN) assertSame(c, SimbaException.Code.of(c.value()));
    }
    RuntimeException r = SimbaException.of(-42, "");
    SimbaException s = assertInstanceOf(SimbaException.class, r, "an unknown code does not throw anything else");
    assertSame(SimbaException.Code.UNKNOWN, s.code());
    assertEquals(-42, s.rawCode());
    assertEquals("UNKNOWN(-42)", s.codeName());
    assertFalse(s.getMessage().isEmpty(), "the library's text");
    SimbaException busy = (SimbaException) SimbaException.of(-9, "held");
    assertEquals("EBUSY", busy.codeName());
    assertEquals("held", busy.getMessage());
  }

  @Test
  void aRevokedTermNamesItsReason() {
    try (Simba s = open()) {
      LockTerm t = s.lock(name("names"));
      assertEquals(0, t.revokeReasonCode());
      t.close();
      assertEquals(1, t.revokeReasonCode());
      assertEquals("STOPPED", t.revokeReason().toString());
      assertEquals("STOPPED", RevokeReason.nameOf(t.revokeReasonCode()));
    }
  }
}
