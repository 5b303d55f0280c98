package io.simba;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * A started election or task: one native handle, its stop, step-down and close.
 * The handle and the listener/work reference are freed inside the done of the stop
 * (the last callback), or after the client closed. Internal base class: the native
 * side is one handle type too (Native.start/stop/free), whatever was started.
 */
abstract class Contender extends Upcall {
  final Simba simba;
  final String name;
  private long handle; // guarded by this; 0 once freed
  private CompletableFuture<Void> stopped; // guarded by this; set by the first stop
  private CompletableFuture<Void> closing; // guarded by this; set by closeAsync
  volatile Term current;

  Contender(Simba simba, String name) {
    this.simba = simba;
    this.name = name;
  }

  /** Called once the native start succeeded. */
  final void started(long h) {
    synchronized (this) {
      handle = h;
    }
    simba.track(this);
  }

  /** The name (for a group, the group). */
  public String name() {
    return name;
  }

  /** The current term, while this node holds one. */
  public Optional<Term> term() {
    Term t = current;
    return t != null && t.isValid() ? Optional.of(t) : Optional.empty();
  }

  /** True while this node holds a valid term. */
  public boolean isLeader() {
    return term().isPresent();
  }

  /** True once stop() was called (or the client closed). */
  public synchronized boolean isStopped() {
    return stopped != null;
  }

  /**
   * Stops: revokes the term (STOPPED), waits for leader work (handover order), releases
   * the lease with its token. Completes after the last onRevoked; afterwards nothing
   * more is delivered. Calling it again returns the same stage.
   */
  public CompletionStage<Void> stop() {
    return stopFuture().minimalCompletionStage();
  }

  final CompletableFuture<Void> stopFuture() {
    CompletableFuture<Void> f;
    synchronized (this) {
      if (stopped != null) return stopped;
      f = stopped = new CompletableFuture<>();
      if (handle == 0) {
        f.complete(null);
        return f;
      }
      int rc = Native.stop(handle, -1, new Upcall() {
        @Override
        void done(int err) { // the last callback: free the handle and the listener here
          freeHandle();
          simba.untrack(Contender.this);
          f.complete(null);
        }
      });
      if (rc == 0) return f;
    }
    // already stopped (the client closed it): nothing will call the done
    freeHandle();
    simba.untrack(this);
    f.complete(null);
    return f;
  }

  /** Frees the native handle once (inside the done of its stop, or after the client closed). */
  final void freeHandle() {
    long h;
    synchronized (this) {
      h = handle;
      handle = 0;
    }
    if (h != 0) Native.free(h);
  }

  synchronized boolean hasHandle() {
    return handle != 0;
  }

  /**
   * Steps down: revokes the term (STEPPED_DOWN), releases it (after leader work exited)
   * and does not contend for {@code cooldown}, counted from now. Completes after the
   * last onRevoked of this step-down.
   *
   * @throws IllegalStateException once stopped
   */
  public CompletionStage<Void> stepDown(Duration cooldown) {
    Objects.requireNonNull(cooldown, "cooldown");
    if (cooldown.isNegative()) throw new IllegalArgumentException("cooldown is negative");
    CompletableFuture<Void> f = new CompletableFuture<>();
    synchronized (this) {
      if (stopped != null || handle == 0) throw new IllegalStateException(name + ": stopped");
      int rc = Native.stop(handle, cooldown.toMillis(), new Upcall() {
        @Override
        void done(int err) {
          if (err == 0) f.complete(null);
          else f.completeExceptionally(SimbaException.of(err, name + ": step-down failed"));
        }
      });
      if (rc != 0) throw SimbaException.of(rc, name + ": step-down refused");
    }
    return f.minimalCompletionStage();
  }

  /**
   * Closes without waiting, from anywhere: its own callbacks and leader work included
   * (simba_election_close_async, simba_task_close_async; libsimba 1.4). Stops it unless a
   * stop was asked for; the listener or work hears nothing more from the call on (a
   * callback running on another thread finishes first; onRevoked of the term this stops
   * is not delivered, a term's {@code revoked()} stage is). The returned future completes
   * exactly once, on a library thread, after the stop completed (the name released),
   * the stages of an earlier stop or step-down, every run of leader work and every other
   * callback: it is the last callback, and the native handle and listener reference are
   * freed before it. Calling it again, or after the handle was freed, returns a future
   * that completes once that close did.
   */
  public CompletableFuture<Void> closeAsync() {
    CompletableFuture<Void> f;
    synchronized (this) {
      if (closing != null) return closing;
      f = closing = new CompletableFuture<>();
      if (stopped == null) stopped = f; // stop() after this: the close is the stop
      long h = handle;
      handle = 0;
      if (h != 0) {
        int rc = Native.closeAsync(h, new Upcall() {
          @Override
          void done(int err) { // the last callback: the glue freed the handle first
            simba.untrack(Contender.this);
            f.complete(null);
          }
        });
        if (rc == 0) return f;
        handle = h; // not started (out of memory): nothing happened
        closing = null;
        if (stopped == f) stopped = null;
        f.completeExceptionally(SimbaException.of(rc, name + ": close refused"));
        return f;
      }
    }
    // freed already (by a stop's done or the client's close): nothing will call back
    f.complete(null);
    return f;
  }

  /**
   * Stops and waits for the stop (at most about one renew period when the backend is
   * unreachable). From a callback or leader work it starts the stop and returns.
   */
  public void close() {
    CompletableFuture<Void> f = stopFuture();
    if (!Callbacks.inCallback()) f.join();
  }
}
