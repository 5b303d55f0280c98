package io.simba;

/**
 * What a term is a term of (simba_term_kind, libsimba 1.5). {@link #toString()} is the
 * library's name (simba_term_kind_name); a kind a newer library adds reads as
 * {@link #UNKNOWN}.
 */
public enum TermKind {
  /** An election's (and a leader task's) term. */
  ELECTION,
  /** A lock's term. */
  LOCK,
  /** A permit of a semaphore. */
  SEMAPHORE,
  /** A read lock of a read/write lock. */
  READ,
  /** A write lock of a read/write lock. */
  WRITE,
  /** A kind this binding does not know (a newer library). */
  UNKNOWN;

  /** The C value (SIMBA_TERM_*, pinned: ELECTION is 0, the rest follow); -1 for UNKNOWN. */
  public int code() {
    return this == UNKNOWN ? -1 : ordinal();
  }

  /** The library's name: "ELECTION", "SEMAPHORE", ...; "UNKNOWN" for UNKNOWN. */
  @Override
  public String toString() {
    return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_TERM_KIND, code());
  }

  /** The library's name of any value: "READ" for 3, "UNKNOWN(9)" for a value it does not know either. */
  public static String nameOf(int code) {
    String n = Native.name(Native.NAME_TERM_KIND, code);
    return n.equals("UNKNOWN") ? "UNKNOWN(" + code + ")" : n;
  }

  /** From the C value; UNKNOWN for a value not listed here. */
  public static TermKind of(int code) {
    TermKind[] v = values();
    return code >= 0 && code < v.length - 1 ? v[code] : UNKNOWN;
  }
}
