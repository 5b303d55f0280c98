/*
 * JNI glue of the Java binding (io.simba), over include/simba.h: the runtime
 * (loading, threads, references, errors), the trampolines, config and the
 * client. Elections, tasks, locks and terms are in simba_jni_handles.c.
 *
 * Lifetime contract (include/simba.h, docs/bindings-contract.md):
 * - every callback's user data is a JNI global reference, freed only when the
 *   library promises the callback will not run again (one-shot callbacks
 *   inside themselves; listeners and work after the election/task is freed;
 *   the client's executor, event sink and logger in the client's last callback);
 * - library threads that call into Java are attached once, as daemon threads,
 *   and detached by a pthread key destructor when they exit;
 * - every trampoline runs inside a local frame and clears any pending Java
 *   exception: nothing unwinds into C;
 * - an error code and its detail (simba_last_error) are read in the same C
 *   function that made the failing call, and thrown as a Java exception.
 */
#define _POSIX_C_SOURCE 200809L
#include "simba_jni.h"

#include <jni.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io_simba_Native.h"
#include "simba.h"

static JavaVM *g_vm;
static pthread_key_t g_detach_key;
static jclass c_native;      /* io.simba.Native */
static jclass c_upcall;      /* io.simba.Upcall */
static jmethodID m_error;    /* Native.error(int, String) -> Throwable */
static jmethodID m_submit;   /* Native.submit(Object executor, long run, long arg) -> int */
static jmethodID m_log;      /* Native.log(Object logger, int level, String) */
static jmethodID m_attached; /* Native.attached(): marks a library thread */
static jmethodID m_elected;  /* Upcall.elected(long term) */
static jmethodID m_revoked;  /* Upcall.revoked(long term, int reason) */
static jmethodID m_done;     /* Upcall.done(int err) */
static jmethodID m_work;     /* Upcall.work(long term) */
static jmethodID m_locked;   /* Upcall.locked(int err, long term) */
static jmethodID m_event;    /* Upcall.event(int type, String json) */

static void detach_thread(void *unused) {
  (void)unused;
  if (g_vm) (*g_vm)->DetachCurrentThread(g_vm);
}

/* A Java exception must never stay pending when control returns to the library. */
static void clear_pending(JNIEnv *env) {
  if ((*env)->ExceptionCheck(env)) {
    (*env)->ExceptionDescribe(env); /* prints and clears */
  }
}

/* The JNIEnv of this thread, attaching it once (as a daemon) if the library made it. */
static JNIEnv *get_env(void) {
  JNIEnv *env = NULL;
  jint rc = (*g_vm)->GetEnv(g_vm, (void **)&env, JNI_VERSION_1_8);
  if (rc == JNI_OK) return env;
  if (rc != JNI_EDETACHED) return NULL;
  JavaVMAttachArgs args;
  args.version = JNI_VERSION_1_8;
  args.name = (char *)"simba-native";
  args.group = NULL;
  if ((*g_vm)->AttachCurrentThreadAsDaemon(g_vm, (void **)&env, &args) != JNI_OK) return NULL;
  pthread_setspecific(g_detach_key, (void *)1); /* the destructor detaches at thread exit */
  (*env)->CallStaticVoidMethod(env, c_native, m_attached);
  clear_pending(env);
  return env;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
  (void)reserved;
  JNIEnv *env;
  g_vm = vm;
  if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  if (pthread_key_create(&g_detach_key, detach_thread) != 0) return JNI_ERR;
  jclass n = (*env)->FindClass(env, "io/simba/Native");
  jclass u = (*env)->FindClass(env, "io/simba/Upcall");
  if (!n || !u) return JNI_ERR;
  c_native = (*env)->NewGlobalRef(env, n); /* class refs: not counted */
  c_upcall = (*env)->NewGlobalRef(env, u);
  (*env)->DeleteLocalRef(env, n);
  (*env)->DeleteLocalRef(env, u);
  m_error = (*env)->GetStaticMethodID(env, c_native, "error",
                                      "(ILjava/lang/String;)Ljava/lang/Throwable;");
  m_submit = (*env)->GetStaticMethodID(env, c_native, "submit", "(Ljava/lang/Object;JJ)I");
  m_log =
      (*env)->GetStaticMethodID(env, c_native, "log", "(Ljava/lang/Object;ILjava/lang/String;)V");
  m_attached = (*env)->GetStaticMethodID(env, c_native, "attached", "()V");
  if (!m_attached) return JNI_ERR;
  m_elected = (*env)->GetMethodID(env, c_upcall, "elected", "(J)V");
  m_revoked = (*env)->GetMethodID(env, c_upcall, "revoked", "(JI)V");
  m_done = (*env)->GetMethodID(env, c_upcall, "done", "(I)V");
  m_work = (*env)->GetMethodID(env, c_upcall, "work", "(J)V");
  m_locked = (*env)->GetMethodID(env, c_upcall, "locked", "(IJ)V");
  m_event = (*env)->GetMethodID(env, c_upcall, "event", "(ILjava/lang/String;)V");
  if (!m_error || !m_submit || !m_log || !m_elected || !m_revoked || !m_done || !m_work ||
      !m_locked || !m_event)
    return JNI_ERR;
  return JNI_VERSION_1_8;
}

