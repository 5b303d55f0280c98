package io.simba;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Consumer;
import java.util.function.LongUnaryOperator;

/**
 * A Simba client: one session on one backend, kept alive in the background, through
 * which this process leases names (elections, leader work, partition groups, locks).
 * Open one per process and close it on shutdown: close() revokes every term (STOPPED),
 * closes the session (the backend frees every lease at once) and returns when no
 * callback runs any more. Thread-safe.
 *
 * <pre>{@code
 * try (Simba simba = Simba.open("redis://127.0.0.1:6379")) {
 *   simba.election("ledger").runWhileLeader(term -> {
 *     for (Batch batch : batches) {
 *       term.ensureValid(Duration.ofSeconds(2));
 *       ledger.settle(batch, term.token());
 *     }
 *   });
 * }
 * }</pre>
 */
public final class Simba implements AutoCloseable {
  static {
    Native.load();
  }

  private static final AtomicInteger POOLS = new AtomicInteger();

  private final String url;
  private final SimbaConfig config;
  private final ExecutorService ownPool; // null with a host executor
  private final ReentrantReadWriteLock rw = new ReentrantReadWriteLock();
  private long handle; // guarded by rw; 0 once closed
  private boolean closing; // guarded by this
  private final CompletableFuture<Void> closed = new CompletableFuture<>();
  private final Set<Contender> contenders = ConcurrentHashMap.newKeySet();
  private final Set<Observer> observers = ConcurrentHashMap.newKeySet();
  private final List<Consumer<? super SessionEvent>> eventListeners = new CopyOnWriteArrayList<>();

  private Simba(String url, SimbaConfig config) {
    this.url = url;
    this.config = config;
    Executor ex = config.callbackExecutor();
    if (ex == null && !config.usesLibraryExecutor()) {
      int pool = POOLS.incrementAndGet();
      AtomicInteger n = new AtomicInteger();
      ThreadFactory tf = r -> {
        Thread t = new Thread(r, "simba-callback-" + pool + "-" + n.incrementAndGet());
        t.setDaemon(true);
        return t;
      };
      ownPool = Executors.newCachedThreadPool(tf);
      ex = ownPool;
    } else {
      ownPool = null;
    }
    System.Logger.Level ll = config.logLevel();
    int level = ll == null || ll == System.Logger.Level.OFF ? -1
        : ll.getSeverity() >= System.Logger.Level.ERROR.getSeverity() ? 3
        : ll.getSeverity() >= System.Logger.Level.WARNING.getSeverity() ? 2
        : ll.getSeverity() >= System.Logger.Level.INFO.getSeverity() ? 1 : 0;
    eventListeners.addAll(config.sessionListeners());
    Upcall sink = new Upcall() {
      @Override
      void event(int type, String json) {
        SessionEvent e = SessionEvent.of(type, json);
        if (e == null) return;
        for (Consumer<? super SessionEvent> l : eventListeners) {
          try {
            l.accept(e);
          } catch (Throwable t) {
            Callbacks.report("session event listener", t);
          }
        }
      }
    };
    handle = Native.clientOpen(url, config.keyValues(), ex, sink,
        level < 0 ? null : System.getLogger("io.simba.native"), Math.max(level, 0));
  }

  /** Opens a client with the default configuration. */
  public static Simba open(String backendUrl) {
    return open(backendUrl, SimbaConfig.defaults());
  }

  /**
   * Opens a client; returns at once, the session opens in the background.
   * URLs: {@code memory://NAME}, {@code redis://[user:pass@]host:port[/db][?prefix=simba]},
   * {@code postgresql://...}, {@code zookeeper://host:port[,...]/chroot}.
   *
   * @throws IllegalArgumentException for a malformed URL
   * @throws SimbaException with {@link SimbaException.Code#UNSUPPORTED} for a scheme not built in
   */
  public static Simba open(String backendUrl, SimbaConfig config) {
    Objects.requireNonNull(backendUrl, "backendUrl");
    Objects.requireNonNull(config, "config");
    return new Simba(backendUrl, config);
  }

  /** The library's version, "major.minor.patch". */
  public static String version() {
    return Native.version();
  }

  /** The library's version as (major &lt;&lt; 16) | (minor &lt;&lt; 8) | patch (simba_version). */
  public static int versionNumber() {
    return Native.versionNumber();
  }

  /**
   * Checks a lease name with the library's rule (simba_lease_name_check): 1-128 characters
   * of {@code [A-Za-z0-9._:-]}, other than "." and "..".
   *
   * @throws IllegalArgumentException naming the rule and the first offending character
   *     (a NUL inside included: "lease name has a NUL byte at index N ...")
   */
  public static void checkLeaseName(String name) {
    Native.leaseNameCheck(name);
  }

