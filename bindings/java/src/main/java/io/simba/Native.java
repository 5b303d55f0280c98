package io.simba;

import java.util.concurrent.Executor;

/** The JNI entry points (src/main/c/simba_jni.c). Internal: not part of the API. */
final class Native {
  private Native() {}

  /**
   * The least libsimba this binding runs on: 1.5 (the glue links the semaphore and
   * read/write lock calls, version node SIMBA_1.5; 1.4: the X_close_async of every handle;
   * 1.3: simba_code_name, simba_lease_name_check, ...).
   */
  static final int MIN_VERSION = 0x010500;

  /**
   * Loads libsimba_jni: from the path in system property {@code simba.jni.library}, else from
   * the jar (io/simba/native/linux-x86_64/, in simba-linux-x86_64.jar), else from
   * java.library.path (Debian's libsimba-java: /usr/lib/x86_64-linux-gnu/jni).
   */
  static void load() {
    Holder.init();
  }

  private static final class Holder {
    static {
      String path = System.getProperty("simba.jni.library");
      if (path != null && !path.isEmpty()) {
        System.load(new java.io.File(path).getAbsolutePath());
      } else if (!loadFromJar()) {
        System.loadLibrary("simba_jni");
      }
      if (versionNumber() < MIN_VERSION) {
        throw new UnsatisfiedLinkError("io.simba needs libsimba >= 1.5 (permits, the close of every"
            + " handle, the names of its values, the lease-name check), loaded " + version());
      }
    }

    static void init() {}

    /** The copy in the jar for this platform, extracted to a temporary file; false if none loads. */
    private static boolean loadFromJar() {
      String arch = System.getProperty("os.arch", "");
      if (!System.getProperty("os.name", "").startsWith("Linux")
          || !(arch.equals("amd64") || arch.equals("x86_64"))) {
        return false;
      }
      try (java.io.InputStream in =
          Native.class.getResourceAsStream("/io/simba/native/linux-x86_64/libsimba_jni.so")) {
        if (in == null) {
          return false;
        }
        java.nio.file.Path tmp = java.nio.file.Files.createTempFile("libsimba_jni", ".so");
        tmp.toFile().deleteOnExit();
        java.nio.file.Files.copy(in, tmp, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        System.load(tmp.toAbsolutePath().toString());
        return true;
      } catch (java.io.IOException | UnsatisfiedLinkError e) {
        // e.g. no libsimba.so.1 on the system: java.library.path may still have one.
        return false;
      }
    }
  }

  static {
    load();
  }

  // ---- upcalls from C (names and signatures are looked up in JNI_OnLoad)

  /** The exception for a SIMBA_E* code and its detail. */
  static Throwable error(int code, String detail) {
    return SimbaException.of(code, detail);
  }

  /** The host executor's submit(): 0 accepted, 1 rejected (the library's rejection rule applies). */
  static int submit(Object executor, long run, long arg) {
    try {
      ((Executor) executor).execute(new NativeTask(run, arg));
      return 0;
    } catch (Throwable t) { // RejectedExecutionException, or any other refusal
      return 1;
    }
  }

  /** A library thread was attached: everything it runs is a callback or leader work. */
  static void attached() {
    Callbacks.markLibraryThread();
  }

  /** The client's log sink, on the loop thread: must not block. */
  static void log(Object logger, int level, String msg) {
    System.Logger.Level l;
    switch (level) {
      case 0: l = System.Logger.Level.DEBUG; break;
      case 1: l = System.Logger.Level.INFO; break;
      case 2: l = System.Logger.Level.WARNING; break;
      default: l = System.Logger.Level.ERROR; break;
    }
    ((System.Logger) logger).log(l, msg);
  }

  /** A library task handed to the Java executor: runs it once, marked as a callback thread. */
  static final class NativeTask implements Runnable {
    private final long run;
    private final long arg;

    NativeTask(long run, long arg) {
      this.run = run;
      this.arg = arg;
    }

    @Override
    public void run() {
      Callbacks.enter();
      try {
        runTask(run, arg);
      } finally {
        Callbacks.exit();
      }
    }
  }

  // ---- downcalls

  static native String version();
  static native int versionNumber();
  static final int NAME_CODE = 0;
  static final int NAME_SESSION_STATUS = 1;
  static final int NAME_EVENT = 2;
  static final int NAME_REVOKE_REASON = 3;
  static final int NAME_STRERROR = 4;
  static final int NAME_TERM_KIND = 5;
  /** The library's name of a value (simba_code_name, ...; simba_strerror for NAME_STRERROR). */
  static native String name(int kind, int value);
  static native void leaseNameCheck(String name);
  static native String backendSchema(String url);
  static native void runTask(long run, long arg);
  static native long[] configResolve(String[] kv);

  static native long clientOpen(String url, String[] kv, Object executor, Object sink, Object logger, int level);
  static native void clientCloseAsync(long h, Object done);
  static native int clientStatus(long h);
  static native boolean clientWaitLive(long h, long ms);
  static final int TEXT_SNAPSHOT = 0;
  static final int TEXT_METRICS = 1;
  static native String clientText(long h, int kind);
  static native String clientInspect(long h, String[] names, long ms);

  // One handle type for elections, tasks and observers (kinds as in simba_jni_handles.c).
  static final int ELECTION = 0;
  static final int RUN = 1;
  static final int SCHEDULE = 2;
  static final int GROUP = 3;
  static final int OBSERVE = 4;
  static native long start(int kind, long h, String name, long a, long b, Object upcall);
  /** Stop ({@code ms < 0}) or step down for {@code ms}: the code, 0 when done will run. */
  static native int stop(long x, long ms, Object done);
  static native void free(long x);
  /** X_close_async (1.4): 0 when done will run (the handle is freed before it), else the code. */
  static native int closeAsync(long x, Object done);

  /** A lock term with two references (the lock's and the accessors'), or 0 on timeout or busy. */
  static native long lockAcquire(long h, String name, long ms, boolean tryOnly);
  static native void lockAcquireAsync(long h, String name, long ms, Object cb);
  static native void lockRelease(long t);
  /**
   * A permit (1.5) as lockAcquire: of semaphore name of size arg when kind is
   * SIMBA_TERM_SEMAPHORE (2), else of read/write lock name in mode arg (1 read, 2 write).
   */
  static native long permitAcquire(long h, int kind, String name, int arg, long ms, boolean tryOnly);
  /** As lockAcquireAsync; a refused size comes to Upcall.refused with the library's detail. */
  static native void permitAcquireAsync(long h, int kind, String name, int arg, long ms, Object cb);
  static native long benchLockCycles(long h, String name, int n);
  /** Callback global references alive now (for leak tests). */
  static native long liveRefs();

  static native String termName(long t);
  static native long termToken(long t);
  static native int termKind(long t);
  static native boolean termIsValid(long t);
  static native long termRemaining(long t);
  static native void termEnsureValid(long t, long ms);
  static native int termReason(long t);
  static native int termOnRevoked(long t, Object cb);
  static native boolean termWaitRevoked(long t, long ms);
  static native void termRetain(long t);
  static native void termRelease(long t);
  /** simba_term_close_async of one reference: 0 when done will run, else the code. */
  static native int termCloseAsync(long t, Object done);
}
