/*
 * JNI glue of the Java binding: elections, tasks, observers, locks and terms
 * (the runtime they use is in simba_jni.c; the lifetime contract at its top).
 */
#define _POSIX_C_SOURCE 200809L
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "io_simba_Native.h"
#include "simba.h"
#include "simba_jni.h"

/* ------------------------------------------- elections, tasks and observers */

/* One handle for whatever a name was started as: an election, leader work
 * (run, schedule, group) or an observer. Stop, step-down and free take one path. */
enum { H_ELECTION = 0, H_RUN = 1, H_SCHEDULE = 2, H_GROUP = 3, H_OBSERVE = 4 };

typedef struct {
  int kind;
  simba_election_t *e;
  simba_task_t *t;
  simba_observer_t *o;
  jobject upcall; /* global: the listener, the work or the observer */
  jobject closed; /* global: the done of closeAsync, once asked for */
} jhandle_t;

static const char *const k_name_what[] = {"lease name", "lease name", "lease name", "group name",
                                          "observed lease name"};

JNIEXPORT jlong JNICALL Java_io_simba_Native_start(JNIEnv *env, jclass cls, jint kind, jlong h,
                                                   jstring name, jlong a, jlong b, jobject upcall) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t n;
  if (kind < H_ELECTION || kind > H_OBSERVE) {
    throw_msg(env, SIMBA_EINVAL, "unknown kind");
    return 0;
  }
  if (jstr_get(env, name, k_name_what[kind], &n) != 0) return 0;
  jhandle_t *jh = calloc(1, sizeof *jh);
  if (!jh) {
    jstr_free(&n);
    throw_msg(env, SIMBA_ENOMEM, "out of memory");
    return 0;
  }
  jh->kind = kind;
  jh->upcall = new_ref(env, upcall);
  int rc;
  if (kind == H_ELECTION) {
    simba_listener_t l = {tr_elected, tr_revoked, jh->upcall};
    rc = simba_election_start(&jh->e, jc->c, n.s, &l);
  } else if (kind == H_RUN) {
    rc = simba_run_while_leader(&jh->t, jc->c, n.s, tr_work, jh->upcall);
  } else if (kind == H_SCHEDULE) {
    rc = simba_schedule(&jh->t, jc->c, n.s, a, b, tr_work, jh->upcall);
  } else if (kind == H_GROUP) {
    rc = simba_group_join(&jh->t, jc->c, n.s, (uint32_t)a, tr_work, jh->upcall);
  } else {
    rc = simba_observe_start(&jh->o, jc->c, n.s, a, tr_observed, jh->upcall);
  }
  if (rc != SIMBA_OK) throw_code(env, rc);
  jstr_free(&n);
  if (rc != SIMBA_OK) {
    del_ref(env, jh->upcall);
    free(jh);
    return 0;
  }
  return (jlong)(intptr_t)jh;
}

/* Stop (ms < 0) or step down for ms. Returns the code: SIMBA_OK (done will run),
 * else done will not run (SIMBA_ESTATE: already stopping or stopped). */
JNIEXPORT jint JNICALL Java_io_simba_Native_stop(JNIEnv *env, jclass cls, jlong h, jlong ms,
                                                 jobject done) {
  (void)cls;
  jhandle_t *jh = (jhandle_t *)(intptr_t)h;
  if (jh->kind == H_OBSERVE) return SIMBA_EINVAL;
  jobject d = new_ref(env, done);
  int rc;
  if (jh->e)
    rc = ms < 0 ? simba_election_stop(jh->e, tr_done_once, d)
                : simba_election_step_down(jh->e, ms, tr_done_once, d);
  else
    rc = ms < 0 ? simba_task_stop(jh->t, tr_done_once, d)
                : simba_task_step_down(jh->t, ms, tr_done_once, d);
  if (rc != SIMBA_OK) del_ref(env, d);
  return rc;
}

/* Outside callbacks the free waits for every callback and run of the work, so the
 * upcall ref can go; inside the done of a stop, that done is the last callback. */
JNIEXPORT void JNICALL Java_io_simba_Native_free(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  jhandle_t *jh = (jhandle_t *)(intptr_t)h;
  if (!jh) return;
  simba_election_free(jh->e);
  simba_task_close(jh->t);
  simba_observer_free(jh->o);
  del_ref(env, jh->upcall);
  free(jh);
}

/* The done of X_close_async: the handle's last callback, so the upcall ref and
 * jh go here, before Java hears of it. */
