/**
 * @file simba.h
 * @brief Simba: distributed leases and leader election, C ABI.
 *
 * This header is the specification of libsimba. The behaviour it promises is
 * described in docs/concepts.md; every function below states its arguments,
 * every code it returns, who owns what it returns, and which threads may call it.
 *
 * @par The model
 * A client (one per process) opens one session on a backend and keeps it alive
 * with one keep-alive per renew interval. Through elections and locks it leases
 * names; each period of ownership of a name is a term (simba_term_t) with a
 * fencing token, a validity computed from this process's monotonic clock, and
 * exactly one revocation with a reason.
 *
 * @par Threading
 * Unless a block says otherwise, every function may be called from any thread.
 * A client runs its engine on one event loop: in THREAD mode (the default) on a
 * thread of its own; in EXTERNAL mode on the host's thread, inside
 * simba_client_process(). Term accessors (simba_term_is_valid(), ...) never take
 * a lock and never need the loop to run. In THREAD mode, a call that waits for
 * the backend (simba_lock_acquire(), simba_lock_release(), simba_client_wait_live(),
 * simba_client_inspect_json(), ...) runs the loop on the calling thread while the
 * loop thread is idle, which spares two thread wake-ups per call; callbacks of
 * the "direct" executor, the logger and a host executor's submit() still run on
 * the loop thread only (a caller that took in an answer leading to one hands it
 * to the loop thread; since 1.3 this holds for clients with a host executor too).
 *
 * Callbacks of one election (or lock) run one at a time, in order, on the
 * callback executor: a small pool owned by the client by default, the loop thread
 * with "callback.executor" = "direct", or the host's own executor
 * (simba_config_set_executor()). No internal lock is held while a callback runs.
 * A callback never runs inside the call that registered it, and none runs after
 * the stop or close of its object has completed.
 *
 * Blocking functions (simba_client_wait_live(), simba_election_stop_wait(),
 * simba_lock_acquire(), simba_lock_try_acquire()) return SIMBA_EWOULDBLOCK when
 * called from a callback or on the loop thread, where waiting would wait for
 * itself. simba_client_close() called there starts the close and returns.
 *
 * @par Lifetime: when callbacks stop (docs/bindings-contract.md)
 * User data (`ud`) may be freed once nothing can call it again:
 * - an election's listener: after the `done` of its simba_election_stop() ran
 *   (done is its last callback), or after simba_election_free() returned on a
 *   thread that was not running a callback or leader work (it waits for the stop
 *   and for a callback of the election running elsewhere);
 * - a task's work and dones: after simba_task_close() returned outside callbacks
 *   and leader work, or after the `done` of simba_task_stop() ran;
 * - a simba_term_on_revoked() callback, a simba_lock_acquire_async() callback:
 *   each runs exactly once, so free its `ud` inside it; a lock's on_revoked
 *   callbacks have all run when simba_lock_release() returns (where it waits);
 * - everything of a client (event sink, logger, host executor included): after
 *   simba_client_close() returned outside callbacks, or inside the `done` of
 *   simba_client_close_async(), which runs after every other callback returned.
 * - any handle closed with its *_close_async() (1.4): inside that close's `done`,
 *   the handle's last callback.
 * A host executor's submit() is never called after simba_client_close()
 * returned; tasks it had not started by then were run on the closing thread,
 * and its later run(arg) of them only frees them.
 *
 * @par One close for every handle (1.4, version node SIMBA_1.4)
 * simba_election_close_async(), simba_task_close_async(),
 * simba_observer_close_async() and simba_term_close_async() share the shape of
 * simba_client_close_async(): `int X_close_async(X *h, simba_done_fn done, void *ud)`.
 * - They may be called from any thread, from any callback of the library (the
 *   handle's own included), from leader work and from the loop thread; on an
 *   EXTERNAL-mode client from its callbacks and from other threads as well.
 *   They never block: they wait neither for the backend, nor for the loop, nor
 *   for a callback.
 * - The handle's listener (on_elected/on_revoked, an observer's function) is
 *   detached at once: none of its calls starts after the close returns; a call
 *   already running on another thread finishes first. The dones of a stop or
 *   step-down asked for before the close still run, once each, and on_revoked
 *   callbacks registered on the handle's terms run once each, as always.
 * - On SIMBA_OK, `done(ud, SIMBA_OK)` (done may be NULL) runs exactly once, never
 *   inside the call, on the callback executor (in EXTERNAL mode without a host
 *   executor: inside simba_client_process() on the host thread), after every
 *   other callback of the handle returned: it is the handle's last callback, so
 *   every `ud` the handle was given may be freed inside it. The library then
 *   frees the handle (for a term: drops the caller's reference); do not use the
 *   handle after the call. The handle's reference to its client is dropped there
 *   too, which is never the client's last while its close is pending.
 * - A close asked for before simba_client_close() has its done run before
 *   simba_client_close() returns, except a task's: it also waits for the task's
 *   work (and a group's own thread), which the client's close does not wait for.
 *   A done that falls due after the client's close completed (its callback
 *   executor is gone) runs on a thread of the library instead.
 * - A handle is closed once: closing it again, or also with its older free
 *   function (simba_election_free(), simba_task_close(), simba_observer_free(),
 *   simba_lock_release()/simba_term_release() for the same reference), is a
 *   double free.
 * Bindings close every handle this way, from close() and from finalizers alike
 * (docs/bindings-contract.md). Check simba_version() >= 0x010400 before calling
 * them on a libsimba.so.1 loaded with dlopen().
 *
 * @par Ownership
 * The library never frees memory it did not allocate. Strings it returns as
 * `char *` are owned by the caller and freed with simba_free(); `const char *`
 * results are borrowed, for as long as the block says. Handles are freed with
 * their own free/close function, each of which accepts NULL.
 *
 * @par Errors
 * Functions that can fail return SIMBA_OK (0) or a negative SIMBA_E* code, and on
 * failure set a thread-local detail message read with simba_last_error(). A
 * success leaves that message as it was (like errno): read it right after the
 * failing call, on the same thread (a binding does both in one C function).
 * Asynchronous completions carry their code in the callback. No C++ exception
 * ever crosses this interface.
 */
#ifndef SIMBA_H
#define SIMBA_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SIMBA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define SIMBA_API __attribute__((visibility("default")))
#else
#define SIMBA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/** @name Version and errors */
/** @{ */

#define SIMBA_VERSION_MAJOR 1 /**< Bumped only on an ABI break. */
#define SIMBA_VERSION_MINOR 5 /**< Bumped when functions are added. */
#define SIMBA_VERSION_PATCH 0 /**< Bumped for fixes. */

/** Error codes. Pinned to their values; new codes are only ever appended. */
enum {
  SIMBA_OK = 0,             /**< Success. */
  SIMBA_EINVAL = -1,        /**< Bad argument: NULL, lease name, URL, config rule. */
  SIMBA_ESTATE = -2,        /**< Not allowed now: already started, already stopped. */
  SIMBA_EEXPIRED = -3,      /**< Term not valid, or not valid for long enough. */
  SIMBA_ETIMEDOUT = -4,     /**< The timeout passed before the operation completed. */
  SIMBA_EBACKEND = -5,      /**< Backend unreachable or answered an error. */
  SIMBA_ECLOSED = -6,       /**< The client is closed or closing. */
  SIMBA_ENOMEM = -7,        /**< Out of memory. */
  SIMBA_EWOULDBLOCK = -8,   /**< A blocking call from a callback or the loop thread. */
  SIMBA_EBUSY = -9,         /**< Try-lock: the lease is held by someone else. */
  SIMBA_EUNSUPPORTED = -10, /**< URL scheme or feature not built in. */
  SIMBA_ECANCELED = -11     /**< An asynchronous call was cancelled by stop or close. */
};

/**
 * @brief Version of the loaded library.
 * @return (major << 16) | (minor << 8) | patch; compare with the SIMBA_VERSION_* macros
 *         to check that the header and the library agree.
 */
SIMBA_API unsigned simba_version(void);

/**
 * @brief Version as "major.minor.patch"; a static string, never NULL.
 * @return "major.minor.patch", a static string, never NULL.
 */
SIMBA_API const char *simba_version_string(void);

