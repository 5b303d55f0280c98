package io.simba;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One period during which this node owns a lease. Its accessors are pure functions
 * of the monotonic clock and the session's local deadline: once a term is seen
 * invalid it never becomes valid again. Thread-safe.
 */
public class Term {
  static final Cleaner CLEANER = Cleaner.create();

  /** Native references this object holds, released by close/cleaner. */
  static final class Refs implements Runnable {
    final long ptr;
    final AtomicInteger count;

    Refs(long ptr, int count) {
      this.ptr = ptr;
      this.count = new AtomicInteger(count);
    }

    boolean drop() {
      int n;
      do {
        n = count.get();
        if (n == 0) return false;
      } while (!count.compareAndSet(n, n - 1));
      return true;
    }

    @Override
    public void run() { // the cleaner: drop what is left (the last drop of a held lock releases it)
      while (drop()) Native.termRelease(ptr);
    }
  }

  final long ptr;
  final Refs refs;
  private final String name;
  private final long token;
  private CompletableFuture<RevokeReason> revoked; // guarded by this
  // Leader work (LeaderTask): the thread running the work, interrupted once at the
  // revocation by the term's watcher; awaitRevoked consumes that interrupt.
  private Thread runner; // guarded by this
  private boolean watched; // guarded by this
  private boolean revokeDelivered; // guarded by this

  /** @param name the lease name when the caller knows it (spares a native call), else null */
  Term(long ptr, int refCount, String name) {
    this.ptr = ptr;
    this.refs = new Refs(ptr, refCount);
    this.name = name != null ? name : Native.termName(ptr);
    this.token = Native.termToken(ptr);
    CLEANER.register(this, refs);
  }

  /** A term borrowed by a callback: take a reference of our own. */
  static Term adopt(long ptr) {
    Native.termRetain(ptr);
    return new Term(ptr, 1, null);
  }

  /** The lease name. */
  public String name() {
    return name;
  }

  /** The fencing token: &gt; 0, constant within the term, increasing across terms of the name. */
  public long token() {
    return token;
  }

  /** Not revoked and the session's local deadline has not passed. */
  public boolean isValid() {
    try {
      return Native.termIsValid(ptr);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Time left before the local deadline; {@link Duration#ZERO} once the term ended. */
  public Duration remaining() {
    try {
      return Duration.ofMillis(Native.termRemaining(ptr));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Succeeds only if the term stays valid for more than {@code minRemaining}.
   *
   * @throws TermExpiredException if it does not
   */
  public void ensureValid(Duration minRemaining) {
    Objects.requireNonNull(minRemaining, "minRemaining");
    if (minRemaining.isNegative()) throw new IllegalArgumentException("minRemaining is negative");
    try {
      Native.termEnsureValid(ptr, minRemaining.toMillis());
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Same as {@code ensureValid(Duration.ZERO)}. */
  public void ensureValid() {
    ensureValid(Duration.ZERO);
  }

  /**
   * Why the term ended, or null while it has not been revoked; {@link RevokeReason#UNKNOWN}
   * for a reason this binding does not know (a newer library: {@link #revokeReasonCode()}).
   */
  public RevokeReason revokeReason() {
    int code = revokeReasonCode();
    return code == 0 ? null : RevokeReason.of(code);
  }

  /** The library's value of the revoke reason (0 while not revoked); readable for any value. */
  public int revokeReasonCode() {
    try {
      return Native.termReason(ptr);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Completes exactly once, with the reason, when the term is revoked; on the
   * callback executor, in order with the election's callbacks (for leader work: after
   * the work returned, in handover order).
   */
  public CompletionStage<RevokeReason> revoked() {
    return revokedFuture().minimalCompletionStage();
  }

  synchronized CompletableFuture<RevokeReason> revokedFuture() {
    if (revoked == null) {
      CompletableFuture<RevokeReason> f = new CompletableFuture<>();
      revoked = f;
      try {
        int rc = Native.termOnRevoked(ptr, new Upcall() {
          @Override
          void revoked(long term, int reason) {
            f.complete(RevokeReason.of(reason));
          }
        });
        if (rc != 0) { // revoked already and its client closed: nothing will run the callback
          RevokeReason r = revokeReason();
          f.complete(r != null ? r : RevokeReason.STOPPED);
        }
      } finally {
        Reference.reachabilityFence(this);
      }
    }
    return revoked;
  }

  /**
   * Sleeps until the term is revoked or stops being valid (its deadline passed, even
   * before the engine revoked it): an interruptible sleep for leader work.
   *
   * <p>Interruption follows Java's convention: an interrupt that is not the revocation's
   * throws {@link InterruptedException} and clears the thread's interrupt status. In
   * leader work the binding interrupts the work's thread at the revocation; returning
   * {@code true} reports that revocation, so its interrupt is consumed: the method never
   * returns with the interrupt status it was woken by still set.
   *
   * @return true once revoked or invalid, false when the timeout passed first
   * @throws InterruptedException if this thread was interrupted other than by the revocation
   */
  public boolean awaitRevoked(Duration timeout) throws InterruptedException {
    long end = System.nanoTime() + timeout.toNanos();
    try {
      while (true) {
        if (Thread.interrupted()) {
          if (interruptedByRevocation()) return true;
          throw new InterruptedException(name + ": interrupted");
        }
        long left = (end - System.nanoTime()) / 1_000_000;
        if (Native.termWaitRevoked(ptr, Math.max(0, Math.min(left, 50)))) {
          consumeRevocationInterrupt();
          return true;
        }
        if (left <= 0) return false;
      }
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  private synchronized boolean interruptedByRevocation() {
    return revokeDelivered && runner == Thread.currentThread();
  }

  /** On the work's thread, waits for the watcher's interrupt (it wakes with us) and clears it. */
  private synchronized void consumeRevocationInterrupt() {
    if (!watched || runner != Thread.currentThread()) return;
    long end = System.nanoTime() + 1_000_000_000L; // the watcher wakes on the same revocation
    while (!revokeDelivered && System.nanoTime() < end) {
      try {
        wait(10);
      } catch (InterruptedException e) {
        // the watcher's interrupt, or one merged with it: consumed below either way
      }
    }
    if (revokeDelivered) Thread.interrupted();
  }

  /** LeaderTask: a watcher will interrupt the work at the revocation. */
  synchronized void watch() {
    watched = true;
  }

  /** LeaderTask: a run of the work starts on this thread; false once revoked. */
  synchronized boolean beginWork() {
    if (revokeDelivered) return false;
    runner = Thread.currentThread();
    return true;
  }

  synchronized void endWork() {
    runner = null;
  }

  /** LeaderTask's watcher, at the revocation: interrupts the running work once. */
  synchronized void revokeWork() {
    revokeDelivered = true;
    if (runner != null) runner.interrupt();
    notifyAll();
  }

  /** Blocks until the term is revoked or invalid, uninterruptibly (the revocation watcher). */
  void waitRevokedUninterruptibly() {
    try {
      Native.termWaitRevoked(ptr, -1);
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[" + name + ", token " + token + (isValid() ? ", valid" : ", ended") + "]";
  }
}
