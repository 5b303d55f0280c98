package io.simba;

/** Why a term ended. */
public enum RevokeReason {
  /** The election was stopped, the lock released, or the client closed. */
  STOPPED,
  /** The election stepped down. */
  STEPPED_DOWN,
  /** The session's local deadline passed without a successful keep-alive. */
  DEADLINE_PASSED,
  /** The backend reported the session expired. */
  SESSION_EXPIRED,
  /** A keep-alive reply no longer lists the lease as owned by this session. */
  TAKEN_OVER;

  /** From the C value; null for SIMBA_REVOKE_NONE. */
  static RevokeReason of(int v) {
    return v >= 1 && v <= 5 ? values()[v - 1] : null;
  }
}