/**
 * @brief Static text describing an error code.
 * @param[in] err a SIMBA_E* code (or SIMBA_OK).
 * @return a static string, never NULL ("unknown error" for an unknown code).
 */
SIMBA_API const char *simba_strerror(int err);

/**
 * @brief Detail of this thread's last failed call.
 *
 * Set by every call that fails, on the calling thread only; a call that succeeds
 * leaves it unchanged, so it says nothing about whether the last call failed
 * (its return code does).
 * @return a thread-local string, never NULL (empty when nothing failed yet), valid
 *         until the next simba_* call on this thread. It includes the backend's own
 *         words where it answered an error. Passwords never appear in it.
 */
SIMBA_API const char *simba_last_error(void);

/**
 * @brief Free memory the library returned as `char *`. NULL is a no-op.
 * @param[in] p memory the library returned, or NULL.
 */
SIMBA_API void simba_free(void *p);

/**
 * @brief The name of an error code, as its macro without the prefix (1.3):
 *        "OK", "EINVAL", "EBUSY", ...
 *
 * Bindings, tools and host modules take their names from here rather than keep
 * tables of their own, so a code a newer library appends has its name too.
 * @param[in] err a SIMBA_E* code (or SIMBA_OK).
 * @return a static string, never NULL; "UNKNOWN" for a value this library does not
 *         define.
 */
SIMBA_API const char *simba_code_name(int err);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Configuration
 * The seed's SimbaConfig. Keys mirror the simba.session.* properties:
 *
 * | key                      | default              | value                                    |
 * |--------------------------|----------------------|------------------------------------------|
 * | session.lease-duration   | 15s                  | the backend expires a session this long after its last keep-alive |
 * | session.renew-interval   | lease-duration / 3   | keep-alive period                        |
 * | session.drift            | 0.01                 | clock rate bound, in [0, 0.5)            |
 * | session.margin           | 50ms                 | subtracted from every deadline           |
 * | session.retry-jitter     | renew-interval / 2   | candidates retry after renew-interval / 2 + random [0, jitter) |
 * | session.min-backoff      | 100ms                | least backoff after a failed keep-alive  |
 * | callback.executor        | pool                 | "pool", "direct" (on the loop thread)    |
 * | callback.threads         | 2                    | pool size, 1..64                         |
 * | loop.mode                | thread               | "thread" or "external"                   |
 * | client.name              | (empty)              | shown in snapshots and backend status    |
 *
 * renew-interval and retry-jitter follow lease-duration (and renew-interval)
 * while they are not set explicitly. Durations accept the suffixes "ms", "s" and
 * "m" (a bare number is milliseconds). A config is a plain value: it is not
 * thread-safe; a client copies it at simba_client_open().
 */
/** @{ */

/** Opaque configuration (SimbaConfig.builder()). */
typedef struct simba_config simba_config_t;

/**
 * @brief Create a configuration holding the seed's defaults.
 * @param[out] out the new configuration; free with simba_config_free().
 * @return SIMBA_OK, SIMBA_EINVAL (out is NULL), SIMBA_ENOMEM.
 */
SIMBA_API int simba_config_new(simba_config_t **out);

/**
 * @brief Copy a configuration (toBuilder()): the copy is independent of @p c.
 * @param[out] out the copy; free with simba_config_free().
 * @param[in] c the configuration to copy.
 * @return SIMBA_OK, SIMBA_EINVAL (NULL argument), SIMBA_ENOMEM.
 */
SIMBA_API int simba_config_copy(simba_config_t **out, const simba_config_t *c);

/**
 * @brief Free a configuration. NULL is a no-op.
 * @param[in] c the configuration.
 */
SIMBA_API void simba_config_free(simba_config_t *c);

/**
 * @brief Set a key from text ("15s", "0.01", "pool", ...).
 * @param[in] c the configuration.
 * @param[in] key a configuration key of this header (e.g. "session.lease-duration").
 * @param[in] value the value, as text.
 * @return SIMBA_OK; SIMBA_EINVAL for a NULL argument, an unknown key or a bad
 *         value (the detail names which). Cross-field rules are checked by
 *         simba_config_validate() and simba_client_open(), not here.
 */
SIMBA_API int simba_config_set(simba_config_t *c, const char *key, const char *value);

/**
 * @brief Set a duration key in milliseconds.
 * @param[in] c the configuration.
 * @param[in] key a configuration key of this header (e.g. "session.lease-duration").
 * @param[in] ms the value, in milliseconds.
 * @return SIMBA_OK; SIMBA_EINVAL for a NULL argument, a key that is not a duration,
 *         or a negative value.
 */
SIMBA_API int simba_config_set_ms(simba_config_t *c, const char *key, int64_t ms);

/**
 * @brief Read a duration key in milliseconds, derived defaults included.
 * @param[out] out_ms the value.
 * @param[in] c the configuration.
 * @param[in] key a configuration key of this header (e.g. "session.lease-duration").
 * @return SIMBA_OK; SIMBA_EINVAL for a NULL argument or a key that is not a duration.
 */
SIMBA_API int simba_config_get_ms(const simba_config_t *c, const char *key, int64_t *out_ms);

/**
 * @brief Read a numeric key that is not a duration ("session.drift", "callback.threads").
 * @param[out] out the value.
 * @param[in] c the configuration.
 * @param[in] key a configuration key of this header (e.g. "session.lease-duration").
 * @return SIMBA_OK; SIMBA_EINVAL for a NULL argument or another key.
 */
SIMBA_API int simba_config_get_double(const simba_config_t *c, const char *key, double *out);

/**
 * @brief A host's executor for callbacks.
 *
 * The library calls `submit(ctx, run, arg)` from its loop thread, and in two
 * cases from another thread: simba_term_on_revoked() on a term already revoked
 * submits from the calling thread, and a partition group submits its stop and
 * step-down completions from its own thread and a last task from the thread
 * that closes it. The host must call `run(arg)` exactly once, later, on a thread
 * of its choice, and return 0. A
 * nonzero return means the executor rejected the task: run will not be called.
 * If the executor rejects an on_elected callback, nobody learns of the term: the
 * election steps down for one lease duration and that term's on_revoked is not
 * delivered either.
 */
typedef int (*simba_submit_fn)(void *ctx, void (*run)(void *arg), void *arg);

/**
 * @brief Use a host's executor for callbacks ("callback.executor" becomes "host").
 * @param[in] submit the executor; NULL restores the default pool.
 * @param[in] ctx passed to every submit call.
 * @param[in] c the configuration.
 * @return SIMBA_OK, SIMBA_EINVAL (c is NULL).
 */
SIMBA_API int simba_config_set_executor(simba_config_t *c, simba_submit_fn submit, void *ctx);

/** Log levels for simba_config_set_logger(). */
enum { SIMBA_LOG_DEBUG = 0, SIMBA_LOG_INFO = 1, SIMBA_LOG_WARN = 2, SIMBA_LOG_ERROR = 3 };

/** A log sink: @p msg is one line without newline, borrowed for the call. */
typedef void (*simba_log_fn)(void *ud, int level, const char *msg);

/**
 * @brief Send the client's log lines at or above @p min_level to @p log.
 *
 * The sink is called from the loop thread and must not block. Without a logger,
 * nothing is logged. Passwords never appear in log lines.
 * @param[in] c the configuration.
 * @param[in] log the sink, called with each line.
 * @param[in] ud user data, passed as is to the callback.
 * @param[in] min_level the least level sent to @p log.
 * @return SIMBA_OK; SIMBA_EINVAL (c is NULL or min_level out of range).
 */
SIMBA_API int simba_config_set_logger(simba_config_t *c, simba_log_fn log, void *ud, int min_level);

/**
 * @brief Check the seed's rules: renew-interval × 2 ≤ lease-duration, and
 *        lease-duration × (1 − drift) − margin > renew-interval; drift in [0, 0.5);
 *        lease-duration, renew-interval and min-backoff positive; margin and
 *        retry-jitter may be 0.
 * @param[in] c the configuration.
 * @return SIMBA_OK, or SIMBA_EINVAL with a detail naming the rule that failed.
 */
SIMBA_API int simba_config_validate(const simba_config_t *c);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Client and session */
/** @{ */

/** Opaque client: one session on one backend. */
typedef struct simba_client simba_client_t;

