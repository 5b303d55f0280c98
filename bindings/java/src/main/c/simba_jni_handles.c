/*
 * JNI glue of the Java binding: elections, tasks, locks and terms (the
 * runtime they use is in simba_jni.c; the lifetime contract at its top).
 */
#define _POSIX_C_SOURCE 200809L
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "io_simba_Native.h"
#include "simba.h"
#include "simba_jni.h"

/* ---------------------------------------------------------------- elections */

typedef struct {
  simba_election_t *e;
  jobject listener; /* global Upcall */
} jelection_t;

JNIEXPORT jlong JNICALL Java_io_simba_Native_electionStart(JNIEnv *env, jclass cls, jlong h,
                                                           jstring name, jobject listener) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jelection_t *je = calloc(1, sizeof *je);
  if (!je) {
    throw_code(env, SIMBA_ENOMEM);
    return 0;
  }
  const char *n = utf(env, name);
  if (!n) {
    free(je);
    return 0;
  }
  je->listener = new_ref(env, listener);
  simba_listener_t l = {tr_elected, tr_revoked, je->listener};
  int rc = simba_election_start(&je->e, jc->c, n, &l);
  if (rc != SIMBA_OK) throw_code(env, rc);
  (*env)->ReleaseStringUTFChars(env, name, n);
  if (rc != SIMBA_OK) {
    del_ref(env, je->listener);
    free(je);
    return 0;
  }
  return (jlong)(intptr_t)je;
}

/* Returns the code: SIMBA_OK (done will run) or SIMBA_ESTATE (it will not). */
JNIEXPORT jint JNICALL Java_io_simba_Native_electionStop(JNIEnv *env, jclass cls, jlong h,
                                                         jobject done) {
  (void)cls;
  jelection_t *je = (jelection_t *)(intptr_t)h;
  jobject d = new_ref(env, done);
  int rc = simba_election_stop(je->e, tr_done_once, d);
  if (rc != SIMBA_OK) del_ref(env, d);
  return rc;
}

JNIEXPORT jint JNICALL Java_io_simba_Native_electionStepDown(JNIEnv *env, jclass cls, jlong h,
                                                             jlong ms, jobject done) {
  (void)cls;
  jelection_t *je = (jelection_t *)(intptr_t)h;
  jobject d = new_ref(env, done);
  int rc = simba_election_step_down(je->e, ms, tr_done_once, d);
  if (rc != SIMBA_OK) del_ref(env, d);
  return rc;
}

/* Allowed outside callbacks (waits) and inside the done of a stop (its last callback). */
JNIEXPORT void JNICALL Java_io_simba_Native_electionFree(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  jelection_t *je = (jelection_t *)(intptr_t)h;
  if (!je) return;
  simba_election_free(je->e);
  del_ref(env, je->listener);
  free(je);
}

/* ---------------------------------------------------------------- tasks */

typedef struct {
  simba_task_t *t;
  jobject work; /* global Upcall */
} jtask_t;

enum { TASK_RUN = 0, TASK_SCHEDULE = 1, TASK_GROUP = 2 };

JNIEXPORT jlong JNICALL Java_io_simba_Native_taskStart(JNIEnv *env, jclass cls, jint kind, jlong h,
                                                       jstring name, jlong a, jlong b,
                                                       jobject work) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jtask_t *jt = calloc(1, sizeof *jt);
  if (!jt) {
    throw_code(env, SIMBA_ENOMEM);
    return 0;
  }
  const char *n = utf(env, name);
  if (!n) {
    free(jt);
    return 0;
  }
  jt->work = new_ref(env, work);
  int rc;
  if (kind == TASK_RUN)
    rc = simba_run_while_leader(&jt->t, jc->c, n, tr_work, jt->work);
  else if (kind == TASK_SCHEDULE)
    rc = simba_schedule(&jt->t, jc->c, n, a, b, tr_work, jt->work);
  else
    rc = simba_group_join(&jt->t, jc->c, n, (uint32_t)a, tr_work, jt->work);
  if (rc != SIMBA_OK) throw_code(env, rc);
  (*env)->ReleaseStringUTFChars(env, name, n);
  if (rc != SIMBA_OK) {
    del_ref(env, jt->work);
    free(jt);
    return 0;
  }
  return (jlong)(intptr_t)jt;
}

