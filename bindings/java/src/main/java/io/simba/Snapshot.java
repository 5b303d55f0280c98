package io.simba;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** What the client sees now ({@link Simba#snapshot()}): session, elections and locks, counters. */
public final class Snapshot {
  /** One election or lock of the client. */
  public record Lease(String name, boolean lock, String state, long token, Duration remaining) {}

  private final String json;
  private final String clientName;
  private final String backend;
  private final String sessionId;
  private final SessionStatus status;
  private final Duration remaining;
  private final Duration renewPeriod;
  private final boolean leaseShortened;
  private final List<Lease> leases;
  private final Map<String, Long> counters;

  @SuppressWarnings("unchecked")
  Snapshot(String json) {
    this.json = json;
    Map<String, Object> m = (Map<String, Object>) Json.parse(json);
    Map<String, Object> s = (Map<String, Object>) m.get("session");
    clientName = (String) m.get("client");
    backend = (String) m.get("backend");
    sessionId = (String) s.get("id");
    status = SessionStatus.parse((String) s.get("status"));
    remaining = Duration.ofMillis(num(s.get("remaining_ms")));
    renewPeriod = Duration.ofMillis(num(s.get("renew_period_ms")));
    leaseShortened = Boolean.TRUE.equals(s.get("lease_shortened"));
    List<Lease> l = new ArrayList<>();
    for (Object o : (List<Object>) m.get("elections")) {
      Map<String, Object> e = (Map<String, Object>) o;
      l.add(new Lease((String) e.get("name"), "lock".equals(e.get("kind")), (String) e.get("state"),
          num(e.get("token")), Duration.ofMillis(num(e.get("remaining_ms")))));
    }
    leases = Collections.unmodifiableList(l);
    Map<String, Long> c = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : ((Map<String, Object>) m.get("counters")).entrySet()) {
      c.put(e.getKey(), num(e.getValue()));
    }
    counters = Collections.unmodifiableMap(c);
  }

  private static long num(Object o) {
    return o instanceof Number ? ((Number) o).longValue() : 0;
  }

  /** The session id ("" while opening). */
  public String sessionId() { return sessionId; }
  public SessionStatus status() { return status; }
  /** Time left before the session's local deadline. */
  public Duration remaining() { return remaining; }
  public Duration renewPeriod() { return renewPeriod; }
  /** True once the backend granted less than leaseDuration in this session. */
  public boolean leaseShortened() { return leaseShortened; }
  public String clientName() { return clientName; }
  /** The backend URL, password hidden. */
  public String backend() { return backend; }
  /** Every election and lock of the client. */
  public List<Lease> leases() { return leases; }
  /** sessions_opened, keep_alives, acquires, releases, terms. */
  public Map<String, Long> counters() { return counters; }
  /** The library's JSON. */
  public String json() { return json; }

  @Override
  public String toString() {
    return json;
  }
}
