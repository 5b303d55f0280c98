package io.simba;

/**
 * Why a term ended. {@link #toString()} is the library's name (simba_revoke_reason_name);
 * a reason a newer library adds reads as {@link #UNKNOWN}, and its number and name stay
 * readable ({@link Term#revokeReasonCode()}, {@link #nameOf(int)}).
 */
public enum RevokeReason {
  /** The election was stopped, the lock released, or the client closed. */
  STOPPED(1),
  /** The election stepped down. */
  STEPPED_DOWN(2),
  /** The session's local deadline passed without a successful keep-alive. */
  DEADLINE_PASSED(3),
  /** The backend reported the session expired. */
  SESSION_EXPIRED(4),
  /** A keep-alive reply no longer lists the lease as owned by this session. */
  TAKEN_OVER(5),
  /** A reason this binding does not know (a newer library). */
  UNKNOWN(-1);

  private final int code;

  RevokeReason(int code) {
    this.code = code;
  }

  /** The C value (SIMBA_REVOKE_*); -1 for UNKNOWN. */
  public int code() {
    return code;
  }

  /** The library's name: "STOPPED", "TAKEN_OVER", ...; "UNKNOWN" for UNKNOWN. */
  @Override
  public String toString() {
    return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_REVOKE_REASON, code);
  }

  /** The library's name of any value: "STOPPED" for 1, "UNKNOWN(9)" for a value it does not know either. */
  public static String nameOf(int code) {
    String n = Native.name(Native.NAME_REVOKE_REASON, code);
    return n.equals("UNKNOWN") ? "UNKNOWN(" + code + ")" : n;
  }

  /** From the C value; null for SIMBA_REVOKE_NONE (0), UNKNOWN for a value not listed here. */
  public static RevokeReason of(int code) {
    if (code == 0) return null;
    for (RevokeReason r : values()) if (r.code == code) return r;
    return UNKNOWN;
  }
}