/** Session status (snapshot().session.status). */
typedef enum {
  SIMBA_SESSION_OPENING = 0,   /**< No session yet, or a new one after the last ended. */
  SIMBA_SESSION_LIVE = 1,      /**< The last keep-alive succeeded. */
  SIMBA_SESSION_SUSPENDED = 2, /**< The last keep-alive failed; the deadline has not passed. */
  SIMBA_SESSION_CLOSED = 3     /**< Closed, or the handle is NULL. */
} simba_session_status_t;

/**
 * @brief Open a client on a backend.
 *
 * Returns at once; the session opens in the background (status OPENING).
 * URLs: "memory://NAME" (in-process; clients of one process on the same NAME share
 * one store), "redis://[user:pass@]host:port[/db][?prefix=simba]",
 * "postgresql://...", "zookeeper://host:port[,...]/chroot", each when built in.
 * @param[out] out the client; close with simba_client_close().
 * @param[in] backend_url the backend.
 * @param[in] cfg configuration, copied; NULL for the defaults.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL out or URL, malformed URL, config rule);
 *         SIMBA_EUNSUPPORTED (scheme not built in); SIMBA_ENOMEM; SIMBA_EBACKEND
 *         (the loop could not start).
 */
SIMBA_API int simba_client_open(simba_client_t **out, const char *backend_url,
                                const simba_config_t *cfg);

/**
 * @brief Wait until the session is LIVE.
 * @param[in] timeout_ms how long to wait; 0 checks without waiting; negative waits
 *            without bound.
 * @param[in] c the client.
 * @return SIMBA_OK; SIMBA_ETIMEDOUT; SIMBA_ECLOSED; SIMBA_EINVAL (c is NULL);
 *         SIMBA_EWOULDBLOCK (from a callback or the loop thread).
 */
SIMBA_API int simba_client_wait_live(simba_client_t *c, int64_t timeout_ms);

/**
 * @brief Close the client: stop every election and lock (terms revoked with
 *        STOPPED, in handover order), close the session (the backend frees every
 *        lease at once), stop the loop and free the handle.
 *
 * Blocks until done. A close that fails (a connection just cut, a reconnect
 * backoff, no answer within the call's timeout) is sent again with backoff
 * until the session's local deadline, so that the leases free as soon as the
 * backend answers rather than at the session's expiry: against a backend that
 * does not answer, it blocks until that deadline (at most the lease duration
 * after the last successful keep-alive). A client whose session never went
 * live, or already ended, closes at once. After it returns, no callback of
 * this client or of any of its handles runs or is running (callbacks a host
 * executor had not started run on this thread before it returns). An
 * EXTERNAL-mode client is closed on its host thread: from another thread this
 * returns SIMBA_EWOULDBLOCK and closes nothing, since only the host thread may
 * run its loop. Called from a callback (or the loop thread) of a THREAD-mode
 * client it starts the close and returns SIMBA_OK at once; the handle is freed
 * when the close completes, so do not use it afterwards. Called from a callback
 * of an EXTERNAL-mode client it starts the close and returns SIMBA_EWOULDBLOCK:
 * call it again outside simba_client_process() to finish and free. Election
 * handles of the client stay valid until freed, but are stopped; lock terms are
 * revoked.
 * @param[in] c the client.
 * @return SIMBA_OK (also for NULL); SIMBA_EWOULDBLOCK (see above).
 */
SIMBA_API int simba_client_close(simba_client_t *c);

/**
 * @brief Close a client without waiting, from any thread, a callback or a
 *        finalizer included (an EXTERNAL-mode client: from its host thread):
 *        what simba_client_close() does, then `done(ud, err)`, the client's last
 *        callback, after every other callback of the client returned.
 *
 * THREAD mode: a thread of the library closes the client, calls
 * `done(ud, SIMBA_OK)` on that thread (always SIMBA_OK, whatever the backend
 * answered), then frees the handle. Do not use the handle after this call.
 *
 * EXTERNAL mode (since 1.5): called on the host thread, outside
 * simba_client_process() or inside a callback, it starts the close and returns
 * SIMBA_OK at once; nothing of the close runs inside this call. The host keeps
 * calling simba_client_process() on fd readiness and at
 * simba_client_timeout_ms(); `done` runs inside the call of
 * simba_client_process() in which the close completed, which then returns
 * SIMBA_ECLOSED (as every later call does). `err` says whether the backend
 * confirmed it: SIMBA_OK (the leases are free now; also when the session had
 * never gone live or had ended already), SIMBA_ETIMEDOUT (no answer confirmed
 * it by the session's local deadline, the close being sent again until then:
 * its leases free when the session expires on the backend), SIMBA_EBACKEND
 * (the backend refused it; the same). Then free the handle with
 * simba_client_close() outside simba_client_process() (it returns at once);
 * inside `done` it returns SIMBA_EWOULDBLOCK and frees nothing. A
 * simba_client_close() on the host thread before `done` ran finishes the close
 * blocking and runs `done` before it returns. From another thread this
 * returns SIMBA_EWOULDBLOCK and closes nothing, as simba_client_close() does.
 * Before 1.5 it returned SIMBA_EINVAL for every EXTERNAL-mode client: check
 * simba_version() >= 0x010500 when loading libsimba.so.1 with dlopen().
 *
 * Added in 1.2 (version node SIMBA_1.2): check simba_version() >= 0x010200 when
 * loading libsimba.so.1 with dlopen().
 * @param[in] done may be NULL; the client's last callback.
 * @param[in] c the client.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (done will run); SIMBA_EINVAL (c is NULL); SIMBA_EWOULDBLOCK
 *         (an EXTERNAL-mode client, off its host thread: nothing was closed);
 *         SIMBA_ECLOSED (an EXTERNAL-mode client whose simba_client_close_async()
 *         was called already).
 */
SIMBA_API int simba_client_close_async(simba_client_t *c, void (*done)(void *ud, int err), void *ud);

/**
 * @brief Current session status; SIMBA_SESSION_CLOSED for NULL. Never blocks.
 * @param[in] c the client.
 * @return the session status; SIMBA_SESSION_CLOSED for NULL.
 */
SIMBA_API simba_session_status_t simba_client_status(const simba_client_t *c);

/**
 * @brief The name of a session status, as its constant without the prefix (1.3):
 *        "OPENING", "LIVE", "SUSPENDED", "CLOSED".
 * @param[in] s a session status.
 * @return a static string, never NULL; "UNKNOWN" for a value this library does not
 *         define.
 */
SIMBA_API const char *simba_session_status_name(simba_session_status_t s);

/**
 * @brief A JSON snapshot: session (id, status, remaining_ms, renew_period_ms,
 *        lease_shortened), every election and lock (name, state, token,
 *        remaining_ms), and counters (keep_alives, acquires, releases, ...).
 * @param[in] c the client.
 * @return a string to free with simba_free(), or NULL (c is NULL, out of memory,
 *         client closed; see simba_last_error()). Never blocks on the backend.
 */
SIMBA_API char *simba_client_snapshot_json(simba_client_t *c);

/**
 * @brief What the backend holds, for operators (`simba status`): one read of
 *        the backend, outside the session, that decides nothing and may be
 *        stale by the time it returns.
 *
 * The JSON has "backend" (the URL, password hidden), "sessions": every live
 * session as {"id", "client" (its client.name), "remaining_ms", "own" (true for
 * this client's)}, and "leases", sorted by name: {"name", "token" (the last
 * granted, 0 if never), "holder" (a session id, or null when free),
 * "holder_client" and "remaining_ms" (the holder's) when known}. Since 1.5 a
 * name's permit entries follow its lease row, one row each, with "kind"
 * ("semaphore", "read", "write" or "intent", a waiting writer's) and "permit"
 * (the entry's id); "token" is the permit's (docs/fencing.md).
 *
 * @param names    lease names to report; NULL (with n_names 0) for every lease
 *                 the backend knows (on Redis a SCAN of the prefix: name the
 *                 leases on a big server)
 * @param timeout_ms how long to wait for the backend, > 0
 * @param out_json on SIMBA_OK, a string to free with simba_free()
 * @param[in] c the client.
 * @param[in] n_names how many names @p names holds.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL c or out_json, NULL names with n_names
 *         > 0, a bad lease name, timeout_ms <= 0); SIMBA_ETIMEDOUT;
 *         SIMBA_EBACKEND (unreachable or an error answer); SIMBA_ECLOSED;
 *         SIMBA_EWOULDBLOCK (from a callback or the loop thread).
 */
