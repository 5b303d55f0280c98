package io.simba;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The election for one lease name ({@link Simba#election(String)}): contend with a
 * listener ({@link #start}), or run leader work ({@link #runWhileLeader},
 * {@link #schedule}); or take the name as a lock. One contention at a time per name
 * and client. {@link #close()} stops what was started and waits for the stop.
 */
public final class Election implements AutoCloseable {
  private final Simba simba;
  private final String name;
  private Contender active; // guarded by this

  Election(Simba simba, String name) {
    this.simba = simba;
    this.name = Objects.requireNonNull(name, "name");
  }

  /** The lease name. */
  public String name() {
    return name;
  }

  private synchronized <T extends Contender> T begin(T c, java.util.function.ToLongFunction<T> start) {
    if (active != null && !active.isStopped()) throw new IllegalStateException(name + ": already started");
    c.started(start.applyAsLong(c));
    active = c;
    return c;
  }

  /**
   * Starts contending: onElected for each term won, then exactly one onRevoked.
   *
   * @throws IllegalStateException while this name is already started (or locked) on this client
   */
  public Election start(ElectionListener listener) {
    Objects.requireNonNull(listener, "listener");
    Contender run = new Contender(simba, name) {
      @Override
      void elected(long ptr) {
        Term t = Term.adopt(ptr);
        current = t;
        try {
          listener.onElected(t);
        } catch (Throwable e) {
          Callbacks.report("onElected of " + name, e);
        }
      }

      @Override
      void revoked(long ptr, int reason) {
        Term t = current;
        if (t == null || t.ptr != ptr) t = Term.adopt(ptr);
        current = null;
        try {
          listener.onRevoked(t, RevokeReason.of(reason));
        } catch (Throwable e) {
          Callbacks.report("onRevoked of " + name, e);
        }
      }
    };
    begin(run, c -> simba.withHandle(h -> Native.start(Native.ELECTION, h, name, 0, 0, c)));
    return this;
  }

  /**
   * Contends, and runs {@code work} on a thread of its own each time this node is
   * elected; the thread is interrupted when the term is revoked. When work returns
   * while the term is valid, the task steps down and contends again.
   */
  public LeaderTask runWhileLeader(LeaderWork work) {
    Objects.requireNonNull(work, "work");
    return begin(new LeaderTask(simba, name, work),
        c -> simba.withHandle(h -> Native.start(Native.RUN, h, name, 0, 0, c)));
  }

  /**
   * While leader, runs {@code work} after {@code initialDelay} and then with a fixed
   * delay of {@code period} between the end of one run and the start of the next.
   */
  public LeaderTask schedule(Duration initialDelay, Duration period, LeaderWork work) {
    Objects.requireNonNull(work, "work");
    if (initialDelay.isNegative()) throw new IllegalArgumentException("initialDelay is negative");
    if (period.isNegative() || period.isZero()) throw new IllegalArgumentException("period must be positive");
    return begin(new LeaderTask(simba, name, work), c -> simba.withHandle(
        h -> Native.start(Native.SCHEDULE, h, name, initialDelay.toMillis(), period.toMillis(), c)));
  }

  /** The current term while this node leads. */
  public Optional<Term> term() {
    Contender c;
    synchronized (this) {
      c = active;
    }
    return c == null ? Optional.empty() : c.term();
  }

  /** True while this node holds a valid term of the name. */
  public boolean isLeader() {
    return term().isPresent();
  }

  /** Steps down for {@code cooldown}; see {@link LeaderTask#stepDown}. */
  public CompletionStage<Void> stepDown(Duration cooldown) {
    Contender c;
    synchronized (this) {
      c = active;
    }
    if (c == null) throw new IllegalStateException(name + ": not started");
    return c.stepDown(cooldown);
  }

  /** Stops; completes after the last onRevoked. A not-started election completes at once. */
  public CompletionStage<Void> stop() {
    Contender c;
    synchronized (this) {
      c = active;
    }
    return c == null ? CompletableFuture.<Void>completedFuture(null).minimalCompletionStage() : c.stop();
  }

  /** {@link Simba#lock(String)} on this name. */
  public LockTerm lock() {
    return simba.lock(name);
  }

  /** {@link Simba#tryLock(String)} on this name. */
  public Optional<LockTerm> tryLock() {
    return simba.tryLock(name);
  }

  /** {@link Simba#lock(String, Duration)} on this name. */
  public Optional<LockTerm> lock(Duration timeout) {
    return simba.lock(name, timeout);
  }

  /** {@link Simba#lockAsync(String, Duration)} on this name. */
  public CompletionStage<Optional<LockTerm>> lockAsync(Duration timeout) {
    return simba.lockAsync(name, timeout);
  }

  /**
   * Closes what was started on this name without waiting, from anywhere, its own callbacks
   * included (simba_election_close_async; libsimba 1.4): stops it unless a stop was asked
   * for, and the listener hears nothing more (not even onRevoked of the term this stops).
   * The future completes exactly once, after the stop completed (the name released), the
   * stages of an earlier stop or step-down and every other callback: it is the last one.
   * Not started: completed at once.
   */
  public CompletableFuture<Void> closeAsync() {
    Contender c;
    synchronized (this) {
      c = active;
    }
    return c == null ? CompletableFuture.completedFuture(null) : c.closeAsync();
  }

  /**
   * Stops what was started on this name and waits for the stop (as {@link LeaderTask#close()}:
   * from a callback or leader work it starts the stop and returns). Not started: nothing to do.
   */
  @Override
  public void close() {
    Contender c;
    synchronized (this) {
      c = active;
    }
    if (c != null) c.close();
  }
}