  /**
   * The DDL the backend of {@code backendUrl} installs, for a DBA to apply by hand
   * (simba_backend_schema): PostgreSQL only; nothing connects.
   *
   * @throws SimbaException UNSUPPORTED for a backend without a schema
   */
  public static String backendSchema(String backendUrl) {
    return Native.backendSchema(backendUrl);
  }

  public SimbaConfig config() {
    return config;
  }

  /** Runs a native call on the live handle; the close frees it only after the call returned. */
  long withHandle(LongUnaryOperator call) {
    rw.readLock().lock();
    try {
      if (handle == 0) throw new SimbaException(SimbaException.Code.CLOSED, "client closed: " + url);
      return call.applyAsLong(handle);
    } finally {
      rw.readLock().unlock();
    }
  }

  void track(Contender c) {
    contenders.add(c);
  }

  void untrack(Contender c) {
    contenders.remove(c);
  }

  void untrack(Observer o) {
    observers.remove(o);
  }

  /** The election of {@code name}: a handle to start contending, run leader work or lock. */
  public Election election(String name) {
    return new Election(this, name);
  }

  /**
   * Joins the partition group {@code group}: partitions {@code group.0 .. group.N-1}
   * are spread over the members, and {@code work} runs for each one this member leads.
   */
  public GroupTask group(String group, int partitions, LeaderWork work) {
    Objects.requireNonNull(group, "group");
    Objects.requireNonNull(work, "work");
    if (partitions <= 0) throw new IllegalArgumentException("partitions must be positive");
    GroupTask g = new GroupTask(this, group, partitions, work);
    g.started(withHandle(h -> Native.start(Native.GROUP, h, group, partitions, 0, g)));
    return g;
  }

