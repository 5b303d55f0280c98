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
  private final Map<Long, Term> runs = new ConcurrentHashMap<>();

  LeaderTask(Simba simba, String name, LeaderWork work) {
    super(simba, name);
    this.work = work;
  }

  @Override
  void work(long ptr) {
    Term term = runs.get(ptr);
    if (term == null) {
      Term fresh = Term.adopt(ptr);
      term = fresh;
      runs.put(ptr, fresh);
      fresh.watch();
      // The term's on_revoked callbacks run after the work returned (handover order), so
      // a watcher waits for the revocation itself and interrupts the work.
      Thread watcher = new Thread(() -> {
        fresh.waitRevokedUninterruptibly();
        fresh.revokeWork();
        runs.remove(ptr, fresh);
      }, "simba-revoke-watch " + fresh.name());
      watcher.setDaemon(true);
      watcher.start();
    }
    current = term;
    Callbacks.enter();
    try {
      if (term.beginWork()) {
        try {
          work.run(term);
        } catch (InterruptedException e) {
          // the term was revoked: the normal way out
        } catch (TermExpiredException e) {
          if (term.isValid()) Callbacks.report("leader work of " + term.name(), e);
          // else: ensureValid saw the revocation, the normal way out
        } catch (Throwable t) {
          if (!(t.getCause() instanceof InterruptedException)) Callbacks.report("leader work of " + term.name(), t);
        } finally {
          term.endWork();
        }
      }
    } finally {
      Callbacks.exit();
      if (current == term) current = null;
      Thread.interrupted(); // the library thread is reused: clear the revocation's interrupt
    }
  }
}
