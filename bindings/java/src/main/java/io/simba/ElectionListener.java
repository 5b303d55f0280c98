package io.simba;

/**
 * Receives an election's terms. Callbacks run one at a time, in order, on the
 * client's callback executor; every onElected is followed by exactly one onRevoked
 * for the same term. Exceptions thrown here are logged, never propagated.
 */
public interface ElectionListener {
  void onElected(Term term);

  default void onRevoked(Term term, RevokeReason reason) {}
}
