package io.simba;

import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Follows who holds a lease name without contending for it ({@link Simba#observe}):
 * the listener gets the state at the start, then every change (another holder, another
 * token, free), one call at a time, in order, on the callback executor. Changes show
 * within one release broadcast or one poll. {@link #close()} stops it; outside
 * callbacks it returns once no call of the listener runs.
 */
public final class Observer extends Upcall implements AutoCloseable {
  /**
   * The holder of a name at one moment: {@code session} is the holding session's id and
   * {@code client} its client name (each null when the name is free; the client also when
   * unknown); {@code token} the holder's fencing token (when free, the last one granted,
   * 0 if never).
   */
  public record Holder(String name, String session, String client, long token) {
    /** True when nobody holds the name. */
    public boolean isFree() {
      return session == null;
    }
  }

  private final Simba simba;
  private final String name;
  private final Consumer<? super Holder> listener;
  private long handle; // guarded by this; 0 once freed
  private CompletableFuture<Void> closing; // guarded by this; set by closeAsync
  private volatile Holder last;

  Observer(Simba simba, String name, Consumer<? super Holder> listener) {
    this.simba = simba;
    this.name = name;
    this.listener = listener;
  }

  synchronized void started(long h) {
    handle = h;
  }

  @Override
  void observed(String n, String session, String client, long token) {
    Holder h = new Holder(n, session, client, token);
    last = h;
    try {
      listener.accept(h);
    } catch (Throwable t) {
      Callbacks.report("observer of " + name, t);
    }
  }

  /** The observed name. */
  public String name() {
    return name;
  }

  /** The last state delivered, if any. */
  public Optional<Holder> last() {
    return Optional.ofNullable(last);
  }

  /**
   * Stops observing. Outside callbacks it returns when no call of the listener runs;
   * from a callback it is {@link #closeAsync()}: it stops the next calls and the handle
   * is freed once a call running elsewhere returned. Later calls do nothing.
   */
  @Override
  public void close() {
    if (Callbacks.inCallback()) {
      closeAsync();
      return;
    }
    long h;
    synchronized (this) {
      h = handle;
      handle = 0;
    }
    if (h == 0) return;
    simba.untrack(this);
    Native.free(h);
  }

  /**
   * Stops observing without waiting, from anywhere, the listener included
   * (simba_observer_close_async; libsimba 1.4): no call of the listener starts after this
   * returns. The future completes exactly once, on a library thread, after a call running
   * elsewhere returned: the listener's reference and the handle are freed before it.
   * Calling it again, or after {@link #close()}, returns a future that completes once
   * that close did.
   */
  public CompletableFuture<Void> closeAsync() {
    CompletableFuture<Void> f;
    synchronized (this) {
      if (closing != null) return closing;
      f = closing = new CompletableFuture<>();
      long h = handle;
      handle = 0;
      if (h != 0) {
        int rc = Native.closeAsync(h, new Upcall() {
          @Override
          void done(int err) {
            simba.untrack(Observer.this);
            f.complete(null);
          }
        });
        if (rc == 0) return f;
        handle = h; // not started (out of memory): nothing happened
        closing = null;
        f.completeExceptionally(SimbaException.of(rc, name + ": close refused"));
        return f;
      }
    }
    f.complete(null); // closed already, and close() returned after its wait
    return f;
  }
}
