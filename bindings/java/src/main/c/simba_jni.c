/*
 * JNI glue of the Java binding (io.simba), over include/simba.h: the runtime
 * (loading, threads, references, errors, strings), the trampolines, config and
 * the client. Elections, tasks, observers, locks and terms are in
 * simba_jni_handles.c.
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
 *   function that made the failing call, and thrown as a Java exception;
 * - strings cross as real UTF-8 (jstr_get, new_jstr), never JNI's modified
 *   UTF-8, and a string with U+0000 never reaches the library.
 */
#define _POSIX_C_SOURCE 200809L
#include "simba_jni.h"

#include <jni.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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
static jmethodID m_refused;  /* Upcall.refused(int err, String detail) */
static jmethodID m_event;    /* Upcall.event(int type, String json) */
static jmethodID m_observed; /* Upcall.observed(String name, String session, String client, long) */

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
JNIEnv *get_env(void) {
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
  m_refused = (*env)->GetMethodID(env, c_upcall, "refused", "(ILjava/lang/String;)V");
  m_event = (*env)->GetMethodID(env, c_upcall, "event", "(ILjava/lang/String;)V");
  m_observed = (*env)->GetMethodID(env, c_upcall, "observed",
                                   "(Ljava/lang/String;Ljava/lang/String;Ljava/lang/String;J)V");
  if (!m_error || !m_submit || !m_log || !m_elected || !m_revoked || !m_done || !m_work ||
      !m_locked || !m_refused || !m_event || !m_observed)
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

void throw_msg(JNIEnv *env, int code, const char *detail) {
  jstring msg = new_jstr(env, detail && *detail ? detail : simba_strerror(code));
  if (!msg) return; /* OutOfMemoryError pending */
  jobject ex = (*env)->CallStaticObjectMethod(env, c_native, m_error, (jint)code, msg);
  (*env)->DeleteLocalRef(env, msg);
  if ((*env)->ExceptionCheck(env)) return;
  (*env)->Throw(env, (jthrowable)ex);
  (*env)->DeleteLocalRef(env, ex);
}

void throw_code(JNIEnv *env, int code) { throw_msg(env, code, simba_last_error()); }

/* ---------------------------------------------------------------- strings */

static void utf8_put(char *o, size_t *k, uint32_t c) {
  if (c < 0x80) {
    o[(*k)++] = (char)c;
  } else if (c < 0x800) {
    o[(*k)++] = (char)(0xC0 | (c >> 6));
    o[(*k)++] = (char)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    o[(*k)++] = (char)(0xE0 | (c >> 12));
    o[(*k)++] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (c & 0x3F));
  } else {
    o[(*k)++] = (char)(0xF0 | (c >> 18));
    o[(*k)++] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[(*k)++] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[(*k)++] = (char)(0x80 | (c & 0x3F));
  }
}

int jstr_get(JNIEnv *env, jstring js, const char *what, jstr_t *out) {
  out->s = out->buf;
  out->len = 0;
  out->buf[0] = 0;
  if (!js) {
    jclass npe = (*env)->FindClass(env, "java/lang/NullPointerException");
    if (npe) (*env)->ThrowNew(env, npe, what);
    return -1;
  }
  jsize n = (*env)->GetStringLength(env, js);
  jchar stack[128];
  jchar *u = (size_t)n <= sizeof stack / sizeof *stack ? stack : malloc((size_t)n * sizeof *u);
  size_t cap = (size_t)n * 3 + 1; /* a UTF-16 unit gives at most 3 bytes, a pair 4 */
  char *o = cap <= sizeof out->buf ? out->buf : malloc(cap);
  if (!u || !o) {
    if (u != stack) free(u);
    if (o != out->buf) free(o);
    throw_msg(env, SIMBA_ENOMEM, "out of memory");
    return -1;
  }
  (*env)->GetStringRegion(env, js, 0, n, u);
  size_t k = 0;
  for (jsize i = 0; i < n; i++) {
    uint32_t c = u[i];
    if (c == 0) {
      char msg[200];
      snprintf(msg, sizeof msg, "%s contains a NUL byte at index %d", what, (int)i);
      if (u != stack) free(u);
      if (o != out->buf) free(o);
      throw_msg(env, SIMBA_EINVAL, msg);
      return -1;
    }
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[++i] - 0xDC00u);
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD; /* a lone surrogate has no UTF-8 */
    }
    utf8_put(o, &k, c);
  }
  o[k] = 0;
  if (u != stack) free(u);
  out->s = o;
  out->len = k;
  return 0;
}

