package io.simba;

import java.util.concurrent.Executor;

/** The JNI entry points (src/main/c/simba_jni.c). Internal: not part of the API. */
final class Native {
  private Native() {}

  /** Loads libsimba_jni: from the path in system property {@code simba.jni.library}, else the library path. */
  static void load() {
    Holder.init();
  }

  private static final class Holder {
    static {
      String path = System.getProperty("simba.jni.library");
      if (path != null && !path.isEmpty()) {
        System.load(new java.io.File(path).getAbsolutePath());
      } else {
        System.loadLibrary("simba_jni");
      }
    }

    static void init() {}
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
  static native void runTask(long run, long arg);
  static native long[] configResolve(String[] kv);

  static native long clientOpen(String url, String[] kv, Object executor, Object sink, Object logger, int level);
  static native void clientClose(long h);
  static native void clientCloseAsync(long h, Object done);
  static native int clientStatus(long h);
  static native boolean clientWaitLive(long h, long ms);
  static native String clientSnapshot(long h);
  static native String clientInspect(long h, String[] names, long ms);

  static native long electionStart(long h, String name, Object listener);
  static native int electionStop(long e, Object done);
  static native int electionStepDown(long e, long ms, Object done);
  static native void electionFree(long e);

  static final int TASK_RUN = 0;
  static final int TASK_SCHEDULE = 1;
  static final int TASK_GROUP = 2;
  static native long taskStart(int kind, long h, String name, long a, long b, Object work);
  static native int taskStop(long t, Object done);
  static native int taskStepDown(long t, long ms, Object done);
  static native void taskClose(long t);

  static native long lockAcquire(long h, String name, long ms, boolean tryOnly);
  static native void lockAcquireAsync(long h, String name, long ms, Object cb);
  static native void lockRelease(long t);
  static native long benchLockCycles(long h, String name, int n);
  /** Callback global references alive now (for leak tests). */
  static native long liveRefs();

  static native String termName(long t);
  static native long termToken(long t);
  static native boolean termIsValid(long t);
  static native long termRemaining(long t);
  static native void termEnsureValid(long t, long ms);
  static native int termReason(long t);
  static native int termOnRevoked(long t, Object cb);
  static native boolean termWaitRevoked(long t, long ms);
  static native void termRetain(long t);
  static native void termRelease(long t);
}