/* Global references of callbacks, counted so tests can check none is leaked. */
static volatile long g_live_refs;

jobject new_ref(JNIEnv *env, jobject o) {
  jobject r = (*env)->NewGlobalRef(env, o);
  if (r) __atomic_add_fetch(&g_live_refs, 1, __ATOMIC_RELAXED);
  return r;
}

void del_ref(JNIEnv *env, jobject r) {
  if (!r) return;
  (*env)->DeleteGlobalRef(env, r);
  __atomic_sub_fetch(&g_live_refs, 1, __ATOMIC_RELAXED);
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_liveRefs(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return (jlong)__atomic_load_n(&g_live_refs, __ATOMIC_RELAXED);
}

/* Throw the Java exception for @p code, with this thread's detail (read now). */
void throw_code(JNIEnv *env, int code) {
  const char *detail = simba_last_error();
  jstring msg = (*env)->NewStringUTF(env, detail && *detail ? detail : simba_strerror(code));
  if (!msg) return; /* OutOfMemoryError pending */
  jobject ex = (*env)->CallStaticObjectMethod(env, c_native, m_error, (jint)code, msg);
  (*env)->DeleteLocalRef(env, msg);
  if ((*env)->ExceptionCheck(env)) return;
  (*env)->Throw(env, (jthrowable)ex);
  (*env)->DeleteLocalRef(env, ex);
}

/* UTF-8 of a Java string; NULL with an exception pending when s is null. */
const char *utf(JNIEnv *env, jstring s) {
  if (!s) {
    jclass npe = (*env)->FindClass(env, "java/lang/NullPointerException");
    if (npe) (*env)->ThrowNew(env, npe, "null string");
    return NULL;
  }
  return (*env)->GetStringUTFChars(env, s, NULL);
}

/* ---------------------------------------------------------------- trampolines */

void tr_elected(void *ud, simba_term_t *term) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  (*env)->CallVoidMethod(env, (jobject)ud, m_elected, (jlong)(intptr_t)term);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

void tr_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  (*env)->CallVoidMethod(env, (jobject)ud, m_revoked, (jlong)(intptr_t)term, (jint)reason);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

/* One-shot: the global ref is deleted before Java learns of the call (a local ref
 * keeps the object for the call), so a leak check made after it sees it gone. */
void tr_revoked_once(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  JNIEnv *env = get_env();
  if (!env) return;
  if ((*env)->PushLocalFrame(env, 8) == 0) {
    jobject o = (*env)->NewLocalRef(env, (jobject)ud);
    del_ref(env, (jobject)ud);
    (*env)->CallVoidMethod(env, o, m_revoked, (jlong)(intptr_t)term, (jint)reason);
    clear_pending(env);
    (*env)->PopLocalFrame(env, NULL);
  } else {
    del_ref(env, (jobject)ud);
  }
}

void tr_done_once(void *ud, int err) {
  JNIEnv *env = get_env();
  if (!env) return;
  if ((*env)->PushLocalFrame(env, 8) == 0) {
    jobject o = (*env)->NewLocalRef(env, (jobject)ud);
    del_ref(env, (jobject)ud);
    (*env)->CallVoidMethod(env, o, m_done, (jint)err);
    clear_pending(env);
    (*env)->PopLocalFrame(env, NULL);
  } else {
    del_ref(env, (jobject)ud);
  }
}

void tr_locked_once(void *ud, int err, simba_term_t *term) {
  JNIEnv *env = get_env();
  if (!env) {
    simba_term_release(term);
    return;
  }
  if ((*env)->PushLocalFrame(env, 8) == 0) {
    jobject o = (*env)->NewLocalRef(env, (jobject)ud);
    del_ref(env, (jobject)ud);
    (*env)->CallVoidMethod(env, o, m_locked, (jint)err, (jlong)(intptr_t)term);
    clear_pending(env);
    (*env)->PopLocalFrame(env, NULL);
  } else {
    del_ref(env, (jobject)ud);
    simba_term_release(term);
  }
}

void tr_work(void *ud, simba_term_t *term) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  (*env)->CallVoidMethod(env, (jobject)ud, m_work, (jlong)(intptr_t)term);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  jstring s = (*env)->NewStringUTF(env, detail ? detail : "{}");
  if (s) (*env)->CallVoidMethod(env, (jobject)ud, m_event, (jint)type, s);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

static void tr_log(void *ud, int level, const char *msg) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  jstring s = (*env)->NewStringUTF(env, msg ? msg : "");
  if (s) (*env)->CallStaticVoidMethod(env, c_native, m_log, (jobject)ud, (jint)level, s);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

/* The host executor: hands run(arg) to the client's java.util.concurrent.Executor.
 * A RejectedExecutionException makes it return nonzero (the library's rule applies). */
static int tr_submit(void *ctx, void (*run)(void *), void *arg) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return -1;
  jint rc = (*env)->CallStaticIntMethod(env, c_native, m_submit, (jobject)ctx, (jlong)(intptr_t)run,
                                        (jlong)(intptr_t)arg);
  if ((*env)->ExceptionCheck(env)) {
    clear_pending(env);
    rc = -1;
  }
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

JNIEXPORT void JNICALL Java_io_simba_Native_runTask(JNIEnv *env, jclass cls, jlong run, jlong arg) {
  (void)env;
  (void)cls;
  void (*fn)(void *) = (void (*)(void *))(intptr_t)run;
  fn((void *)(intptr_t)arg);
}

/* ---------------------------------------------------------------- config */

/* Build a native config from alternating key/value strings; NULL with an exception pending. */
static simba_config_t *make_config(JNIEnv *env, jobjectArray kv) {
  simba_config_t *cfg = NULL;
  int rc = simba_config_new(&cfg);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    return NULL;
  }
  jsize n = kv ? (*env)->GetArrayLength(env, kv) : 0;
  for (jsize i = 0; i + 1 < n; i += 2) {
    jstring k = (jstring)(*env)->GetObjectArrayElement(env, kv, i);
    jstring v = (jstring)(*env)->GetObjectArrayElement(env, kv, i + 1);
    const char *ks = utf(env, k);
    const char *vs = ks ? utf(env, v) : NULL;
    if (vs) rc = simba_config_set(cfg, ks, vs);
    if (ks && vs && rc != SIMBA_OK) throw_code(env, rc);
    if (vs) (*env)->ReleaseStringUTFChars(env, v, vs);
    if (ks) (*env)->ReleaseStringUTFChars(env, k, ks);
    (*env)->DeleteLocalRef(env, k);
    (*env)->DeleteLocalRef(env, v);
    if ((*env)->ExceptionCheck(env)) {
      simba_config_free(cfg);
      return NULL;
    }
  }
  return cfg;
}

