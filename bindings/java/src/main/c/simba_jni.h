/*
 * What the two C files of the Java binding's JNI glue share: simba_jni.c (the
 * runtime: loading, threads, references, errors, strings, the trampolines,
 * config and the client) and simba_jni_handles.c (elections, tasks, observers,
 * locks and terms). The lifetime contract is stated at the top of simba_jni.c.
 */
#ifndef SIMBA_JNI_H
#define SIMBA_JNI_H

#include <jni.h>
#include <stddef.h>

#include "simba.h"

typedef struct {
  simba_client_t *c;
  jobject executor; /* global: ctx of the host executor, or NULL (the library's pool) */
  jobject sink;     /* global: io.simba.Upcall for events, or NULL */
  jobject logger;   /* global: logger object, or NULL */
} jclient_t;

/* The JNIEnv of this thread (a library thread is attached once), or NULL. */
JNIEnv *get_env(void);
/* A global reference to `o` (NULL for NULL), counted for Native.liveRefs. */
jobject new_ref(JNIEnv *env, jobject o);
void del_ref(JNIEnv *env, jobject r);
/* Throws the Java exception of `code` with simba_last_error's detail (read now). */
void throw_code(JNIEnv *env, int code);
/* Throws the Java exception of `code` with `msg`. */
void throw_msg(JNIEnv *env, int code, const char *msg);

/* A Java string as the library wants it: real UTF-8 (JNI's GetStringUTFChars gives
 * modified UTF-8: U+0000 as C0 80, a supplementary character as two surrogates),
 * NUL-terminated. Short strings (every lease name) need no allocation. */
typedef struct {
  char *s;
  size_t len; /* bytes, without the terminator */
  char buf[400];
} jstr_t;

/* Fills `out` from `js`; 0, or -1 with an exception pending: NullPointerException
 * for null, IllegalArgumentException "WHAT contains a NUL byte at index N" for an
 * embedded U+0000 (a C string would end there). jstr_free() it after 0. */
int jstr_get(JNIEnv *env, jstring js, const char *what, jstr_t *out);
void jstr_free(jstr_t *s);
/* A Java string from the library's UTF-8 (NULL gives NULL). */
jstring new_jstr(JNIEnv *env, const char *utf8);

/* Trampolines from the library's callbacks into Java (their user data is a
 * global reference; the *_once ones free it after their one call). */
void tr_elected(void *ud, simba_term_t *term);
void tr_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason);
void tr_revoked_once(void *ud, simba_term_t *term, simba_revoke_reason_t reason);
void tr_work(void *ud, simba_term_t *term);
void tr_done_once(void *ud, int err);
void tr_locked_once(void *ud, int err, simba_term_t *term);
void tr_permit_once(void *ud, int err, simba_term_t *term);
void tr_observed(void *ud, const char *name, const char *session, const char *client,
                 uint64_t token);

#endif
