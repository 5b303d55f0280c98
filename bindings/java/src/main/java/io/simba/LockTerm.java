package io.simba;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A held lock, or a held permit of a semaphore or read/write lock ({@link #kind()}
 * says which): a term without leader work. {@link #close()} releases it (revokes the
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
    super(ptr, true, name, TermKind.LOCK);
  }

  /** A permit (1.5): a semaphore's, a read or a write lock. */
  LockTerm(long ptr, String name, TermKind kind) {
    super(ptr, true, name, kind);
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
      ended();
    }
  }

  /**
   * Releases the lock without waiting, from anywhere, callbacks included
   * (simba_term_close_async; libsimba 1.4): the term is revoked (STOPPED) and the lease
   * released with its token. The future completes exactly once, on a library thread,
   * after the backend answered the release (or, when it failed, once it is being retried
   * in the background) and every {@code revoked()} stage of the term ran; the accessors
   * then answer from what the term ended with. After {@link #close()} (or a second
   * call) it is completed at once.
   */
  public CompletableFuture<Void> closeAsync() {
    CompletableFuture<Void> f = new CompletableFuture<>();
    if (!released.compareAndSet(false, true)) {
      f.complete(null);
      return f;
    }
    if (!refs.takeLock()) { // cannot happen while this is reachable: the Cleaner takes it
      ended();
      f.complete(null);
      return f;
    }
    int rc = Native.termCloseAsync(ptr, new Upcall() {
      @Override
      void done(int err) { // the lock reference is gone; the accessors' one is ours
        ended();
        f.complete(null);
      }
    });
    if (rc != 0) { // not started (out of memory): release it the blocking way
      try {
        Native.lockRelease(ptr);
      } finally {
        ended();
      }
      f.completeExceptionally(SimbaException.of(rc, name() + ": close refused"));
    }
    return f;
  }

  private void ended() {
    int reason = Native.termReason(ptr); // the accessors' reference keeps it until clean()
    endReason = reason != 0 ? reason : RevokeReason.STOPPED.code();
    cleanable.clean(); // deregisters it from the Cleaner and drops that reference
  }

  /** True once {@link #close()} was called. */
  public boolean isReleased() {
    return released.get();
  }
}
