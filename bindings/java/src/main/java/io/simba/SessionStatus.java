package io.simba;

/**
 * The session's status (snapshot().status()). {@link #toString()} is the library's name
 * (simba_session_status_name); a status a newer library adds reads as {@link #UNKNOWN}.
 */
public enum SessionStatus {
  /** No session yet, or a new one after the last ended. */
  OPENING(0),
  /** The last keep-alive succeeded. */
  LIVE(1),
  /** The last keep-alive failed; the deadline has not passed. */
  SUSPENDED(2),
  /** The client is closed. */
  CLOSED(3),
  /** A status this binding does not know (a newer library). */
  UNKNOWN(-1);

  private final int code;

  SessionStatus(int code) {
    this.code = code;
  }

  /** The C value (SIMBA_SESSION_*); -1 for UNKNOWN. */
  public int code() {
    return code;
  }

  /** The library's name: "OPENING", "LIVE", "SUSPENDED", "CLOSED"; "UNKNOWN" for UNKNOWN. */
  @Override
  public String toString() {
    return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_SESSION_STATUS, code);
  }

  /** From the C value; UNKNOWN for a value not listed here. */
  public static SessionStatus of(int code) {
    for (SessionStatus s : values()) if (s.code == code) return s;
    return UNKNOWN;
  }

  /** From the library's name (snapshot JSON); UNKNOWN for a name not listed here. */
  static SessionStatus parse(String s) {
    for (SessionStatus st : values()) if (st.code >= 0 && st.toString().equals(s)) return st;
    return UNKNOWN;
  }
}
