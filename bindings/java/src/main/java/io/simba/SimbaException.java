package io.simba;

/**
 * A failure reported by libsimba: the {@link Code} and the library's detail message.
 * Bad arguments are thrown as {@link IllegalArgumentException} and calls not allowed
 * now as {@link IllegalStateException}, as Java code expects; an expired term as
 * {@link TermExpiredException}.
 */
public class SimbaException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The library's error codes (SIMBA_E*). */
  public enum Code {
    INVALID(-1), STATE(-2), EXPIRED(-3), TIMED_OUT(-4), BACKEND(-5), CLOSED(-6), NO_MEMORY(-7),
    WOULD_BLOCK(-8), BUSY(-9), UNSUPPORTED(-10), CANCELED(-11), UNKNOWN(Integer.MIN_VALUE);

    private final int value;

    Code(int value) {
      this.value = value;
    }

    /** The C value (SIMBA_E*). */
    public int value() {
      return value;
    }

    static Code of(int v) {
      for (Code c : values()) if (c.value == v) return c;
      return UNKNOWN;
    }
  }

  private final Code code;

  public SimbaException(Code code, String message) {
    super(message);
    this.code = code;
  }

  public Code code() {
    return code;
  }

  static RuntimeException of(int code, String detail) {
    Code c = Code.of(code);
    String msg = detail == null || detail.isEmpty() ? c.name().toLowerCase() : detail;
    switch (c) {
      case INVALID: return new IllegalArgumentException(msg);
      case STATE: return new IllegalStateException(msg);
      case EXPIRED: return new TermExpiredException(msg);
      default: return new SimbaException(c, msg);
    }
  }
}