static const char *const k_duration_keys[] = {"session.lease-duration", "session.renew-interval",
                                              "session.margin", "session.retry-jitter",
                                              "session.min-backoff"};

/* Validate and return the effective values: lease, renew, margin, jitter, min-backoff (ms),
 * drift*1e9. */
JNIEXPORT jlongArray JNICALL Java_io_simba_Native_configResolve(JNIEnv *env, jclass cls,
                                                                jobjectArray kv) {
  (void)cls;
  simba_config_t *cfg = make_config(env, kv);
  if (!cfg) return NULL;
  int rc = simba_config_validate(cfg);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    simba_config_free(cfg);
    return NULL;
  }
  jlong out[6];
  for (int i = 0; i < 5; i++) {
    int64_t ms = 0;
    simba_config_get_ms(cfg, k_duration_keys[i], &ms);
    out[i] = ms;
  }
  double drift = 0;
  simba_config_get_double(cfg, "session.drift", &drift);
  out[5] = (jlong)(drift * 1e9 + 0.5);
  simba_config_free(cfg);
  jlongArray arr = (*env)->NewLongArray(env, 6);
  if (arr) (*env)->SetLongArrayRegion(env, arr, 0, 6, out);
  return arr;
}

/* ---------------------------------------------------------------- client */

static void free_client_refs(JNIEnv *env, jclient_t *jc) {
  del_ref(env, jc->executor);
  del_ref(env, jc->sink);
  del_ref(env, jc->logger);
  free(jc);
}