void jstr_free(jstr_t *s) {
  if (s->s != s->buf) free(s->s);
  s->s = s->buf;
}

/* The code point at *p (advancing it); U+FFFD for a malformed sequence. */
static uint32_t utf8_next(const unsigned char **p, const unsigned char *end) {
  uint32_t c = **p;
  int more = c < 0x80             ? 0
             : (c & 0xE0) == 0xC0 ? 1
             : (c & 0xF0) == 0xE0 ? 2
             : (c & 0xF8) == 0xF0 ? 3
                                  : -1;
  if (more < 0 || end - *p <= more) {
    (*p)++;
    return 0xFFFD;
  }
  c &= 0x7Fu >> more;
  for (int i = 1; i <= more; i++) {
    if (((*p)[i] & 0xC0) != 0x80) {
      (*p)++;
      return 0xFFFD;
    }
    c = (c << 6) | ((*p)[i] & 0x3F);
  }
  *p += more + 1;
  return c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) ? 0xFFFD : c;
}

jstring new_jstr(JNIEnv *env, const char *utf8) {
  if (!utf8) return NULL;
  size_t n = strlen(utf8); /* UTF-16 units never outnumber the bytes */
  jchar stack[256] = {0};
  jchar *u = n <= sizeof stack / sizeof *stack ? stack : calloc(n, sizeof *u);
  if (!u) return (*env)->NewStringUTF(env, "(out of memory)");
  const unsigned char *p = (const unsigned char *)utf8, *end = p + n;
  size_t k = 0;
  while (p < end) {
    uint32_t c = utf8_next(&p, end);
    if (c >= 0x10000) {
      u[k++] = (jchar)(0xD800 + ((c - 0x10000) >> 10));
      u[k++] = (jchar)(0xDC00 + ((c - 0x10000) & 0x3FF));
    } else {
      u[k++] = (jchar)c;
    }
  }
  jstring r = (*env)->NewString(env, u, (jsize)k);
  if (u != stack) free(u);
  return r;
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

/* One-shot callbacks: the global ref is deleted before Java learns of the call (a
 * local ref keeps the object for the call), so a leak check made after it sees it
 * gone. NULL when no frame could be pushed (the ref is gone then too). */
static jobject take_once(JNIEnv *env, void *ud) {
  jobject o = NULL;
  if ((*env)->PushLocalFrame(env, 8) == 0) o = (*env)->NewLocalRef(env, (jobject)ud);
  del_ref(env, (jobject)ud);
  return o;
}

static void end_once(JNIEnv *env, jobject o) {
  if (!o) return;
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

void tr_revoked_once(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  JNIEnv *env = get_env();
  if (!env) return;
  jobject o = take_once(env, ud);
  if (o) (*env)->CallVoidMethod(env, o, m_revoked, (jlong)(intptr_t)term, (jint)reason);
  end_once(env, o);
}

void tr_done_once(void *ud, int err) {
  JNIEnv *env = get_env();
  if (!env) return;
  jobject o = take_once(env, ud);
  if (o) (*env)->CallVoidMethod(env, o, m_done, (jint)err);
  end_once(env, o);
}

/* On SIMBA_OK the term goes up with two references: the lock's and the one that
 * keeps a released LockTerm's accessors answering (see LockTerm). */
void tr_locked_once(void *ud, int err, simba_term_t *term) {
  JNIEnv *env = get_env();
  jobject o = env ? take_once(env, ud) : NULL;
  if (!o) {
    simba_term_release(term);
    end_once(env, o);
    return;
  }
  if (err == SIMBA_OK) simba_term_retain(term);
  (*env)->CallVoidMethod(env, o, m_locked, (jint)err, (jlong)(intptr_t)term);
  end_once(env, o);
}

/* A permit's outcome (1.5): as tr_locked_once, but a refused size (SIMBA_ESTATE)
 * goes up with simba_last_error(), which says the size the name has. */
void tr_permit_once(void *ud, int err, simba_term_t *term) {
  if (err != SIMBA_ESTATE) {
    tr_locked_once(ud, err, term);
    return;
  }
  JNIEnv *env = get_env();
  if (!env) return;
  jobject o = take_once(env, ud);
  if (o) (*env)->CallVoidMethod(env, o, m_refused, (jint)err, new_jstr(env, simba_last_error()));
  end_once(env, o);
}

void tr_work(void *ud, simba_term_t *term) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  (*env)->CallVoidMethod(env, (jobject)ud, m_work, (jlong)(intptr_t)term);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

void tr_observed(void *ud, const char *name, const char *session, const char *client,
                 uint64_t token) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  jstring n = new_jstr(env, name);
  jstring s = new_jstr(env, session);
  jstring c = new_jstr(env, client);
  if (!(*env)->ExceptionCheck(env))
    (*env)->CallVoidMethod(env, (jobject)ud, m_observed, n, s, c, (jlong)token);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  jstring s = new_jstr(env, detail ? detail : "{}");
  if (s) (*env)->CallVoidMethod(env, (jobject)ud, m_event, (jint)type, s);
  clear_pending(env);
  (*env)->PopLocalFrame(env, NULL);
}

static void tr_log(void *ud, int level, const char *msg) {
  JNIEnv *env = get_env();
  if (!env || (*env)->PushLocalFrame(env, 8) != 0) return;
  jstring s = new_jstr(env, msg ? msg : "");
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
    jstr_t ks, vs;
    if (jstr_get(env, k, "config key", &ks) == 0) {
      char what[160];
      snprintf(what, sizeof what, "config value of %.100s", ks.s);
      if (jstr_get(env, v, what, &vs) == 0) {
        rc = simba_config_set(cfg, ks.s, vs.s);
        if (rc != SIMBA_OK) throw_code(env, rc);
        jstr_free(&vs);
      }
      jstr_free(&ks);
    }
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
  jstr_t u;
  if (jstr_get(env, url, "backend URL", &u) != 0) return 0;
  jclient_t *jc = calloc(1, sizeof *jc);
  simba_config_t *cfg = jc ? make_config(env, kv) : NULL;
  if (!cfg) {
    if (!jc) throw_msg(env, SIMBA_ENOMEM, "out of memory");
    free(jc);
    jstr_free(&u);
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
  int rc = simba_client_open(&jc->c, u.s, cfg);
  if (rc != SIMBA_OK) throw_code(env, rc);
  jstr_free(&u);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) {
    free_client_refs(env, jc);
    return 0;
  }
  return (jlong)(intptr_t)jc;
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
  if (cc->done) {
    jobject o = take_once(env, cc->done);
    if (o) (*env)->CallVoidMethod(env, o, m_done, (jint)err);
    end_once(env, o);
  }
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
    throw_msg(env, SIMBA_ENOMEM, "out of memory");
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

/* A library-allocated string as a Java string (freed here); NULL throws its error. */
static jstring owned_jstr(JNIEnv *env, char *s, int code_if_null) {
  if (!s) {
    throw_code(env, code_if_null);
    return NULL;
  }
  jstring r = new_jstr(env, s);
  simba_free(s);
  return r;
}

/* kind 0: the snapshot JSON, 1: the metrics text. */
JNIEXPORT jstring JNICALL Java_io_simba_Native_clientText(JNIEnv *env, jclass cls, jlong h,
                                                          jint kind) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  char *s = kind == 0 ? simba_client_snapshot_json(jc->c) : simba_client_metrics_text(jc->c);
  return owned_jstr(env, s, SIMBA_ECLOSED);
}

JNIEXPORT jstring JNICALL Java_io_simba_Native_clientInspect(JNIEnv *env, jclass cls, jlong h,
                                                             jobjectArray names, jlong ms) {
  (void)cls;
  jclient_t *jc = (jclient_t *)(intptr_t)h;
  jsize n = names ? (*env)->GetArrayLength(env, names) : 0;
  const char **cn = n ? calloc((size_t)n, sizeof *cn) : NULL;
  jstr_t *js = n ? calloc((size_t)n, sizeof *js) : NULL;
  jstring result = NULL;
  jsize got = 0;
  if (n && (!cn || !js)) {
    throw_msg(env, SIMBA_ENOMEM, "out of memory");
    goto out;
  }
  for (; got < n; got++) {
    jstring s = (jstring)(*env)->GetObjectArrayElement(env, names, got);
    int rc = jstr_get(env, s, "inspected lease name", &js[got]);
    (*env)->DeleteLocalRef(env, s);
    if (rc != 0) goto out;
    cn[got] = js[got].s;
  }
  char *json = NULL;
  int rc = simba_client_inspect_json(jc->c, cn, (size_t)n, ms, &json);
  if (rc != SIMBA_OK) {
    throw_code(env, rc);
    goto out;
  }
  result = owned_jstr(env, json, SIMBA_ENOMEM);
out:
  for (jsize i = 0; i < got; i++) jstr_free(&js[i]);
  free(cn);
  free(js);
  return result;
}

/* ---------------------------------------------------------------- library facts */

JNIEXPORT jstring JNICALL Java_io_simba_Native_version(JNIEnv *env, jclass cls) {
  (void)cls;
  return new_jstr(env, simba_version_string());
}

JNIEXPORT jint JNICALL Java_io_simba_Native_versionNumber(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)simba_version();
}

