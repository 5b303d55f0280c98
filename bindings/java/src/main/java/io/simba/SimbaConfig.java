package io.simba;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.function.Consumer;

/**
 * The client's timing and callbacks: an immutable value built with {@link #builder()}
 * ({@link #toBuilder()} derives a variant). Defaults are the seed's: leaseDuration 15 s,
 * renewInterval leaseDuration / 3, drift 0.01, margin 50 ms, retryJitter renewInterval / 2,
 * minBackoff 100 ms. {@link Builder#build()} fails with an {@link IllegalArgumentException}
 * naming the rule unless renewInterval × 2 ≤ leaseDuration and
 * leaseDuration × (1 − drift) − margin &gt; renewInterval.
 */
public final class SimbaConfig {
  private final Builder b; // a private copy of what was set
  private final Duration leaseDuration, renewInterval, margin, retryJitter, minBackoff;
  private final double drift;

  private SimbaConfig(Builder b, long[] effective) {
    this.b = b;
    this.leaseDuration = Duration.ofMillis(effective[0]);
    this.renewInterval = Duration.ofMillis(effective[1]);
    this.margin = Duration.ofMillis(effective[2]);
    this.retryJitter = Duration.ofMillis(effective[3]);
    this.minBackoff = Duration.ofMillis(effective[4]);
    this.drift = effective[5] / 1e9;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The defaults. */
  public static SimbaConfig defaults() {
    return builder().build();
  }

  /** A builder holding what was set here: derived values keep following leaseDuration. */
  public Builder toBuilder() {
    return b.copy();
  }

  public Duration leaseDuration() { return leaseDuration; }
  public Duration renewInterval() { return renewInterval; }
  public double drift() { return drift; }
  public Duration margin() { return margin; }
  public Duration retryJitter() { return retryJitter; }
  public Duration minBackoff() { return minBackoff; }
  /** The callback executor, or null for the client's own daemon pool. */
  public Executor callbackExecutor() { return b.executor; }
  public String clientName() { return b.clientName == null ? "" : b.clientName; }
  /** The least level of the library's log lines sent to System.Logger "io.simba.native". */
  public System.Logger.Level logLevel() { return b.logLevel; }
  /** The keys set with {@link Builder#set}, in order. */
  public Map<String, String> settings() { return java.util.Collections.unmodifiableMap(new LinkedHashMap<>(b.raw)); }

  /** True when "callback.executor" was set: callbacks run on the library's pool or loop thread. */
  boolean usesLibraryExecutor() {
    return b.executor == null && b.raw.containsKey("callback.executor");
  }

  String[] keyValues() {
    return b.keyValues();
  }

  List<Consumer<? super SessionEvent>> sessionListeners() {
    return List.copyOf(b.sessionListeners);
  }

  @Override
  public String toString() {
    return "SimbaConfig[leaseDuration=" + leaseDuration + ", renewInterval=" + renewInterval + ", drift=" + drift
        + ", margin=" + margin + ", retryJitter=" + retryJitter + ", minBackoff=" + minBackoff + ", clientName="
        + clientName() + "]";
  }

  /** Builds a {@link SimbaConfig}; not thread-safe. */
  public static final class Builder {
    private Duration leaseDuration, renewInterval, margin, retryJitter, minBackoff;
    private Double drift;
    private Executor executor;
    private String clientName;
    private System.Logger.Level logLevel = System.Logger.Level.WARNING;
    private final List<Consumer<? super SessionEvent>> sessionListeners = new ArrayList<>();
    private final Map<String, String> raw = new LinkedHashMap<>();

    private Builder() {}

    private Builder copy() {
      Builder c = new Builder();
      c.leaseDuration = leaseDuration;
      c.renewInterval = renewInterval;
      c.margin = margin;
      c.retryJitter = retryJitter;
      c.minBackoff = minBackoff;
      c.drift = drift;
      c.executor = executor;
      c.clientName = clientName;
      c.logLevel = logLevel;
      c.sessionListeners.addAll(sessionListeners);
      c.raw.putAll(raw);
      return c;
    }

    private static Duration positive(Duration d, String what) {
      Objects.requireNonNull(d, what);
      if (d.isNegative()) throw new IllegalArgumentException(what + " must not be negative");
      return d;
    }

    /** The backend expires a session this long after its last keep-alive (15 s). */
    public Builder leaseDuration(Duration d) { leaseDuration = positive(d, "leaseDuration"); return this; }
    /** The keep-alive period (leaseDuration / 3). */
    public Builder renewInterval(Duration d) { renewInterval = positive(d, "renewInterval"); return this; }
    /** The clock rate bound, in [0, 0.5) (0.01). */
    public Builder drift(double d) { drift = d; return this; }
    /** Subtracted from every deadline (50 ms). */
    public Builder margin(Duration d) { margin = positive(d, "margin"); return this; }
    /** Candidates retry after renewInterval / 2 + random [0, retryJitter) (renewInterval / 2). */
    public Builder retryJitter(Duration d) { retryJitter = positive(d, "retryJitter"); return this; }
    /** The least backoff after a failed keep-alive (100 ms). */
    public Builder minBackoff(Duration d) { minBackoff = positive(d, "minBackoff"); return this; }
    /** Where callbacks run (default: a daemon pool of the client). Rejecting an onElected steps down for one lease. */
    public Builder callbackExecutor(Executor e) { executor = e; return this; }
    /** Shown in snapshots and in the backend's status. */
    public Builder clientName(String n) { clientName = n; return this; }
    /** The least level of library log lines (WARNING); null or OFF logs nothing. */
    public Builder logLevel(System.Logger.Level l) { logLevel = l; return this; }

    /**
     * Sets a library key as text (simba_config_set), applied after the typed setters:
     * e.g. "callback.threads", or "callback.executor" = "pool" / "direct" to run callbacks
     * on the library's own threads instead of a Java executor (callbackExecutor wins if
     * set). Checked by {@link #build()}: an unknown key or a bad value is an
     * IllegalArgumentException naming it; a NUL inside either too. "loop.mode" =
     * "external" is refused: the Java binding drives no host loop (README).
     */
    public Builder set(String key, String value) {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(value, "value");
      if (key.equals("loop.mode") && value.trim().equalsIgnoreCase("external")) {
        throw new IllegalArgumentException("loop.mode=external is not supported by the Java binding");
      }
      raw.remove(key);
      raw.put(key, value);
      return this;
    }

    /**
     * Receives every session event from the first (SessionOpened) on; same as
     * {@link Simba#onSessionEvent}, which misses the events before its call.
     */
    public Builder onSessionEvent(Consumer<? super SessionEvent> listener) {
      sessionListeners.add(Objects.requireNonNull(listener, "listener"));
      return this;
    }

    String[] keyValues() {
      List<String> kv = new ArrayList<>();
      put(kv, "session.lease-duration", leaseDuration);
      put(kv, "session.renew-interval", renewInterval);
      put(kv, "session.margin", margin);
      put(kv, "session.retry-jitter", retryJitter);
      put(kv, "session.min-backoff", minBackoff);
      if (drift != null) {
        kv.add("session.drift");
        kv.add(Double.toString(drift));
      }
      if (clientName != null) {
        kv.add("client.name");
        kv.add(clientName);
      }
      for (Map.Entry<String, String> e : raw.entrySet()) {
        kv.add(e.getKey());
        kv.add(e.getValue());
      }
      return kv.toArray(new String[0]);
    }

    private static void put(List<String> kv, String key, Duration d) {
      if (d == null) return;
      kv.add(key);
      kv.add(d.toMillis() + "ms");
    }

    /**
     * Validates and builds.
     *
     * @throws IllegalArgumentException naming the rule that failed
     */
    public SimbaConfig build() {
      Builder snapshot = copy();
      return new SimbaConfig(snapshot, Native.configResolve(snapshot.keyValues()));
    }
  }
}