SIMBA_API int simba_client_inspect_json(simba_client_t *c, const char *const *names,
                                        size_t n_names, int64_t timeout_ms, char **out_json);

/**
 * @brief The client's metrics in the Prometheus text exposition format (0.0.4),
 *        for a scrape endpoint (`simba run --listen`) or a host's own (1.2).
 *
 * Counters (`_total`): sessions opened, keep-alives sent and failed, acquires,
 * terms won, revocations by reason (label `reason`), releases; histograms
 * (`_seconds`): keep-alive round trip, remaining session validity when a
 * keep-alive is answered, handover time (revocation to release answered);
 * gauges: session state (label `state`, 1 for the current one), leases held.
 * Every series carries the label `client` (client.name). The same values are in
 * simba_client_snapshot_json() under "metrics".
 * @param[in] c the client.
 * @return a string to free with simba_free(), or NULL (c is NULL, out of memory,
 *         client closed; see simba_last_error()). Never blocks on the backend.
 */
SIMBA_API char *simba_client_metrics_text(simba_client_t *c);

/** An observer of a name's holder (simba_observe_start()). */
typedef struct simba_observer simba_observer_t;

/**
 * Called with each change of an observed name's holder: @p holder_session is the
 * holding session's id, NULL when the name is free; @p holder_client its
 * client.name (NULL when free or unknown); @p token the holder's token (the last
 * one granted when free, 0 if never). Strings are borrowed for the call.
 */
typedef void (*simba_observe_fn)(void *ud, const char *name, const char *holder_session,
                                 const char *holder_client, uint64_t token);

/**
 * @brief Follow who holds @p name without contending for it (1.2).
 *
 * @p fn runs once with the state at the start, then on every change (another
 * holder, another token, free), on the callback executor, one call at a time,
 * in order, like a listener. Changes are read from the backend: at once after a
 * release broadcast (Redis, PostgreSQL and memory:// broadcast every release;
 * ZooKeeper those of names this client contends for), and by polling every
 * @p poll_ms otherwise (an acquire of a free name, an expiry): a change shows
 * within one broadcast or one poll. A read that fails is retried at the next
 * poll; the last state stays. Each read lists the live sessions too (for the
 * holder's client name): see docs/observability.md for the cost.
 * @param poll_ms how often to read; 0 for the client's renew interval; else >= 10
 * @param[out] out the observer; free it with simba_observer_free().
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @param[in] fn called with each change of holder (simba_observe_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL out, c or fn, a bad name, poll_ms < 0 or
 *         in 1..9); SIMBA_ECLOSED.
 */
SIMBA_API int simba_observe_start(simba_observer_t **out, simba_client_t *c, const char *name,
                                  int64_t poll_ms, simba_observe_fn fn, void *ud);

/**
 * @brief Stop observing and free the handle. Outside callbacks it waits until no
 *        callback of the observer runs (then @p ud may be freed); from a callback
 *        no further call starts. NULL is a no-op.
 * @param[in] o the observer.
 */
SIMBA_API void simba_observer_free(simba_observer_t *o);

/**
 * @brief Close an observer without waiting, from anywhere (the one close shape,
 *        see "One close for every handle" above).
 *
 * The observer stops reading the backend; no call of its function starts after
 * this returns (one running on another thread finishes first); then `done` runs,
 * the observer's last callback, and the handle is freed.
 *
 * Added in 1.4 (version node SIMBA_1.4): check simba_version() >= 0x010400 when
 * loading libsimba.so.1 with dlopen().
 * @param[in] o the observer; not to be used after the call.
 * @param[in] done may be NULL; the observer's last callback (a simba_done_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (done will run); SIMBA_EINVAL (o is NULL: nothing happened);
 *         SIMBA_ENOMEM (nothing happened).
 */
SIMBA_API int simba_observer_close_async(simba_observer_t *o, void (*done)(void *ud, int err),
                                         void *ud);

/** Session events for simba_client_on_event(). */
typedef enum {
  SIMBA_EVENT_SESSION_OPENED = 0,    /**< A new session id was granted. */
  SIMBA_EVENT_SESSION_LIVE = 1,      /**< A keep-alive succeeded after a failure. */
  SIMBA_EVENT_SESSION_SUSPENDED = 2, /**< A keep-alive failed. */
  SIMBA_EVENT_SESSION_EXPIRED = 3,   /**< The session ended: backend said expired, or deadline passed. */
  SIMBA_EVENT_SESSION_CLOSED = 4,    /**< The client closed its session. */
  SIMBA_EVENT_SESSION_LEASE_SHORTENED = 5 /**< The backend granted too little: renewing faster; once per session. */
} simba_event_type_t;

/** Session event sink; @p detail_json is borrowed for the call. */
typedef void (*simba_event_fn)(void *ud, simba_event_type_t type, const char *detail_json);

/**
 * @brief Receive session events, one at a time, in order, on the callback executor.
 * @param[in] fn the sink; NULL stops delivery. Replaces an earlier sink.
 * @param[in] c the client.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (c is NULL); SIMBA_ECLOSED.
 */
SIMBA_API int simba_client_on_event(simba_client_t *c, simba_event_fn fn, void *ud);

/**
 * @brief The name of a session event, as its constant without the prefix (1.3):
 *        "SESSION_OPENED", "SESSION_LIVE", "SESSION_SUSPENDED", ...
 * @param[in] type an event type.
 * @return a static string, never NULL; "UNKNOWN" for a value this library does not
 *         define (a sink should pass such an event on, not drop it).
 */
SIMBA_API const char *simba_event_name(simba_event_type_t type);

/**
 * @brief The event sink a client opened with @p cfg starts with (1.2): unlike
 *        simba_client_on_event(), it also receives the first SESSION_OPENED,
 *        which a sink set after simba_client_open() can miss. Same delivery
 *        rules; simba_client_on_event() replaces it later.
 * @param[in] fn the sink; NULL for none. @p ud must stay valid until the client
 *        is closed (or the sink replaced).
 * @param[in] cfg the configuration.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (cfg is NULL).
 */
SIMBA_API int simba_config_set_event_sink(simba_config_t *cfg, simba_event_fn fn, void *ud);

/**
 * @brief EXTERNAL mode: a file descriptor to poll for readability.
 * @param[in] c the client.
 * @return the fd, or -1 (c is NULL or not in EXTERNAL mode).
 */
SIMBA_API int simba_client_fd(const simba_client_t *c);

/**
 * @brief EXTERNAL mode: how long the host may wait before calling
 *        simba_client_process() although the fd is not readable.
 * @param[in] c the client.
 * @return milliseconds; 0 to process now; -1 when no timer is pending.
 */
SIMBA_API int64_t simba_client_timeout_ms(const simba_client_t *c);

/**
 * @brief EXTERNAL mode: run what is ready, callbacks included. Never blocks.
 *
 * In EXTERNAL mode ("loop.mode" = "external") the client has no thread: the
 * thread that opened it is the host thread, which polls simba_client_fd() and
 * calls this when the fd is readable or simba_client_timeout_ms() has passed.
 * Callbacks run inside this call on the host thread (unless a host executor is
 * set). Blocking calls made on the host thread outside this call run the loop
 * themselves until they complete; inside a callback they return SIMBA_EWOULDBLOCK.
 * Calls from other threads are queued and wake the fd, except simba_client_close()
 * and simba_client_close_async(), which only the host thread may make.
 * @param[in] c the client.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL, or not in EXTERNAL mode); SIMBA_ECLOSED
 *         (the close completed, from the call that ran simba_client_close_async()'s
 *         done on); SIMBA_EWOULDBLOCK (called from one of its own callbacks).
 */
SIMBA_API int simba_client_process(simba_client_t *c);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Backends
 * Facts about a backend that need no client and no connection.
 */
/** @{ */

