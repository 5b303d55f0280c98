package io.simba;

/** Thrown by {@link Term#ensureValid}: the term is not valid, or not for long enough. */
public class TermExpiredException extends SimbaException {
  private static final long serialVersionUID = 1L;

  public TermExpiredException(String message) {
    super(Code.EXPIRED, message);
  }
}
