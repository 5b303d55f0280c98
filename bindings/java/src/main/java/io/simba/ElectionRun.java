package io.simba;

/** A started election with a listener. Internal: {@link Election} is the API. */
final class ElectionRun extends Contender {
  private final ElectionListener listener;

  ElectionRun(Simba simba, String name, ElectionListener listener) {
    super(simba, name);
    this.listener = listener;
  }

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
}