JNIEXPORT jint JNICALL Java_io_simba_Native_taskStop(JNIEnv *env, jclass cls, jlong h,
                                                     jobject done) {
  (void)cls;
  jtask_t *jt = (jtask_t *)(intptr_t)h;
  jobject d = new_ref(env, done);
  int rc = simba_task_stop(jt->t, tr_done_once, d);
  if (rc != SIMBA_OK) del_ref(env, d);
  return rc;
}

JNIEXPORT jint JNICALL Java_io_simba_Native_taskStepDown(JNIEnv *env, jclass cls, jlong h, jlong ms,
                                                         jobject done) {
  (void)cls;
  jtask_t *jt = (jtask_t *)(intptr_t)h;
  jobject d = new_ref(env, done);
  int rc = simba_task_step_down(jt->t, ms, tr_done_once, d);
  if (rc != SIMBA_OK) del_ref(env, d);
  return rc;
}

/* Outside callbacks: waits for every run of the work, so the work ref can go.
 * Inside the done of a stop: the work has returned, the done is the last callback. */
JNIEXPORT void JNICALL Java_io_simba_Native_taskClose(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  jtask_t *jt = (jtask_t *)(intptr_t)h;
  if (!jt) return;
  simba_task_close(jt->t);
  del_ref(env, jt->work);
  free(jt);
}

/* ---------------------------------------------------------------- locks */

/* The term, or 0 on timeout (and on busy for try). */
JNIEXPORT jlong JNICALL Java_io_simba_Native_lockAcquire(JNIEnv *env, jclass cls, jlong h,
                                                         jstring name, jlong ms,
                                                         jboolean try_only) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  const char *n = utf(env, name);
  if (!n) return 0;
  simba_term_t *t = NULL;
  int rc = try_only ? simba_lock_try_acquire(&t, jc->c, n) : simba_lock_acquire(&t, jc->c, n, ms);
  if (rc != SIMBA_OK && !(rc == SIMBA_ETIMEDOUT && !try_only) && !(rc == SIMBA_EBUSY && try_only))
    throw_code(env, rc);
  (*env)->ReleaseStringUTFChars(env, name, n);
  return rc == SIMBA_OK ? (jlong)(intptr_t)t : 0;
}

JNIEXPORT void JNICALL Java_io_simba_Native_lockAcquireAsync(JNIEnv *env, jclass cls, jlong h,
                                                             jstring name, jlong ms, jobject cb) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  const char *n = utf(env, name);
  if (!n) return;
  jobject ref = new_ref(env, cb);
  int rc = simba_lock_acquire_async(jc->c, n, ms, tr_locked_once, ref);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    del_ref(env, ref);
  }
  (*env)->ReleaseStringUTFChars(env, name, n);
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
  const char *nm = utf(env, name);
  if (!nm) return 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (jint i = 0; i < n; i++) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, jc->c, nm, -1);
    if (rc == SIMBA_OK) rc = simba_lock_release(t);
    if (rc != SIMBA_OK) {
      throw_code(env, rc);
      break;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  (*env)->ReleaseStringUTFChars(env, name, nm);
  return (jlong)((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
}

/* ---------------------------------------------------------------- terms */

#define TERM(t) ((simba_term_t *)(intptr_t)(t))

JNIEXPORT jstring JNICALL Java_io_simba_Native_termName(JNIEnv *env, jclass cls, jlong t) {
  (void)cls;
  const char *n = simba_term_name(TERM(t));
  return (*env)->NewStringUTF(env, n ? n : "");
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_termToken(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  return (jlong)simba_term_token(TERM(t));
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

JNIEXPORT void JNICALL Java_io_simba_Native_termRelease(JNIEnv *env, jclass cls, jlong t) {
  (void)env;
  (void)cls;
  simba_term_release(TERM(t));
}
