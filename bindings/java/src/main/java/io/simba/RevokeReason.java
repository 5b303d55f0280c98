package io.simba;

/**
 * Why a term ended. {@link #toString()} is the library's name (simba_revoke_reason_name);
 * a reason a newer library adds reads as {@link #UNKNOWN}, and its number and name stay
 * readable ({@link Term#revokeReasonCode()}, {@link #nameOf(int)}).
 */
public enum RevokeReason {
  /** The election was stopped, the lock released, or the client closed. */
  STOPPED,
  /** The election stepped down. */
  STEPPED_DOWN,
  /** The session's local deadline passed without a successful keep-alive. */
  DEADLINE_PASSED,
  /** The backend reported the session expired. */
  SESSION_EXPIRED,
  /** A keep-alive reply no longer lists the lease as owned by this session. */
  TAKEN_OVER,
  /** A reason this binding does not know (a newer library). */
  UNKNOWN;

  /** The C value (SIMBA_REVOKE_*, pinned: STOPPED is 1, the rest follow); -1 for UNKNOWN. */
  public int code() {
    return this == UNKNOWN ? -1 : ordinal() + 1;
  }

  /** The library's name: "STOPPED", "TAKEN_OVER", ...; "UNKNOWN" for UNKNOWN. */
  @Override
  public String toString() {
    return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_REVOKE_REASON, code());
  }

  /** The library's name of any value: "STOPPED" for 1, "UNKNOWN(9)" for a value it does not know either. */
  public static String nameOf(int code) {
    String n = Native.name(Native.NAME_REVOKE_REASON, code);
    return n.equals("UNKNOWN") ? "UNKNOWN(" + code + ")" : n;
  }

  /** From the C value; null for SIMBA_REVOKE_NONE (0), UNKNOWN for a value not listed here. */
  public static RevokeReason of(int code) {
    RevokeReason[] v = values();
    return code == 0 ? null : code > 0 && code < v.length ? v[code - 1] : UNKNOWN;
  }
}
