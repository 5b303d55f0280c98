package io.simba;

/** The session's status (snapshot().status()). */
public enum SessionStatus {
  /** No session yet, or a new one after the last ended. */
  OPENING,
  /** The last keep-alive succeeded. */
  LIVE,
  /** The last keep-alive failed; the deadline has not passed. */
  SUSPENDED,
  /** The client is closed. */
  CLOSED;

  static SessionStatus of(int v) {
    return v >= 0 && v <= 3 ? values()[v] : CLOSED;
  }

  static SessionStatus parse(String s) {
    for (SessionStatus st : values()) if (st.name().equalsIgnoreCase(s)) return st;
    return CLOSED;
  }
}