  /**
   * Follows who holds {@code name} without contending for it (simba_observe_start):
   * {@code listener} gets the state now, then every change, on the callback executor.
   *
   * @param poll how often to read the backend besides release broadcasts;
   *     {@link Duration#ZERO} for the renew interval, else at least 10 ms
   */
  public Observer observe(String name, Duration poll, Consumer<? super Observer.Holder> listener) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(listener, "listener");
    Observer o = new Observer(this, name, listener);
    synchronized (o) { // a close() from its first call waits for the handle
      o.started(withHandle(h -> Native.start(Native.OBSERVE, h, name, poll.toMillis(), 0, o)));
      observers.add(o);
    }
    return o;
  }

  /**
   * The client's metrics in the Prometheus text format (simba_client_metrics_text):
   * acquires, terms, releases, revocations by reason, keep-alives, session state...
   * Never blocks on the backend.
   */
  public String metricsText() {
    return text(Native.TEXT_METRICS);
  }

  private String text(int kind) {
    String[] text = new String[1];
    withHandle(h -> {
      text[0] = Native.clientText(h, kind);
      return 0L;
    });
    return text[0];
  }

  /*
   * Locks follow one rule: a timeout is an empty Optional (lock with a timeout, tryLock,
   * and the future of lockAsync), a lease held elsewhere is an empty Optional for tryLock,
   * and every other failure is an exception.
   */

  /**
   * Acquires the lock {@code name}, waiting without bound (FIFO behind other locks of
   * this client on the name).
   *
   * @throws SimbaException CLOSED if the client closes meanwhile, WOULD_BLOCK from a callback
   */
  public LockTerm lock(String name) {
    return acquire(name, -1, false).orElseThrow(() -> new SimbaException(SimbaException.Code.TIMED_OUT, name));
  }

  /** Acquires the lock {@code name}, waiting up to {@code timeout}; empty when it passed. */
  public Optional<LockTerm> lock(String name, Duration timeout) {
    return acquire(name, Math.max(0, timeout.toMillis()), false);
  }

  /**
   * One attempt: the lock if nobody holds it (waits at most one renew period for the
   * session and the backend's answer); empty when it is held, here or elsewhere, or when
   * that period passed without an answer.
   */
  public Optional<LockTerm> tryLock(String name) {
    return acquire(name, 0, true);
  }

  private Optional<LockTerm> acquire(String name, long ms, boolean tryOnly) {
    Objects.requireNonNull(name, "name");
    long t = withHandle(h -> Native.lockAcquire(h, name, ms, tryOnly));
    return t == 0 ? Optional.empty() : Optional.of(new LockTerm(t, name));
  }

  /**
   * Acquires without blocking a thread: completes on the callback executor with the
   * lock, with an empty Optional when {@code timeout} passed (null: no timeout), or
   * exceptionally with SimbaException CANCELED if the client closed.
   */
  public CompletionStage<Optional<LockTerm>> lockAsync(String name, Duration timeout) {
    return acquireAsync(name, timeout, TermKind.LOCK, (h, ms, up) -> Native.lockAcquireAsync(h, name, ms, up));
  }

  /** Starts an X_acquire_async with the handle, the wait in ms and the upcall. */
  private interface AsyncStart {
    void start(long h, long ms, Upcall up);
  }

  private CompletionStage<Optional<LockTerm>> acquireAsync(String name, Duration timeout, TermKind kind,
      AsyncStart start) {
    Objects.requireNonNull(name, "name");
    CompletableFuture<Optional<LockTerm>> f = new CompletableFuture<>();
    long ms = timeout == null ? -1 : Math.max(0, timeout.toMillis());
    withHandle(h -> {
      start.start(h, ms, new Upcall() {
        @Override
        void locked(int err, long term) {
          if (err == SimbaException.Code.TIMED_OUT.value()) {
            f.complete(Optional.empty());
          } else if (err != 0) {
            f.completeExceptionally(SimbaException.of(err, name + ": " + SimbaException.Code.of(err).description()));
          } else {
            LockTerm lt = new LockTerm(term, name, kind);
            if (!f.complete(Optional.of(lt))) lt.close();
          }
        }

        @Override
        void refused(int err, String detail) {
          f.completeExceptionally(SimbaException.of(err, detail));
        }
      });
      return 0L;
    });
    return f;
  }

  /*
   * Semaphores and read/write locks (libsimba 1.5) follow the rule of locks: a timeout
   * is an empty Optional, a try that finds no room is an empty Optional, every other
   * failure is an exception. Each permit is a LockTerm (close() releases it; kind() says
   * SEMAPHORE, READ or WRITE). Semaphores, read/write locks and locks are separate
   * namespaces; permits of a name are granted side by side, in no order (no FIFO).
   */

  /**
   * Acquires a permit of semaphore {@code name} of size {@code permits} (&gt;= 1), waiting
   * without bound. The first holder fixes the size while the name has holders; this
   * client's own permits count against it.
   *
   * @throws IllegalStateException when the semaphore has another size (the message says
   *     which)
   * @throws IllegalArgumentException for a size below 1
   * @throws SimbaException CLOSED if the client closes meanwhile, WOULD_BLOCK from a callback
   */
  public LockTerm acquireSemaphore(String name, int permits) {
    return acquireSemaphore(name, permits, -1).orElseThrow(
        () -> new SimbaException(SimbaException.Code.TIMED_OUT, name));
  }

  /** Acquires a permit of semaphore {@code name}, waiting up to {@code timeout}; empty when it passed. */
  public Optional<LockTerm> acquireSemaphore(String name, int permits, Duration timeout) {
    return acquireSemaphore(name, permits, Math.max(0, timeout.toMillis()));
  }

  /** One attempt at a permit: empty when every permit is held (or no answer came in a renew period). */
  public Optional<LockTerm> tryAcquireSemaphore(String name, int permits) {
    return permit(TermKind.SEMAPHORE, name, size(permits), 0, true);
  }

  /**
   * Acquires a permit without blocking a thread: completes on the callback executor with
   * the permit, an empty Optional when {@code timeout} passed (null: no timeout), or
   * exceptionally with IllegalStateException (another size, the library's detail in the
   * message) or SimbaException CANCELED (client closed).
   */
  public CompletionStage<Optional<LockTerm>> acquireSemaphoreAsync(String name, int permits, Duration timeout) {
    int n = size(permits);
    return acquireAsync(name, timeout, TermKind.SEMAPHORE,
        (h, ms, up) -> Native.permitAcquireAsync(h, TermKind.SEMAPHORE.code(), name, n, ms, up));
  }

  private Optional<LockTerm> acquireSemaphore(String name, int permits, long ms) {
    return permit(TermKind.SEMAPHORE, name, size(permits), ms, false);
  }

  /** A semaphore's size as C's uint32_t, which a negative int would wrap into. */
  private static int size(int permits) {
    if (permits < 1) {
      throw new IllegalArgumentException("permits must be >= 1, not " + permits);
    }
    return permits;
  }

  /**
   * Acquires read/write lock {@code name} in {@code mode}, waiting without bound. Readers
   * share the name; a writer excludes everyone, this client's own readers included (no
   * upgrade), and while it waits its intent holds new readers back. A read's token is the
   * name's write epoch.
   *
   * @throws SimbaException CLOSED if the client closes meanwhile, WOULD_BLOCK from a callback
   */
  public LockTerm rwLock(String name, LockMode mode) {
    return permit(mode.kind(), name, mode.code(), -1, false).orElseThrow(
        () -> new SimbaException(SimbaException.Code.TIMED_OUT, name));
  }

  /** Acquires read/write lock {@code name} in {@code mode}, waiting up to {@code timeout}; empty when it passed. */
  public Optional<LockTerm> rwLock(String name, LockMode mode, Duration timeout) {
    return permit(mode.kind(), name, mode.code(), Math.max(0, timeout.toMillis()), false);
  }

  /**
   * One attempt: empty when a read finds a writer (or a live writer's intent) or a write
   * finds anyone; a try-write leaves no intent.
   */
  public Optional<LockTerm> tryRwLock(String name, LockMode mode) {
    return permit(mode.kind(), name, mode.code(), 0, true);
  }

  /**
   * Acquires without blocking a thread: completes on the callback executor with the term,
   * an empty Optional when {@code timeout} passed (null: no timeout), or exceptionally with
   * SimbaException CANCELED (client closed).
   */
  public CompletionStage<Optional<LockTerm>> rwLockAsync(String name, LockMode mode, Duration timeout) {
    Objects.requireNonNull(mode, "mode");
    return acquireAsync(name, timeout, mode.kind(),
        (h, ms, up) -> Native.permitAcquireAsync(h, mode.kind().code(), name, mode.code(), ms, up));
  }

  private Optional<LockTerm> permit(TermKind kind, String name, int arg, long ms, boolean tryOnly) {
    Objects.requireNonNull(name, "name");
    long t = withHandle(h -> Native.permitAcquire(h, kind.code(), name, arg, ms, tryOnly));
    return t == 0 ? Optional.empty() : Optional.of(new LockTerm(t, name, kind));
  }

  /** The session's status now; never blocks. */
  public SessionStatus status() {
    rw.readLock().lock();
    try {
      return handle == 0 ? SessionStatus.CLOSED : SessionStatus.of(Native.clientStatus(handle));
    } finally {
      rw.readLock().unlock();
    }
  }

  /** Waits until the session is LIVE; false when the timeout passed first. */
  public boolean awaitLive(Duration timeout) {
    return withHandle(h -> Native.clientWaitLive(h, timeout.toMillis()) ? 1L : 0L) == 1L;
  }

  /** A snapshot of the session, elections, locks and counters; never blocks on the backend. */
  public Snapshot snapshot() {
    return new Snapshot(text(Native.TEXT_SNAPSHOT));
  }

  /**
   * What the backend holds, for operators: one read outside the session, as JSON
   * ("backend", "sessions", "leases"). {@code names} empty: every lease.
   */
  public String inspect(Duration timeout, String... names) {
    String[] json = new String[1];
    withHandle(h -> {
      json[0] = Native.clientInspect(h, names, timeout.toMillis());
      return 0L;
    });
    return json[0];
  }

  /**
   * Receives session events (SessionOpened, SessionLeaseShortened, ...), in order, on
   * the callback executor. Close the returned handle to stop receiving.
   */
  public AutoCloseable onSessionEvent(Consumer<? super SessionEvent> listener) {
    Objects.requireNonNull(listener, "listener");
    eventListeners.add(listener);
    return () -> eventListeners.remove(listener);
  }

  /** Completes once the client closed (after its last callback). */
  public CompletionStage<Void> closed() {
    return closed.minimalCompletionStage();
  }

  /**
   * Closes: stops every election and task (handover order), revokes every lock term,
   * closes the session and waits until no callback runs. From a callback or leader work
   * it starts the close and returns. Calling it again waits for the same close.
   */
  @Override
  public void close() {
    boolean first;
    synchronized (this) {
      first = !closing;
      closing = true;
    }
    if (first) {
      for (Contender c : new ArrayList<>(contenders)) {
        try {
          c.stopFuture();
        } catch (RuntimeException e) {
          Callbacks.report("stop of " + c.name, e);
        }
      }
      long h;
      rw.readLock().lock();
      try {
        h = handle;
      } finally {
        rw.readLock().unlock();
      }
      Native.clientCloseAsync(h, new Upcall() {
        @Override
        void done(int err) { // the client's last callback: no call may use the handle after it
          rw.writeLock().lock();
          try {
            handle = 0;
          } finally {
            rw.writeLock().unlock();
          }
          closed.complete(null);
        }
      });
    }
    if (Callbacks.inCallback()) return;
    closed.join();
    for (Contender c : new ArrayList<>(contenders)) { // stopped by the close without their done
      c.freeHandle();
      contenders.remove(c);
    }
    for (Observer o : new ArrayList<>(observers)) o.close();
    if (ownPool != null) ownPool.shutdown();
  }

  @Override
  public String toString() {
    return "Simba[" + url + ", " + status() + "]";
  }
}