/* The library's name of a value. kind 0: error code, 1: session status, 2: event,
 * 3: revoke reason, 4: simba_strerror's text of a code. */
JNIEXPORT jstring JNICALL Java_io_simba_Native_name(JNIEnv *env, jclass cls, jint kind, jint v) {
  (void)cls;
  const char *s;
  switch (kind) {
    case 0:
      s = simba_code_name(v);
      break;
    case 1:
      s = simba_session_status_name((simba_session_status_t)v);
      break;
    case 2:
      s = simba_event_name((simba_event_type_t)v);
      break;
    case 3:
      s = simba_revoke_reason_name((simba_revoke_reason_t)v);
      break;
    case 5:
      s = simba_term_kind_name((simba_term_kind_t)v);
      break;
    default:
      s = simba_strerror(v);
      break;
  }
  return new_jstr(env, s);
}

/* The library's lease-name rule on the name's bytes (a NUL inside is refused by it). */
JNIEXPORT void JNICALL Java_io_simba_Native_leaseNameCheck(JNIEnv *env, jclass cls, jstring name) {
  (void)cls;
  if (!name) {
    throw_msg(env, SIMBA_EINVAL, "lease name is null");
    return;
  }
  /* Encoded without jstr_get's NUL check: the library names the rule itself. */
  jsize n = (*env)->GetStringLength(env, name);
  jsize bytes = (*env)->GetStringUTFLength(env, name);
  char *buf = malloc((size_t)bytes + 1);
  if (!buf) {
    throw_msg(env, SIMBA_ENOMEM, "out of memory");
    return;
  }
  (*env)->GetStringUTFRegion(env, name, 0, n, buf);
  /* Modified UTF-8 writes U+0000 as C0 80: give the library the real NUL byte. */
  size_t k = 0;
  for (jsize i = 0; i < bytes; i++) {
    if ((unsigned char)buf[i] == 0xC0 && i + 1 < bytes && (unsigned char)buf[i + 1] == 0x80) {
      buf[k++] = 0;
      i++;
    } else {
      buf[k++] = buf[i];
    }
  }
  int rc = simba_lease_name_check(buf, k);
  if (rc != SIMBA_OK) throw_code(env, rc);
  free(buf);
}

JNIEXPORT jstring JNICALL Java_io_simba_Native_backendSchema(JNIEnv *env, jclass cls, jstring url) {
  (void)cls;
  jstr_t u;
  if (jstr_get(env, url, "backend URL", &u) != 0) return NULL;
  char *text = NULL;
  int rc = simba_backend_schema(u.s, &text);
  jstring r = rc == SIMBA_OK ? owned_jstr(env, text, SIMBA_ENOMEM) : NULL;
  if (rc != SIMBA_OK) throw_code(env, rc);
  jstr_free(&u);
  return r;
}
