package io.simba;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A held lock: a term without leader work. {@link #close()} releases it (revokes the
 * term with STOPPED, releases the lease with the token, waits for the backend's
 * answer outside callbacks). A lock term that becomes unreachable without close()
 * is released by the cleaner, so a lost lock never stays held for longer than the session.
 */
public final class LockTerm extends Term implements AutoCloseable {
  private final AtomicBoolean released = new AtomicBoolean();

  /**
   * @param ptr an owned lock term with a second reference taken by the glue, so the
   *     accessors keep answering after the release (an ended term stays readable)
   */
  LockTerm(long ptr, String name) {
    super(ptr, true, name);
  }

  /**
   * Releases the lock; later calls do nothing. The native term is freed here (or when
   * a call reading it on another thread returns): its accessors then answer from what
   * it ended with.
   */
  @Override
  public void close() {
    if (!released.compareAndSet(false, true)) return;
    try {
      if (refs.takeLock()) Native.lockRelease(ptr);
    } finally {
      int reason = Native.termReason(ptr); // the accessors' reference keeps it until clean()
      endReason = reason != 0 ? reason : RevokeReason.STOPPED.code();
      cleanable.clean(); // deregisters it from the Cleaner and drops that reference
    }
  }

  /** True once {@link #close()} was called. */
  public boolean isReleased() {
    return released.get();
  }
}