JNIEXPORT jlong JNICALL Java_io_simba_Native_clientOpen(JNIEnv *env, jclass cls, jstring url,
                                                        jobjectArray kv, jobject executor,
                                                        jobject sink, jobject logger, jint level) {
  (void)cls;
  jclient_t *jc = calloc(1, sizeof *jc);
  if (!jc) {
    throw_code(env, SIMBA_ENOMEM);
    return 0;
  }
  simba_config_t *cfg = make_config(env, kv);
  if (!cfg) {
    free(jc);
    return 0;
  }
  if (executor) { /* else the library's own pool, whose threads are attached as daemons */
    jc->executor = new_ref(env, executor);
    simba_config_set_executor(cfg, tr_submit, jc->executor);
  }
  if (logger) {
    jc->logger = new_ref(env, logger);
    simba_config_set_logger(cfg, tr_log, jc->logger, level);
  }
  if (sink) { /* on the config: it sees the first SESSION_OPENED too */
    jc->sink = new_ref(env, sink);
    simba_config_set_event_sink(cfg, tr_event, jc->sink);
  }
  const char *u = utf(env, url);
  int rc = SIMBA_EINVAL;
  if (u) {
    rc = simba_client_open(&jc->c, u, cfg);
    if (rc != SIMBA_OK) throw_code(env, rc);
    (*env)->ReleaseStringUTFChars(env, url, u);
  }
  simba_config_free(cfg);
  if (rc != SIMBA_OK) {
    free_client_refs(env, jc);
    return 0;
  }
  return (jlong)(intptr_t)jc;
}

/* Blocking close, outside callbacks: afterwards no callback runs, so the refs go. */
JNIEXPORT void JNICALL Java_io_simba_Native_clientClose(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  if (!jc) return;
  simba_client_close(jc->c);
  free_client_refs(env, jc);
}

typedef struct {
  jclient_t *jc;
  jobject done; /* global Upcall, or NULL */
} close_ctx_t;