/**
 * @brief The DDL the backend of @p backend_url installs, for a DBA to review and
 *        apply by hand (`simba schema`); clients then run with `create=false`.
 *
 * For "postgresql://..." (or "postgres://..."): the tables, functions and
 * version row of the schema the URL names with `schema=` (default `public`), as
 * one SQL script in BEGIN/COMMIT, the very statements a client with
 * `create=true` would run. Only the URL is parsed: nothing connects, so no
 * server is needed and no password is checked. Other backends (memory://,
 * redis://, zookeeper://) create what they need as they go and have no schema.
 *
 * Added in 1.1 (version node SIMBA_1.1): a program that may load an older
 * libsimba.so.1 through dlopen() checks simba_version() >= 0x010100 first.
 * @param[in] backend_url the backend, as for simba_client_open().
 * @param[out] out_text on SIMBA_OK, the script (UTF-8, ends with a newline), to
 *             free with simba_free(); NULL on failure.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL out_text or URL, a URL without a scheme,
 *         a malformed postgresql URL: bad port, unknown libpq parameter, bad
 *         `schema`); SIMBA_EUNSUPPORTED (a backend that has no schema, an unknown
 *         scheme, or postgresql:// not built in); SIMBA_ENOMEM. The detail never
 *         contains a password. Any thread; never blocks.
 */
SIMBA_API int simba_backend_schema(const char *backend_url, char **out_text);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Terms
 * A term is one period during which this node owns a lease. Its accessors are
 * pure functions of the monotonic clock and the session's local deadline: they
 * take no lock and need no loop turn, so a process that wakes from a long pause
 * reads "invalid" first. Once any thread has seen a term invalid, no thread ever
 * sees it valid again.
 */
/** @{ */

/** Opaque term, reference counted. */
typedef struct simba_term simba_term_t;

/** Why a term ended. */
typedef enum {
  SIMBA_REVOKE_NONE = 0,            /**< Not revoked (yet). */
  SIMBA_REVOKE_STOPPED = 1,         /**< Election stopped, lock released, or client closed. */
  SIMBA_REVOKE_STEPPED_DOWN = 2,    /**< The election stepped down. */
  SIMBA_REVOKE_DEADLINE_PASSED = 3, /**< The session's local deadline passed. */
  SIMBA_REVOKE_SESSION_EXPIRED = 4, /**< The backend reported the session expired. */
  SIMBA_REVOKE_TAKEN_OVER = 5       /**< A keep-alive no longer lists the lease as ours. */
} simba_revoke_reason_t;

/**
 * @brief The lease name; borrowed for the life of the term; NULL for NULL.
 * @param[in] t the term.
 * @return the lease name, borrowed for the life of the term; NULL for NULL.
 */
SIMBA_API const char *simba_term_name(const simba_term_t *t);

/**
 * @brief The fencing token: constant within the term. For an election, a lock, a
 *        semaphore permit or a write lock: > 0 and strictly increasing across the
 *        terms of the name (a semaphore's across all its permits). For a read lock:
 *        the name's write epoch when the read was granted, the token of the last
 *        writer, 0 before any writer; readers may share it (docs/fencing.md). 0 for
 *        NULL.
 * @param[in] t the term.
 * @return the fencing token; 0 for NULL.
 */
SIMBA_API uint64_t simba_term_token(const simba_term_t *t);

/** What a term is a term of (simba_term_kind(), 1.5). */
typedef enum {
  SIMBA_TERM_ELECTION = 0,  /**< An election's (and a task's) term. */
  SIMBA_TERM_LOCK = 1,      /**< A lock's term. */
  SIMBA_TERM_SEMAPHORE = 2, /**< A permit of a semaphore. */
  SIMBA_TERM_READ = 3,      /**< A read lock of a read/write lock. */
  SIMBA_TERM_WRITE = 4      /**< A write lock of a read/write lock. */
} simba_term_kind_t;

/**
 * @brief What the term is a term of. Added in 1.5 (version node SIMBA_1.5).
 * @param[in] t the term.
 * @return its kind; SIMBA_TERM_ELECTION for NULL.
 */
SIMBA_API simba_term_kind_t simba_term_kind(const simba_term_t *t);

/**
 * @brief The name of a term kind, as its constant without the prefix: "ELECTION",
 *        "LOCK", "SEMAPHORE", "READ", "WRITE". Added in 1.5 (version node SIMBA_1.5).
 * @param[in] kind a term kind.
 * @return a static string, never NULL; "UNKNOWN" for a value this library does not
 *         define.
 */
SIMBA_API const char *simba_term_kind_name(simba_term_kind_t kind);

/**
 * @brief 1 while not revoked and the session's local deadline has not passed; else 0.
 * @param[in] t the term.
 * @return 1 while valid, else 0.
 */
SIMBA_API int simba_term_is_valid(const simba_term_t *t);

/**
 * @brief Milliseconds left before the local deadline; 0 once the term ended (or NULL).
 * @param[in] t the term.
 * @return the milliseconds left; 0 once the term ended or for NULL.
 */
SIMBA_API int64_t simba_term_remaining_ms(const simba_term_t *t);

/**
 * @brief ensureValid(minRemaining): succeed only if the term stays valid for more
 *        than @p min_remaining_ms.
 * @param[in] t the term.
 * @param[in] min_remaining_ms the least time, in milliseconds, the term must stay valid.
 * @return SIMBA_OK; SIMBA_EEXPIRED (not valid, or not for long enough);
 *         SIMBA_EINVAL (t is NULL or min_remaining_ms negative).
 */
SIMBA_API int simba_term_ensure_valid(const simba_term_t *t, int64_t min_remaining_ms);

/**
 * @brief Why the term ended; SIMBA_REVOKE_NONE until it is revoked (and for NULL). A term
 *        whose deadline passed reads NONE until the engine revokes it, which it does at
 *        once when its loop runs.
 * @param[in] t the term.
 * @return the reason; SIMBA_REVOKE_NONE until revoked and for NULL.
 */
SIMBA_API simba_revoke_reason_t simba_term_revoke_reason(const simba_term_t *t);

/**
 * @brief The name of a revoke reason, as its constant without the prefix (1.3):
 *        "NONE", "STOPPED", "STEPPED_DOWN", "DEADLINE_PASSED", "SESSION_EXPIRED",
 *        "TAKEN_OVER". The same names appear in snapshots, metrics and logs.
 * @param[in] reason a revoke reason.
 * @return a static string, never NULL; "UNKNOWN" for a value this library does not
 *         define.
 */
SIMBA_API const char *simba_revoke_reason_name(simba_revoke_reason_t reason);

/** Revocation callback. @p t is borrowed for the call. */
typedef void (*simba_revoked_fn)(void *ud, simba_term_t *t, simba_revoke_reason_t reason);

/**
 * @brief The `revoked` stage: @p fn runs exactly once, when the term is revoked;
 *        soon (never inside this call) if it already was. Several may be registered.
 *        It runs on the callback executor, in order with the term's election callbacks.
 * @param[in] t the term.
 * @param[in] fn called once when the term is revoked (simba_revoked_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL t or fn); SIMBA_ENOMEM; SIMBA_ECLOSED (the
 *         term was already revoked and its client is closed, so nothing can run it:
 *         read simba_term_revoke_reason() instead).
 */
SIMBA_API int simba_term_on_revoked(simba_term_t *t, simba_revoked_fn fn, void *ud);

/**
 * @brief Sleep until the term is revoked or stops being valid (its deadline
 *        passed, even before the engine revoked it): an interruptible sleep for
 *        leader work.
 * @param[in] timeout_ms negative waits without bound.
 * @param[in] t the term.
 * @return SIMBA_OK once revoked; SIMBA_ETIMEDOUT; SIMBA_EINVAL (t is NULL).
 */
SIMBA_API int simba_term_wait_revoked(simba_term_t *t, int64_t timeout_ms);

/**
 * @brief A file descriptor that becomes readable once the term is revoked (and
 *        stays readable). Owned by the term: do not close or read it.
 * @param[in] t the term.
 * @return the fd, or -1 (t is NULL, or no fd could be made: see simba_last_error()).
 */
SIMBA_API int simba_term_revoke_fd(simba_term_t *t);

/**
 * @brief Keep a term beyond the call it was passed to. NULL is a no-op.
 * @param[in] t the term.
 */
SIMBA_API void simba_term_retain(simba_term_t *t);

