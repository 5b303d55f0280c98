package io.simba;

/**
 * A failure reported by libsimba: the {@link Code} and the library's detail message.
 * Bad arguments are thrown as {@link IllegalArgumentException} and calls not allowed
 * now as {@link IllegalStateException}, as Java code expects; an expired term as
 * {@link TermExpiredException}.
 */
public class SimbaException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * The library's error codes (SIMBA_E*). {@link #toString()} is the library's name
   * ("EBUSY", simba_code_name); a code a newer library adds reads as {@link #UNKNOWN}
   * and {@link SimbaException#rawCode()} keeps its number.
   */
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

    /** The library's name: "EINVAL", "EBUSY", ...; "UNKNOWN" for UNKNOWN. */
    @Override
    public String toString() {
      return this == UNKNOWN ? "UNKNOWN" : Native.name(Native.NAME_CODE, value);
    }

    /** The library's text of the code (simba_strerror). */
    public String description() {
      return Native.name(Native.NAME_STRERROR, value);
    }

    /** From the C value; UNKNOWN for a value not listed here. */
    public static Code of(int v) {
      for (Code c : values()) if (c.value == v) return c;
      return UNKNOWN;
    }
  }

  private final Code code;
  private final int rawCode;

  public SimbaException(Code code, String message) {
    this(code, code.value(), message);
  }

  SimbaException(Code code, int rawCode, String message) {
    super(message);
    this.code = code;
    this.rawCode = rawCode;
  }

  public Code code() {
    return code;
  }

  /** The library's number of the code, also for one this binding does not know. */
  public int rawCode() {
    return rawCode;
  }

  /** The library's name of the code ("EBUSY"; "UNKNOWN(-42)" when the library does not name it either). */
  public String codeName() {
    String n = Native.name(Native.NAME_CODE, rawCode);
    return n.equals("UNKNOWN") ? "UNKNOWN(" + rawCode + ")" : n;
  }

  static RuntimeException of(int code, String detail) {
    Code c = Code.of(code);
    String msg = detail == null || detail.isEmpty() ? Native.name(Native.NAME_STRERROR, code) : detail;
    switch (c) {
      case INVALID: return new IllegalArgumentException(msg);
      case STATE: return new IllegalStateException(msg);
      case EXPIRED: return new TermExpiredException(msg);
      default: return new SimbaException(c, code, msg);
    }
  }
}
