package io.simba;

/**
 * Work run while this node leads a name, on a thread of its own. It should call
 * {@link Term#ensureValid(java.time.Duration)} before each step, pass
 * {@link Term#token()} with each write, and return soon after the term is revoked:
 * revocation interrupts the thread. Returning while the term is valid steps down
 * (the task contends again). An exception is logged and counts as a return.
 */
@FunctionalInterface
public interface LeaderWork {
  void run(Term term) throws Exception;
}
