package io.simba;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Leader work started by {@link Election#runWhileLeader} or {@link Election#schedule}:
 * each term runs the work on a thread of its own, interrupted when the term is revoked.
 * {@link #close()} stops and waits until the work returned.
 */
public class LeaderTask extends Contender implements AutoCloseable {
  private final LeaderWork work;
  private final Map<Long, TermRun> runs = new ConcurrentHashMap<>();

  /** A term's runs: interrupts the thread running work when the term is revoked. */
  private static final class TermRun {
    final Term term;
    private Thread runner; // guarded by this
    private boolean revoked; // guarded by this

    TermRun(Term term) {
      this.term = term;
    }

    synchronized boolean begin() {
      if (revoked) return false;
      runner = Thread.currentThread();
      return true;
    }

    synchronized void end() {
      runner = null;
    }

    synchronized void revoke() {
      revoked = true;
      if (runner != null) runner.interrupt();
    }
  }

  LeaderTask(Simba simba, String name, LeaderWork work) {
    super(simba, name);
    this.work = work;
  }

  @Override
  void work(long ptr) {
    TermRun run = runs.get(ptr);
    if (run == null) {
      TermRun fresh = new TermRun(Term.adopt(ptr));
      run = fresh;
      runs.put(ptr, fresh);
      // The term's on_revoked callbacks run after the work returned (handover order), so
      // a watcher waits for the revocation itself and interrupts the work.
      Thread watcher = new Thread(() -> {
        fresh.term.waitRevokedUninterruptibly();
        fresh.revoke();
        runs.remove(ptr, fresh);
      }, "simba-revoke-watch " + fresh.term.name());
      watcher.setDaemon(true);
      watcher.start();
    }
    current = run.term;
    Callbacks.enter();
    try {
      if (run.begin()) {
        try {
          work.run(run.term);
        } catch (InterruptedException e) {
          // the term was revoked: the normal way out
        } catch (TermExpiredException e) {
          if (run.term.isValid()) Callbacks.report("leader work of " + run.term.name(), e);
          // else: ensureValid saw the revocation, the normal way out
        } catch (Throwable t) {
          if (!(t.getCause() instanceof InterruptedException)) Callbacks.report("leader work of " + run.term.name(), t);
        } finally {
          run.end();
        }
      }
    } finally {
      Callbacks.exit();
      if (current == run.term) current = null;
      Thread.interrupted(); // the library thread is reused: clear the revocation's interrupt
    }
  }

  @Override
  int nativeStop(long h, Upcall done) {
    return Native.taskStop(h, done);
  }

  @Override
  int nativeStepDown(long h, long ms, Upcall done) {
    return Native.taskStepDown(h, ms, done);
  }

  @Override
  void nativeFree(long h) {
    Native.taskClose(h);
  }
}
