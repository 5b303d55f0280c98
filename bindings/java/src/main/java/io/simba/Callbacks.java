package io.simba;

/** Marks threads running library callbacks or leader work, where blocking calls must not wait. */
final class Callbacks {
  private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);
  static final System.Logger LOG = System.getLogger("io.simba");

  private Callbacks() {}

  static void enter() {
    DEPTH.get()[0]++;
  }

  static void exit() {
    DEPTH.get()[0]--;
  }

  /** Library threads (attached by the glue) only ever run callbacks and leader work. */
  static void markLibraryThread() {
    DEPTH.get()[0] = 1 << 20;
  }

  /** True on a thread that runs a callback of the library or leader work. */
  static boolean inCallback() {
    return DEPTH.get()[0] > 0;
  }

  /** A user callback threw: nothing may unwind into the library, so it is logged. */
  static void report(String what, Throwable t) {
    LOG.log(System.Logger.Level.ERROR, "simba: " + what + " threw", t);
  }
}