/**
 * @brief Drop a reference taken with simba_term_retain() (or owned from a lock). NULL is
 *        a no-op. Dropping a reference of an election's term never revokes it. Dropping
 *        the caller's last reference of a lock term that was not passed to
 *        simba_lock_release() releases the lock: the term is revoked (STOPPED) and the
 *        lease released with its token, without waiting for the backend (a garbage-
 *        collected binding that loses a lock term frees the name; since 1.2).
 * @param[in] t the term.
 */
SIMBA_API void simba_term_release(simba_term_t *t);

/**
 * @brief Drop the caller's reference to a term without waiting, from anywhere
 *        (the one close shape, see "One close for every handle" above).
 *
 * The reference is the one simba_lock_acquire(), simba_lock_try_acquire() or
 * simba_lock_acquire_async() handed out, or one taken with simba_term_retain().
 * - A lock term not yet released (neither simba_lock_release() nor an earlier
 *   close) is released as simba_lock_release() does: revoked (STOPPED), the lease
 *   released with its token. `done` runs once the backend answered the release
 *   (or, when it failed, once it is being sent again in the background until
 *   the session's local deadline, ADR 0030) and every on_revoked callback of the
 *   term ran. Other references taken with simba_term_retain() stay readable.
 * - An election's term, or a lock term already released: `done` runs after the
 *   callbacks already queued for the term's election or lock (its on_revoked
 *   callbacks, when it was revoked); it does not wait for a revocation.
 * The term itself is freed when its last reference goes.
 *
 * Added in 1.4 (version node SIMBA_1.4): check simba_version() >= 0x010400 when
 * loading libsimba.so.1 with dlopen().
 * @param[in] t the term; the caller's reference is not to be used after the call.
 * @param[in] done may be NULL; the last callback of this reference (a simba_done_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (done will run); SIMBA_EINVAL (t is NULL: nothing happened);
 *         SIMBA_ENOMEM (nothing happened).
 */
SIMBA_API int simba_term_close_async(simba_term_t *t, void (*done)(void *ud, int err), void *ud);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Elections */
/** @{ */

/** Opaque election handle. */
typedef struct simba_election simba_election_t;

/**
 * @brief Check a lease name against the rule every name-taking function applies
 *        (1.3): 1-128 characters of [A-Za-z0-9._:-], other than "." and "..".
 *
 * For hosts that hold names as counted bytes (a binding's string, a Redis module
 * argument, an nginx ngx_str_t): pass @p len, the name's length in bytes, and a
 * name with a NUL byte inside is refused with a message that says so, where a
 * C string would silently end at it. Pass SIMBA_NAME_CSTRING for a NUL-terminated
 * name.
 * @param[in] name the name; need not be NUL-terminated when @p len is given.
 * @param[in] len its length in bytes, or SIMBA_NAME_CSTRING.
 * @return SIMBA_OK when every name-taking function would accept it; SIMBA_EINVAL
 *         otherwise, with simba_last_error() naming the rule and the first offending
 *         character and its index (also for a NULL @p name).
 */
SIMBA_API int simba_lease_name_check(const char *name, size_t len);

/** simba_lease_name_check()'s @p len for a NUL-terminated name. */
#define SIMBA_NAME_CSTRING ((size_t)-1)

/** Completion of an asynchronous call: @p err is SIMBA_OK or a SIMBA_E* code. */
typedef void (*simba_done_fn)(void *ud, int err);

/** Election listener. Both callbacks get a borrowed term (simba_term_retain() keeps it). */
typedef struct simba_listener {
  void (*on_elected)(void *ud, simba_term_t *term); /**< May be NULL. */
  void (*on_revoked)(void *ud, simba_term_t *term, simba_revoke_reason_t reason); /**< May be NULL. */
  void *ud; /**< First argument of both callbacks. */
} simba_listener_t;

/**
 * @brief Start contending for @p name. Every on_elected is followed by exactly one
 *        on_revoked for the same term.
 * @param[out] out the election; free with simba_election_free() after its stop.
 * @param[in] l the listener, copied.
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @return SIMBA_OK; SIMBA_EINVAL (NULL argument, bad lease name); SIMBA_ESTATE
 *         (@p name is already started, or locked, on this client); SIMBA_ECLOSED;
 *         SIMBA_ENOMEM.
 */
SIMBA_API int simba_election_start(simba_election_t **out, simba_client_t *c, const char *name,
                                   const simba_listener_t *l);

/**
 * @brief Stop the election: revoke the term (STOPPED), release the lease with its
 *        token, deliver on_revoked, then call @p done. After done, the listener
 *        receives nothing more. Stopped while an acquire is in flight, it waits
 *        for that answer (at most one call timeout) and releases what it won, so
 *        that after done the name is not held for this election on the backend.
 * @param[in] done may be NULL; runs on the callback executor, after the last on_revoked.
 * @param[in] e the election.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (e is NULL); SIMBA_ESTATE (already stopping or
 *         stopped: done is not called).
 */
SIMBA_API int simba_election_stop(simba_election_t *e, simba_done_fn done, void *ud);

/**
 * @brief Step down: revoke the term (STEPPED_DOWN), release it, and do not contend
 *        for @p cooldown_ms counted from now; the election stays started.
 * @param[in] done may be NULL; runs after the last on_revoked of this step-down.
 * @param[in] e the election.
 * @param[in] cooldown_ms how long, in milliseconds, not to contend again after stepping down.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL e, negative cooldown); SIMBA_ESTATE (stopped).
 */
SIMBA_API int simba_election_step_down(simba_election_t *e, int64_t cooldown_ms,
                                       simba_done_fn done, void *ud);

/**
 * @brief Blocking stop: simba_election_stop() and wait for its completion.
 *        Stopping an election that is already stopped or stopping waits for that stop.
 * @param[in] e the election.
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @return SIMBA_OK; SIMBA_ETIMEDOUT (the stop goes on); SIMBA_EINVAL;
 *         SIMBA_EWOULDBLOCK (from a callback or the loop thread).
 */
SIMBA_API int simba_election_stop_wait(simba_election_t *e, int64_t timeout_ms);

/**
 * @brief Free an election handle, stopping it first if needed.
 *
 * Outside callbacks and leader work it waits until the stop completed (the term
 * revoked and released: at most about one renew period when the backend is
 * unreachable) and no callback of the election runs: after it returns, the
 * listener's `ud` may be freed. The listener hears nothing from the free on (no
 * on_revoked for the term the free stops: simba_election_stop_wait() first to
 * get it); the done of a stop or step-down asked for before the free has run,
 * once, when it returns. Called from a callback (or the loop thread) it
 * starts the stop and returns at once: no listener callback or done of the
 * election starts afterwards, the one running finishes, and on_revoked callbacks
 * registered on its terms still run once each. To know there when the last
 * callback has returned, free in the `done` of simba_election_stop(). NULL is a
 * no-op.
 * @param[in] e the election.
 */
SIMBA_API void simba_election_free(simba_election_t *e);

/**
 * @brief Close an election without waiting, from anywhere, its own callbacks
 *        included (the one close shape, see "One close for every handle" above).
 *
 * Stops the election as simba_election_stop() does (the term revoked with
 * STOPPED and released with its token; an acquire in flight awaited and what it
 * won released), unless a stop was asked for already (or the client's close
 * stopped it). The listener is detached at once: it hears nothing more, not even
 * the on_revoked of the term this close stops (as with simba_election_free());
 * on_revoked callbacks registered on that term with simba_term_on_revoked() do
 * run, before `done`. `done` runs once the stop completed (after that, the name
 * is not held for this election on the backend) and every other callback of the
 * election returned, the dones of an earlier stop or step-down included; then
 * the handle is freed.
 *
 * Added in 1.4 (version node SIMBA_1.4): check simba_version() >= 0x010400 when
 * loading libsimba.so.1 with dlopen().
 * @param[in] e the election; not to be used after the call.
 * @param[in] done may be NULL; the election's last callback (simba_done_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (done will run); SIMBA_EINVAL (e is NULL: nothing happened);
 *         SIMBA_ENOMEM (nothing happened).
 */
SIMBA_API int simba_election_close_async(simba_election_t *e, simba_done_fn done, void *ud);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Locks
 * A lock term is a term without leader work. Acquiring a name that another lock
 * of this client holds or waits for queues behind it (first come, first served).
 */