static void tr_close_done(void *ud, int err) {
  close_ctx_t *cc = ud;
  JNIEnv *env = get_env();
  if (!env) return;
  free_client_refs(env, cc->jc); /* the client's last callback: nothing uses them now */
  if (cc->done && (*env)->PushLocalFrame(env, 8) == 0) {
    jobject o = (*env)->NewLocalRef(env, cc->done);
    del_ref(env, cc->done);
    cc->done = NULL;
    (*env)->CallVoidMethod(env, o, m_done, (jint)err);
    clear_pending(env);
    (*env)->PopLocalFrame(env, NULL);
  }
  del_ref(env, cc->done);
  free(cc);
}

/* Close without waiting (any thread, a callback included); done is the client's last callback. */
JNIEXPORT void JNICALL Java_io_simba_Native_clientCloseAsync(JNIEnv *env, jclass cls, jlong h,
                                                             jobject done) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  if (!jc) return;
  close_ctx_t *cc = calloc(1, sizeof *cc);
  if (!cc) {
    throw_code(env, SIMBA_ENOMEM);
    return;
  }
  cc->jc = jc;
  cc->done = done ? new_ref(env, done) : NULL;
  int rc = simba_client_close_async(jc->c, tr_close_done, cc);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    del_ref(env, cc->done);
    free(cc);
  }
}

JNIEXPORT jint JNICALL Java_io_simba_Native_clientStatus(JNIEnv *env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  return jc ? (jint)simba_client_status(jc->c) : SIMBA_SESSION_CLOSED;
}

/* true when live, false on timeout; throws otherwise. */
JNIEXPORT jboolean JNICALL Java_io_simba_Native_clientWaitLive(JNIEnv *env, jclass cls, jlong h,
                                                               jlong ms) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  int rc = simba_client_wait_live(jc->c, ms);
  if (rc == SIMBA_OK) return JNI_TRUE;
  if (rc == SIMBA_ETIMEDOUT) return JNI_FALSE;
  throw_code(env, rc);
  return JNI_FALSE;
}

JNIEXPORT jstring JNICALL Java_io_simba_Native_clientSnapshot(JNIEnv *env, jclass cls, jlong h) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  char *s = simba_client_snapshot_json(jc->c);
  if (!s) {
    throw_code(env, SIMBA_ECLOSED);
    return NULL;
  }
  jstring r = (*env)->NewStringUTF(env, s);
  simba_free(s);
  return r;
}

JNIEXPORT jstring JNICALL Java_io_simba_Native_clientInspect(JNIEnv *env, jclass cls, jlong h,
                                                             jobjectArray names, jlong ms) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jsize n = names ? (*env)->GetArrayLength(env, names) : 0;
  const char **cn = n ? calloc((size_t)n, sizeof *cn) : NULL;
  jstring *js = n ? calloc((size_t)n, sizeof *js) : NULL;
  jstring result = NULL;
  jsize got = 0;
  if (n && (!cn || !js)) {
    throw_code(env, SIMBA_ENOMEM);
    goto out;
  }
  for (; got < n; got++) {
    js[got] = (jstring)(*env)->GetObjectArrayElement(env, names, got);
    cn[got] = utf(env, js[got]);
    if (!cn[got]) goto out;
  }
  char *json = NULL;
  int rc = simba_client_inspect_json(jc->c, cn, (size_t)n, ms, &json);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    goto out;
  }
  result = (*env)->NewStringUTF(env, json);
  simba_free(json);
out:
  for (jsize i = 0; i < got; i++) {
    (*env)->ReleaseStringUTFChars(env, js[i], cn[i]);
    (*env)->DeleteLocalRef(env, js[i]);
  }
  if (js && got < n && js[got]) (*env)->DeleteLocalRef(env, js[got]);
  free(cn);
  free(js);
  return result;
}

JNIEXPORT jstring JNICALL Java_io_simba_Native_version(JNIEnv *env, jclass cls) {
  (void)cls;
  return (*env)->NewStringUTF(env, simba_version_string());
}

JNIEXPORT jint JNICALL Java_io_simba_Native_versionNumber(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)simba_version();
}