static void tr_handle_closed(void *ud, int err) {
  jhandle_t *jh = ud;
  JNIEnv *env = get_env();
  if (!env) return;
  jobject done = jh->closed;
  del_ref(env, jh->upcall);
  free(jh);
  tr_done_once(done, err);
}

/* Close without waiting, from anywhere (SIMBA_1.4): SIMBA_OK and done will run
 * once, after every other callback of the handle; else nothing happened. */
JNIEXPORT jint JNICALL Java_io_simba_Native_closeAsync(JNIEnv *env, jclass cls, jlong h,
                                                       jobject done) {
  (void)cls;
  jhandle_t *jh = (jhandle_t *)(intptr_t)h;
  if (!jh) return SIMBA_EINVAL;
  jh->closed = new_ref(env, done);
  int rc;
  if (jh->e)
    rc = simba_election_close_async(jh->e, tr_handle_closed, jh);
  else if (jh->t)
    rc = simba_task_close_async(jh->t, tr_handle_closed, jh);
  else
    rc = simba_observer_close_async(jh->o, tr_handle_closed, jh);
  if (rc != SIMBA_OK) {
    del_ref(env, jh->closed);
    jh->closed = NULL;
  }
  return rc;
}

/* ---------------------------------------------------------------- locks */

/* The term, or 0 on timeout (and when busy, for a try): one rule, an empty
 * Optional in Java. The term comes with two references: the lock's and the one
 * that keeps a released LockTerm's accessors answering (see LockTerm). */
/* An acquire's answer: the term with a second reference, or 0 for a timeout or a
 * try that found it busy; any other failure throws. Frees the name. */
static jlong acquired(JNIEnv *env, jstr_t *n, int rc, simba_term_t *t, jboolean try_only) {
  if (rc == SIMBA_OK)
    simba_term_retain(t);
  else if (rc != SIMBA_ETIMEDOUT && !(rc == SIMBA_EBUSY && try_only))
    throw_code(env, rc);
  jstr_free(n);
  return rc == SIMBA_OK ? (jlong)(intptr_t)t : 0;
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_lockAcquire(JNIEnv *env, jclass cls, jlong h,
                                                         jstring name, jlong ms,
                                                         jboolean try_only) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t n;
  if (jstr_get(env, name, "lease name", &n) != 0) return 0;
  simba_term_t *t = NULL;
  int rc =
      try_only ? simba_lock_try_acquire(&t, jc->c, n.s) : simba_lock_acquire(&t, jc->c, n.s, ms);
  return acquired(env, &n, rc, t, try_only);
}

JNIEXPORT void JNICALL Java_io_simba_Native_lockAcquireAsync(JNIEnv *env, jclass cls, jlong h,
                                                             jstring name, jlong ms, jobject cb) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t n;
  if (jstr_get(env, name, "lease name", &n) != 0) return;
  jobject ref = new_ref(env, cb);
  int rc = simba_lock_acquire_async(jc->c, n.s, ms, tr_locked_once, ref);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    del_ref(env, ref);
  }
  jstr_free(&n);
}

/* A permit (1.5): of semaphore name of size arg (kind SIMBA_TERM_SEMAPHORE), else of
 * read/write lock name in mode arg; as lockAcquire otherwise. */
JNIEXPORT jlong JNICALL Java_io_simba_Native_permitAcquire(JNIEnv *env, jclass cls, jlong h,
                                                           jint kind, jstring name, jint arg,
                                                           jlong ms, jboolean try_only) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t n;
  if (jstr_get(env, name, "lease name", &n) != 0) return 0;
  simba_term_t *t = NULL;
  int rc;
  if (kind == SIMBA_TERM_SEMAPHORE)
    rc = try_only ? simba_semaphore_try_acquire(&t, jc->c, n.s, (uint32_t)arg)
                  : simba_semaphore_acquire(&t, jc->c, n.s, (uint32_t)arg, ms);
  else
    rc = try_only ? simba_rwlock_try_acquire(&t, jc->c, n.s, arg)
                  : simba_rwlock_acquire(&t, jc->c, n.s, arg, ms);
  return acquired(env, &n, rc, t, try_only);
}

