package io.simba;

/**
 * Session events, delivered one at a time, in order, on the callback executor
 * ({@link Simba#onSessionEvent}). {@link #detailJson()} is the library's detail object.
 */
public sealed interface SessionEvent {
  /** The library's detail, a JSON object. */
  String detailJson();

  /** A new session id was granted. */
  record SessionOpened(String detailJson) implements SessionEvent {}

  /** A keep-alive succeeded after a failure. */
  record SessionLive(String detailJson) implements SessionEvent {}

  /** A keep-alive failed; the session's deadline has not passed yet. */
  record SessionSuspended(String detailJson) implements SessionEvent {}

  /** The session ended: the backend said it expired, or the local deadline passed. */
  record SessionExpired(String detailJson) implements SessionEvent {}

  /** The client closed its session. */
  record SessionClosed(String detailJson) implements SessionEvent {}

  /**
   * The backend granted less than leaseDuration: the client renews every third of the
   * validity granted instead (published once per session, with a warning).
   */
  record SessionLeaseShortened(String detailJson) implements SessionEvent {}

  /**
   * An event this binding does not know (a newer library): passed on, not dropped, with
   * the library's number and name ("UNKNOWN" when the library does not name it either).
   */
  record SessionUnknown(int type, String name, String detailJson) implements SessionEvent {}

  /** The library's name of the event: "SESSION_OPENED", ... (simba_event_name). */
  default String name() {
    return Native.name(Native.NAME_EVENT, type());
  }

  /** The C value (SIMBA_EVENT_*). */
  default int type() {
    if (this instanceof SessionOpened) return 0;
    if (this instanceof SessionLive) return 1;
    if (this instanceof SessionSuspended) return 2;
    if (this instanceof SessionExpired) return 3;
    if (this instanceof SessionClosed) return 4;
    if (this instanceof SessionLeaseShortened) return 5;
    return -1; // not reached: SessionUnknown's own type() answers
  }

  /** From the C value; {@link SessionUnknown} for a value not listed here. */
  static SessionEvent of(int type, String json) {
    switch (type) {
      case 0: return new SessionOpened(json);
      case 1: return new SessionLive(json);
      case 2: return new SessionSuspended(json);
      case 3: return new SessionExpired(json);
      case 4: return new SessionClosed(json);
      case 5: return new SessionLeaseShortened(json);
      default: return new SessionUnknown(type, Native.name(Native.NAME_EVENT, type), json);
    }
  }
}
