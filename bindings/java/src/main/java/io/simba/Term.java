package io.simba;

import java.lang.ref.Cleaner;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One period during which this node owns a lease. Its accessors are pure functions
 * of the monotonic clock and the session's local deadline: once a term is seen
 * invalid it never becomes valid again. Thread-safe.
 */
public class Term {
  static final Cleaner CLEANER = Cleaner.create();

  /**
   * The native references a term holds: a lock term's lock reference until close(), and
   * the accessors' reference, which calls in flight share (counted), so that a closed
   * lock term is freed on the closing thread as soon as no call reads it. Left to the
   * Cleaner, every lock cycle's term was freed later on the Cleaner's thread, and
   * that cross-thread free (with the Cleaner's and the GC's work for each term) cost a
   * cycle about a third of the C cycle (issue 36).
   */
  static final class Refs implements Runnable {
    final long ptr;
    private final AtomicBoolean lockRef;
    private final AtomicInteger users = new AtomicInteger(1); // the accessors' reference + calls

    Refs(long ptr, boolean lock) {
      this.ptr = ptr;
      this.lockRef = new AtomicBoolean(lock);
    }

    /** Takes the lock reference for its release; false if it was taken already. */
    boolean takeLock() {
      return lockRef.compareAndSet(true, false);
    }

    /** A call may read the term; false once it is freed (the term ended and its LockTerm closed). */
    boolean enter() {
      int n;
      do {
        n = users.get();
        if (n == 0) return false;
      } while (!users.compareAndSet(n, n + 1));
      return true;
    }

    void exit() {
      if (users.decrementAndGet() == 0) Native.termRelease(ptr);
    }

    @Override
    public void run() { // close() or the Cleaner: the last drop of a held lock releases it
      if (takeLock()) Native.termRelease(ptr);
      exit();
    }
  }

  final long ptr;
  final Refs refs;
  final Cleaner.Cleanable cleanable;
  private final String name;
  private final long token;
  private final TermKind kind;
  /** The revoke reason once the term is freed (set before): what its accessors answer then. */
  volatile int endReason;
  private CompletableFuture<RevokeReason> revoked; // guarded by this
  // Leader work (LeaderTask): the thread running the work, interrupted once at the
  // revocation by the term's watcher; awaitRevoked consumes that interrupt.
  private Thread runner; // guarded by this
  private boolean watched; // guarded by this
  private boolean revokeDelivered; // guarded by this

  /**
   * @param lock whether ptr carries a lock reference besides the accessors' one
   * @param name the lease name when the caller knows it (spares a native call), else null
   */
  Term(long ptr, boolean lock, String name) {
    this(ptr, lock, name, null);
  }

  /** @param kind the term's kind when the caller knows it (spares a native call), else null */
  Term(long ptr, boolean lock, String name, TermKind kind) {
    this.ptr = ptr;
    this.refs = new Refs(ptr, lock);
    this.name = name != null ? name : Native.termName(ptr);
    this.token = Native.termToken(ptr);
    this.kind = kind != null ? kind : TermKind.of(Native.termKind(ptr));
    this.cleanable = CLEANER.register(this, refs);
  }

  /** A term borrowed by a callback: take a reference of our own. */
  static Term adopt(long ptr) {
    Native.termRetain(ptr);
    return new Term(ptr, false, null);
  }

  /** The lease name. */
  public String name() {
    return name;
  }

  /**
   * The fencing token, constant within the term: &gt; 0 and increasing across terms of the
   * name (a semaphore's across all its permits). A read lock's is the name's write epoch
   * when it was granted (the last writer's token, 0 before any), shared by readers.
   */
  public long token() {
    return token;
  }

  /** What this term is a term of (libsimba 1.5): ELECTION, LOCK, SEMAPHORE, READ, WRITE. */
  public TermKind kind() {
    return kind;
  }

  /** Not revoked and the session's local deadline has not passed. */
  public boolean isValid() {
    if (!refs.enter()) return false;
    try {
      return Native.termIsValid(ptr);
    } finally {
      refs.exit();
    }
  }

  /** Time left before the local deadline; {@link Duration#ZERO} once the term ended. */
  public Duration remaining() {
    if (!refs.enter()) return Duration.ZERO;
    try {
      return Duration.ofMillis(Native.termRemaining(ptr));
    } finally {
      refs.exit();
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
    if (!refs.enter()) { // the library's words for an ended term
      throw new TermExpiredException("term of \"" + name + "\" (token " + token + ") is no longer valid");
    }
    try {
      Native.termEnsureValid(ptr, minRemaining.toMillis());
    } finally {
      refs.exit();
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
    if (!refs.enter()) return endReason;
    try {
      return Native.termReason(ptr);
    } finally {
      refs.exit();
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
      if (!refs.enter()) {
        f.complete(RevokeReason.of(endReason));
        return f;
      }
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
        refs.exit();
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
    if (!refs.enter()) { // freed: it ended (a closed lock term)
      if (Thread.interrupted()) throw new InterruptedException(name + ": interrupted");
      return true;
    }
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
      refs.exit();
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
    if (!refs.enter()) return;
    try {
      Native.termWaitRevoked(ptr, -1);
    } finally {
      refs.exit();
    }
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[" + name + ", token " + token + (isValid() ? ", valid" : ", ended") + "]";
  }
}