/** @{ */

/**
 * @brief Acquire a lock, waiting up to @p timeout_ms (negative: without bound).
 * @param[out] out the term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @return SIMBA_OK; SIMBA_ETIMEDOUT; SIMBA_EINVAL (NULL argument, bad name);
 *         SIMBA_ESTATE (an election of this client uses the name); SIMBA_ECLOSED;
 *         SIMBA_EWOULDBLOCK (from a callback or the loop thread).
 */
SIMBA_API int simba_lock_acquire(simba_term_t **out, simba_client_t *c, const char *name,
                                 int64_t timeout_ms);

/**
 * @brief One attempt: acquire the lock if nobody holds it. Waits at most one renew
 *        period for the session to be live and for the backend's answer (and,
 *        right after an acquire of the name on this client gave up with its
 *        answer outstanding, for that answer first: SIMBA_ETIMEDOUT if it comes
 *        too late).
 * @param[out] out the term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @return SIMBA_OK; SIMBA_EBUSY (held by someone else, here or elsewhere);
 *         SIMBA_ETIMEDOUT; SIMBA_EBACKEND; and as simba_lock_acquire().
 */
SIMBA_API int simba_lock_try_acquire(simba_term_t **out, simba_client_t *c, const char *name);

/** Completion of simba_lock_acquire_async(): on SIMBA_OK @p term is owned by the callee. */
typedef void (*simba_lock_fn)(void *ud, int err, simba_term_t *term);

/**
 * @brief Acquire without blocking: @p cb runs once on the callback executor with
 *        SIMBA_OK and the term, SIMBA_ETIMEDOUT, or SIMBA_ECANCELED (client closed).
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @param[in] cb called once with the outcome (simba_lock_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (cb will run); SIMBA_EINVAL; SIMBA_ESTATE; SIMBA_ECLOSED (cb will not run).
 */
SIMBA_API int simba_lock_acquire_async(simba_client_t *c, const char *name, int64_t timeout_ms,
                                       simba_lock_fn cb, void *ud);

/**
 * @brief Release a lock: revoke the term (STOPPED), release the lease with the
 *        term's token, and drop the caller's reference. Waits for the backend's
 *        answer (at most one renew period), so the lease is free on return unless
 *        the release failed (it is then sent again in the background until the
 *        session's local deadline, ADR 0030), and
 *        for the term's on_revoked callbacks, which have all run by then; except
 *        when called from a callback, leader work or the loop thread, where it
 *        does not wait.
 *        Releasing an already revoked lock only drops the reference. Also
 *        releases a semaphore permit or a read/write lock (1.5) the same way, with
 *        the permit's entry and token.
 * @param[in] term the term.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL, or an election's term).
 */
