package io.simba;

/**
 * The session's status (snapshot().status()). {@link #toString()} is the library's name
 * (simba_session_status_name); a status a newer library adds reads as {@link #UNKNOWN}.
 */
public enum SessionStatus {
  /** No session yet, or a new one after the last ended. */
  OPENING,
  /** The last keep-alive succeeded. */
  LIVE,
  /** The last keep-alive failed; the deadline has not passed. */
  SUSPENDED,
  /** The client is closed. */
  CLOSED,
  /** A status this binding does not know (a newer library). */
  UNKNOWN;

  /** The C value (SIMBA_SESSION_*, pinned: OPENING is 0, the rest follow); -1 for UNKNOWN. */
  public int code() {
    return this == UNKNOWN ? -1 : ordinal();
  }

  /** The library's name: "OPENING", "LIVE", "SUSPENDED", "CLOSED"; "UNKNOWN" for UNKNOWN. */
  @Override
  public String toString() {
    return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_SESSION_STATUS, code());
  }

  /** From the C value; UNKNOWN for a value not listed here. */
  public static SessionStatus of(int code) {
    SessionStatus[] v = values();
    return code >= 0 && code < v.length - 1 ? v[code] : UNKNOWN;
  }

  /** From the library's name (snapshot JSON); UNKNOWN for a name not listed here. */
  static SessionStatus parse(String s) {
    for (SessionStatus st : values()) if (st != UNKNOWN && st.toString().equals(s)) return st;
    return UNKNOWN;
  }
}
