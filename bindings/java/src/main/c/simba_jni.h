/*
 * What the two C files of the Java binding's JNI glue share: simba_jni.c (the
 * runtime: loading, threads, references, errors, the trampolines, config and
 * the client) and simba_jni_handles.c (elections, tasks, locks and terms).
 * The lifetime contract is stated at the top of simba_jni.c.
 */
#ifndef SIMBA_JNI_H
#define SIMBA_JNI_H

#include <jni.h>

#include "simba.h"

typedef struct {
  simba_client_t *c;
  jobject executor; /* global: ctx of the host executor, or NULL (the library's pool) */
  jobject sink;     /* global: io.simba.Upcall for events, or NULL */
  jobject logger;   /* global: logger object, or NULL */
} jclient_t;

/* A global reference to `o` (NULL for NULL), counted for Native.liveRefs. */
jobject new_ref(JNIEnv *env, jobject o);
void del_ref(JNIEnv *env, jobject r);
/* Throws the Java exception of `code` with simba_last_error's detail. */
void throw_code(JNIEnv *env, int code);
/* `s` as modified UTF-8 (release with ReleaseStringUTFChars); NULL and a
 * NullPointerException for a null string. */
const char *utf(JNIEnv *env, jstring s);

/* Trampolines from the library's callbacks into Java (their user data is a
 * global reference; the *_once ones free it after their one call). */
void tr_elected(void *ud, simba_term_t *term);
void tr_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason);
void tr_revoked_once(void *ud, simba_term_t *term, simba_revoke_reason_t reason);
void tr_work(void *ud, simba_term_t *term);
void tr_done_once(void *ud, int err);
void tr_locked_once(void *ud, int err, simba_term_t *term);

#endif