SIMBA_API int simba_lock_release(simba_term_t *term);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Semaphores and read/write locks (1.5)
 * A permit is a lease of the session like a lock (ADR 0046): each granted permit
 * is a term (token, validity from the session's local deadline, revoke fd, exactly
 * one revocation with a reason), released with simba_lock_release(), and every
 * permit of a session that ends is revoked (SESSION_EXPIRED or DEADLINE_PASSED)
 * and freed on the backend at the session's expiry, never before.
 *
 * Semaphores, read/write locks and locks are separate namespaces: semaphore "x",
 * read/write lock "x" and lock "x" are three unrelated resources. Permits of one
 * name, of this client or of others, are granted side by side (no queue behind
 * this client's other permits, unlike locks); a session's own permits count
 * against a semaphore's size. Waiters are woken by the release and retry; there
 * is no FIFO order.
 *
 * Read/write locks prefer writers: a blocking write acquire that finds the name
 * held leaves an intent on the backend, and while a live session's intent is
 * there, read acquires wait (try-reads return SIMBA_EBUSY). Writers contend among
 * themselves when the name frees. A try-write leaves no intent. There is no
 * upgrade: a write waits for every read of the name, this session's own
 * included. Tokens: docs/fencing.md.
 *
 * Added in 1.5 (version node SIMBA_1.5): check simba_version() >= 0x010500 when
 * loading libsimba.so.1 with dlopen().
 */
/** @{ */

/** Read/write lock modes: exactly one of them (simba_rwlock_acquire()). */
typedef enum {
  SIMBA_LOCK_READ = 1, /**< Shared with other readers. */
  SIMBA_LOCK_WRITE = 2 /**< Exclusive. */
} simba_lock_mode_t;

/**
 * @brief Acquire a permit of semaphore @p name, waiting up to @p timeout_ms.
 * @param[out] out the permit's term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the semaphore's name (the lease name rule).
 * @param[in] permits the semaphore's size, >= 1. The first holder fixes it while the
 *            name has holders; asking another size then fails at once.
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @return SIMBA_OK; SIMBA_ETIMEDOUT; SIMBA_EINVAL (NULL argument, bad name, permits
 *         0); SIMBA_ESTATE (the semaphore has another size: simba_last_error() says
 *         "semaphore NAME has N permits, not M"); SIMBA_ECLOSED; SIMBA_EWOULDBLOCK
 *         (from a callback or the loop thread).
 */
SIMBA_API int simba_semaphore_acquire(simba_term_t **out, simba_client_t *c, const char *name,
                                      uint32_t permits, int64_t timeout_ms);

/**
 * @brief One attempt at a permit, as simba_lock_try_acquire() is at a lock.
 * @param[out] out the permit's term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the semaphore's name.
 * @param[in] permits the semaphore's size, >= 1.
 * @return SIMBA_OK; SIMBA_EBUSY (every permit is held); SIMBA_ETIMEDOUT;
 *         SIMBA_EBACKEND; and as simba_semaphore_acquire().
 */
SIMBA_API int simba_semaphore_try_acquire(simba_term_t **out, simba_client_t *c, const char *name,
                                          uint32_t permits);

/**
 * @brief Acquire a permit without blocking: @p cb runs once on the callback executor
 *        with SIMBA_OK and the term, SIMBA_ETIMEDOUT, SIMBA_ESTATE (another size;
 *        simba_last_error() in the callback says which) or SIMBA_ECANCELED (client
 *        closed).
 * @param[in] c the client.
 * @param[in] name the semaphore's name.
 * @param[in] permits the semaphore's size, >= 1.
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @param[in] cb called once with the outcome (simba_lock_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (cb will run); SIMBA_EINVAL; SIMBA_ECLOSED (cb will not run).
 */
SIMBA_API int simba_semaphore_acquire_async(simba_client_t *c, const char *name,
                                            uint32_t permits, int64_t timeout_ms,
                                            simba_lock_fn cb, void *ud);

/**
 * @brief Acquire read/write lock @p name in @p mode, waiting up to @p timeout_ms.
 * @param[out] out the term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the lock's name (the lease name rule).
 * @param[in] mode SIMBA_LOCK_READ or SIMBA_LOCK_WRITE.
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @return SIMBA_OK; SIMBA_ETIMEDOUT; SIMBA_EINVAL (NULL argument, bad name, mode not
 *         exactly one of the two); SIMBA_ECLOSED; SIMBA_EWOULDBLOCK (from a callback
 *         or the loop thread).
 */
SIMBA_API int simba_rwlock_acquire(simba_term_t **out, simba_client_t *c, const char *name,
                                   int mode, int64_t timeout_ms);

/**
 * @brief One attempt, as simba_lock_try_acquire(): a read fails while a writer holds
 *        the name or a live writer's intent is there; a write fails while anyone
 *        holds it, and leaves no intent.
 * @param[out] out the term, owned by the caller: simba_lock_release() it.
 * @param[in] c the client.
 * @param[in] name the lock's name.
 * @param[in] mode SIMBA_LOCK_READ or SIMBA_LOCK_WRITE.
 * @return SIMBA_OK; SIMBA_EBUSY; SIMBA_ETIMEDOUT; SIMBA_EBACKEND; and as
 *         simba_rwlock_acquire().
 */
SIMBA_API int simba_rwlock_try_acquire(simba_term_t **out, simba_client_t *c, const char *name,
                                       int mode);

/**
 * @brief Acquire without blocking: @p cb runs once on the callback executor with
 *        SIMBA_OK and the term, SIMBA_ETIMEDOUT, or SIMBA_ECANCELED (client closed).
 * @param[in] c the client.
 * @param[in] name the lock's name.
 * @param[in] mode SIMBA_LOCK_READ or SIMBA_LOCK_WRITE.
 * @param[in] timeout_ms how long to wait, in milliseconds; negative: without bound.
 * @param[in] cb called once with the outcome (simba_lock_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (cb will run); SIMBA_EINVAL; SIMBA_ECLOSED (cb will not run).
 */
SIMBA_API int simba_rwlock_acquire_async(simba_client_t *c, const char *name, int mode,
                                         int64_t timeout_ms, simba_lock_fn cb, void *ud);

/** @} */

/* ------------------------------------------------------------------------- */
/** @name Leader work
 * A task is an election whose terms run work on a thread of their own. Its
 * stop and step-down follow the handover order: the term is revoked (work sees
 * simba_term_is_valid() false, simba_term_wait_revoked() returns, the revoke fd
 * becomes readable), then the engine waits until the work returned or the
 * term's local deadline as it was at the stop passed (whichever comes first),
 * then releases the lease with the token, then completes the stop. Meanwhile
 * the lease stays held, so no other node starts the same work. A term lost any
 * other way (deadline, take-over, session expiry) is not waited for.
 */
/** @{ */

/** Opaque task handle. */
typedef struct simba_task simba_task_t;

/** Leader work: @p term is valid when it starts, borrowed for the call. */
typedef void (*simba_work_fn)(void *ud, simba_term_t *term);

/**
 * @brief Contend for @p name; each time this node is elected, run
 *        `work(ud, term)` on a thread of its own. When work returns while the
 *        term is still valid, the lease is released (the term revoked with
 *        STEPPED_DOWN) and the task contends again.
 *
 * Work should check simba_term_ensure_valid() before each step and pass
 * simba_term_token() with each write, and return soon after the term is
 * revoked: work that ignores revocation delays a stop's handover by up to the
 * term's remaining time, never longer.
 * @param[out] out the task; simba_task_close() it.
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @param[in] work the leader work (simba_work_fn), run in each term.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL argument, bad lease name); SIMBA_ESTATE
 *         (@p name is already started or locked on this client); SIMBA_ECLOSED;
 *         SIMBA_ENOMEM.
 */
SIMBA_API int simba_run_while_leader(simba_task_t **out, simba_client_t *c, const char *name,
                                     simba_work_fn work, void *ud);

/**
 * @brief Contend for @p name; while leader, call `run(ud, term)` after
 *        @p initial_delay_ms and then with a fixed delay of @p period_ms
 *        between the end of one run and the start of the next. A run that would
 *        start on a revoked term does not start. Runs of one term are on one
 *        thread; a new term starts again with the initial delay.
 * @param[out] out the task; close it with simba_task_close().
 * @param[in] c the client.
 * @param[in] name the lease name (simba_lease_name_check() tells whether it is valid).
 * @param[in] initial_delay_ms the delay before the first run, in milliseconds.
 * @param[in] period_ms the time between runs, in milliseconds.
 * @param[in] run the work (simba_work_fn), run at each period while leader.
 * @param[in] ud user data, passed as is to the callback.
 * @return as simba_run_while_leader(); SIMBA_EINVAL also for a negative
 *         @p initial_delay_ms or a @p period_ms <= 0.
 */
SIMBA_API int simba_schedule(simba_task_t **out, simba_client_t *c, const char *name,
                             int64_t initial_delay_ms, int64_t period_ms, simba_work_fn run,
                             void *ud);

/**
 * @brief Join the partition group @p group: partitions `GROUP.0` ..
 *        `GROUP.N-1` (N = @p partitions) are spread over the members that
 *        joined, and `work(ud, term)` runs for each partition this member
 *        leads, like simba_run_while_leader() (the partition is
 *        simba_term_name()).
 *
 * Members find each other through the backend (each holds a member lock
 * `GROUP.member.K`). About once per renew interval each member reads the
 * backend and aims at its fair share: ⌈N / members⌉ for the N mod m members
 * holding the most partitions (ties: the lower member lock), ⌊N / members⌋ for
 * the others, so a member that has ⌈N / members⌉ keeps it. A member above its
 * share hands the excess over in handover order (a joining member gets work
 * only after the old holder's work exited); a member below it takes free
 * partitions, including those of a member that left or died (after its session
 * expired). Only excess partitions move. Safety does not depend on the
 * balancing: each partition is a lease with one valid holder at a time. A
 * member beyond N holds nothing until a member lock frees.
 * simba_task_step_down() leaves the group for the cooldown; simba_task_stop()
 * and simba_task_close() leave it for good. Their done runs on the callback
 * executor, like every callback, once every partition was handed over in
 * handover order and the member lock released.
 * @param[out] out the task; close it with simba_task_close().
 * @param[in] c the client.
 * @param[in] group the group's name: every member joins with the same.
 * @param[in] partitions how many partitions the group shares among its members.
 * @param[in] work the leader work (simba_work_fn), run in each term.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL argument, @p partitions 0 or above
 *         10000, a group name for which `GROUP.member.N` breaks the lease-name
 *         rule); SIMBA_ECLOSED; SIMBA_ENOMEM.
 */
SIMBA_API int simba_group_join(simba_task_t **out, simba_client_t *c, const char *group,
                               uint32_t partitions, simba_work_fn work, void *ud);

/**
 * @brief Stop the task: revoke the term (STOPPED), wait for its work (handover
 *        order), release the lease with the token, then call @p done.
 * @param[in] done may be NULL; runs on the callback executor.
 * @param[in] t the task.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (t is NULL); SIMBA_ESTATE (already stopping or
 *         stopped: done is not called).
 */
SIMBA_API int simba_task_stop(simba_task_t *t, simba_done_fn done, void *ud);

/**
 * @brief Step down: revoke the term (STEPPED_DOWN), wait for its work, release,
 *        and do not contend for @p cooldown_ms counted from now.
 * @param[in] t the task.
 * @param[in] cooldown_ms how long, in milliseconds, not to contend again after stepping down.
 * @param[in] done called once when done (simba_done_fn); NULL: not called.
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK; SIMBA_EINVAL (NULL t, negative cooldown); SIMBA_ESTATE (stopped).
 */
SIMBA_API int simba_task_step_down(simba_task_t *t, int64_t cooldown_ms, simba_done_fn done,
                                   void *ud);

/**
 * @brief Stop the task, wait until the stop completed, every run of its work
 *        returned and no callback of it runs, and free the handle: then the
 *        work's `ud` may be freed. Called from a callback, from leader work or
 *        from the loop thread it starts the stop, frees the handle and returns
 *        at once (waiting there would wait for itself): use the `done` of
 *        simba_task_stop() there to learn when the work has returned. NULL is a
 *        no-op.
 * @param[in] t the task.
 * @return SIMBA_OK.
 */
SIMBA_API int simba_task_close(simba_task_t *t);

/**
 * @brief Close a task without waiting, from anywhere, its own leader work
 *        included (the one close shape, see "One close for every handle" above).
 *
 * Stops the task as simba_task_stop() does (handover order: the term revoked,
 * its work awaited up to the term's deadline, the lease released), unless a stop
 * was asked for already. `done` runs once that stop completed and every run of
 * the work returned (called from the work, once that run returned: work that
 * ignores revocation delays `done`, not the handover), after every other
 * callback of the task, the dones of an earlier stop or step-down included;
 * then the handle is freed. For a partition group (simba_group_join()): once
 * every partition was handed over, the member lock released, and every run of
 * the work returned.
 *
 * Added in 1.4 (version node SIMBA_1.4): check simba_version() >= 0x010400 when
 * loading libsimba.so.1 with dlopen().
 * @param[in] t the task; not to be used after the call.
 * @param[in] done may be NULL; the task's last callback (simba_done_fn).
 * @param[in] ud user data, passed as is to the callback.
 * @return SIMBA_OK (done will run); SIMBA_EINVAL (t is NULL: nothing happened);
 *         SIMBA_ENOMEM (nothing happened).
 */
SIMBA_API int simba_task_close_async(simba_task_t *t, simba_done_fn done, void *ud);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* SIMBA_H */
