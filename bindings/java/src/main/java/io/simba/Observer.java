package io.simba;

import java.util.Optional;
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
   * from a callback it stops the next calls and frees the handle on a thread of its own
   * (a call running elsewhere cannot be waited for there). Later calls do nothing.
   */
  @Override
  public void close() {
    long h;
    synchronized (this) {
      h = handle;
      handle = 0;
    }
    if (h == 0) return;
    simba.untrack(this);
    if (!Callbacks.inCallback()) {
      Native.free(h);
      return;
    }
    Thread t = new Thread(() -> Native.free(h), "simba-observer-free");
    t.setDaemon(true);
    t.start();
  }
}