JNIEXPORT void JNICALL Java_io_simba_Native_permitAcquireAsync(JNIEnv *env, jclass cls, jlong h,
                                                               jint kind, jstring name, jint arg,
                                                               jlong ms, jobject cb) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t n;
  if (jstr_get(env, name, "lease name", &n) != 0) return;
  jobject ref = new_ref(env, cb);
  int rc = kind == SIMBA_TERM_SEMAPHORE
               ? simba_semaphore_acquire_async(jc->c, n.s, (uint32_t)arg, ms, tr_permit_once, ref)
               : simba_rwlock_acquire_async(jc->c, n.s, arg, ms, tr_permit_once, ref);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    del_ref(env, ref);
  }
  jstr_free(&n);
}

JNIEXPORT void JNICALL Java_io_simba_Native_lockRelease(JNIEnv *env, jclass cls, jlong t) {
  (void)cls;
  int rc = simba_lock_release((simba_term_t *)(intptr_t)t);
  if (rc != SIMBA_OK) throw_code(env, rc);
}

/* The raw C lock cycle, for the benchmark: n acquire + release, nanoseconds. */
JNIEXPORT jlong JNICALL Java_io_simba_Native_benchLockCycles(JNIEnv *env, jclass cls, jlong h,
                                                             jstring name, jint n) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jstr_t nm;
  if (jstr_get(env, name, "lease name", &nm) != 0) return 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (jint i = 0; i < n; i++) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, jc->c, nm.s, -1);
    if (rc == SIMBA_OK) rc = simba_lock_release(t);
    if (rc != SIMBA_OK) {
      throw_code(env, rc);
      break;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  jstr_free(&nm);
  return (jlong)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
}

/* ---------------------------------------------------------------- terms */

#define TERM(t) ((simba_term_t *)(intptr_t)(t))

JNIEXPORT jstring JNICALL Java_io_simba_Native_termName(JNIEnv *env, jclass cls, jlong t) {
  (void)cls;
  const char *n = simba_term_name(TERM(t));
  return new_jstr(env, n ? n : "");
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_termToken(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return (jlong)simba_term_token(TERM(t));
}

JNIEXPORT jint JNICALL Java_io_simba_Native_termKind(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return (jint)simba_term_kind(TERM(t));
}

JNIEXPORT jboolean JNICALL Java_io_simba_Native_termIsValid(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return simba_term_is_valid(TERM(t)) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_termRemaining(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return (jlong)simba_term_remaining_ms(TERM(t));
}

JNIEXPORT void JNICALL Java_io_simba_Native_termEnsureValid(JNIEnv *env, jclass cls, jlong t,
                                                            jlong ms) {
  (void)cls;
  int rc = simba_term_ensure_valid(TERM(t), ms);
  if (rc != SIMBA_OK) throw_code(env, rc);
}

JNIEXPORT jint JNICALL Java_io_simba_Native_termReason(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return (jint)simba_term_revoke_reason(TERM(t));
}

/* SIMBA_OK (cb will run once) or SIMBA_ECLOSED (it will not). */
JNIEXPORT jint JNICALL Java_io_simba_Native_termOnRevoked(JNIEnv *env, jclass cls, jlong t,
                                                          jobject cb) {
  (void)cls;
  jobject ref = new_ref(env, cb);
  int rc = simba_term_on_revoked(TERM(t), tr_revoked_once, ref);
  if (rc != SIMBA_OK) {
    del_ref(env, ref);
    if (rc != SIMBA_ECLOSED) throw_code(env, rc);
  }
  return rc;
}

JNIEXPORT jboolean JNICALL Java_io_simba_Native_termWaitRevoked(JNIEnv *env, jclass cls, jlong t,
                                                                jlong ms) {
  (void)cls;
  int rc = simba_term_wait_revoked(TERM(t), ms);
  if (rc == SIMBA_OK) return JNI_TRUE;
  if (rc != SIMBA_ETIMEDOUT) throw_code(env, rc);
  return JNI_FALSE;
}

JNIEXPORT void JNICALL Java_io_simba_Native_termRetain(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  simba_term_retain(TERM(t));
}

/* Drops one reference without waiting (a lock term's lock reference: releases
 * the lock); SIMBA_OK and done runs once, else nothing happened. */
JNIEXPORT jint JNICALL Java_io_simba_Native_termCloseAsync(JNIEnv *env, jclass cls, jlong t,
                                                           jobject done) {
  (void)cls;
  jobject ref = new_ref(env, done);
  int rc = simba_term_close_async(TERM(t), tr_done_once, ref);
  if (rc != SIMBA_OK) del_ref(env, ref);
  return rc;
}

JNIEXPORT void JNICALL Java_io_simba_Native_termRelease(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  simba_term_release(TERM(t));
}
