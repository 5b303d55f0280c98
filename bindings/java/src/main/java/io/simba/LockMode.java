package io.simba;

/** The mode of a read/write lock (simba_lock_mode_t, libsimba 1.5). */
public enum LockMode {
  /** Shared with other readers; waits while a writer holds the name or a live writer waits. */
  READ,
  /** Exclusive; while it waits, its intent holds new readers back. */
  WRITE;

  /** The C value: SIMBA_LOCK_READ (1) or SIMBA_LOCK_WRITE (2). */
  int code() {
    return ordinal() + 1;
  }

  /** The kind of the terms this mode grants. */
  TermKind kind() {
    return this == READ ? TermKind.READ : TermKind.WRITE;
  }
}
