/**
 * @file simba/tck.h
 * @brief The fencing test kit (libsimba_tck): does YOUR resource reject stale owners?
 *
 * A term's validity is only a hint; the fencing token is the defence, and only the
 * protected resource can apply it (docs/fencing.md). This kit checks a resource
 * that the host implements through a small vtable: it writes values with chosen
 * tokens, from one thread and then from several at once, reads the result back,
 * and reports, case by case, whether the resource behaved as the fencing rule
 * demands:
 *
 *  - accept a write whose token is at least the highest token it accepted,
 *    equal tokens included (retries within one term carry the same token);
 *  - reject every write whose token is lower, and leave the value as it was;
 *  - never let a write with a lower token land after one with a higher token,
 *    whatever the interleaving of concurrent writers.
 *
 * The kit is C99 to call; it links nothing but the C and C++ runtimes (not
 * libsimba). Build against it with `pkg-config --cflags --libs simba-tck`, or
 * `find_package(simba CONFIG)` and the target simba::simba_tck.
 *
 * @par Threading
 * simba_tck_run_fencing_spec() calls the vtable from the calling thread and,
 * for the concurrent cases, from several threads at once: write() and read()
 * must be safe to call concurrently (one connection per call or a pool, not one
 * shared blocking connection). reset() is never called concurrently with anything.
 * The report functions may be called from any thread.
 */
#ifndef SIMBA_TCK_H
#define SIMBA_TCK_H

#include <stddef.h>
#include <stdint.h>

#include "simba.h" /* SIMBA_API, SIMBA_OK and the SIMBA_E* codes */

#ifdef __cplusplus
extern "C" {
#endif

/** The version of simba_tck_resource_t this header describes. */
#define SIMBA_TCK_RESOURCE_V1 1u

/** The version of simba_tck_options_t this header describes. */
#define SIMBA_TCK_OPTIONS_V1 1u

/** Values the kit writes are shorter than this, terminating NUL included. */
#define SIMBA_TCK_VALUE_MAX 64

/** What a resource's write() answers. */
enum {
  SIMBA_TCK_ACCEPTED = 1, /**< The write landed: token >= the highest accepted. */
  SIMBA_TCK_REJECTED = 0, /**< Stale token: nothing changed. */
  SIMBA_TCK_ERROR = -1    /**< Could not tell (connection lost, SQL error, ...): fails the case. */
};

/**
 * @brief A host-implemented fenced resource: the system under test.
 *
 * Every function pointer is required. The kit writes values it makes itself
 * (printable ASCII, shorter than SIMBA_TCK_VALUE_MAX) and reads them back.
 */
typedef struct simba_tck_resource {
  /** SIMBA_TCK_RESOURCE_V1. A later version only appends fields. */
  uint32_t version;
  /**
   * Make the resource empty: no token accepted yet, no value. Called before each
   * case (a fresh key or row per call is fine). Return 0, or nonzero on failure.
   */
  int (*reset)(void *ud);
  /**
   * Write @p value with @p token, as an owner holding that token would: accept it
   * only if @p token is at least the highest token accepted so far, recording the
   * token and the value in one atomic step. @p value is borrowed for the call.
   * Return SIMBA_TCK_ACCEPTED, SIMBA_TCK_REJECTED or SIMBA_TCK_ERROR.
   */
  int (*write)(void *ud, uint64_t token, const char *value);
  /**
   * Read the current value into @p buf (@p cap bytes, NUL-terminated).
   * Return 1 when there is a value, 0 when nothing was written since reset(),
   * -1 on error.
   */
  int (*read)(void *ud, char *buf, size_t cap);
  /** First argument of every function above. */
  void *ud;
} simba_tck_resource_t;

/**
 * @brief Tuning of a run; pass NULL to simba_tck_run_fencing_spec() for the defaults.
 * A field left 0 takes its default.
 */
typedef struct simba_tck_options {
  uint32_t version; /**< SIMBA_TCK_OPTIONS_V1. */
  uint32_t writers; /**< Concurrent writer threads (default 6, at most 64). */
  uint32_t rounds;  /**< Rounds of the concurrent cases (default 100). */
  uint32_t
      max_delay_us; /**< Longest random delay between a writer's check and write (default 500). */
  uint64_t seed;    /**< Random seed; 0 picks one (reported, to replay a failure). */
} simba_tck_options_t;

/** Opaque report of one run. */
typedef struct simba_tck_report simba_tck_report_t;

/**
 * @brief Run the fencing spec against @p resource.
 *
 * The cases, in order (each after a reset()):
 *  1. `first_write_accepted`: a first write with any token lands and reads back;
 *  2. `equal_token_accepted`: retries with the token of the last accepted write
 *     (same value, then a new value) are accepted and the last one is read back;
 *  3. `lower_token_rejected`: a lower token after a higher one is rejected and the
 *     higher one's value stays; the higher token is still accepted afterwards;
 *  4. `non_consecutive_tokens_accepted`: increasing tokens with gaps, such as
 *     ZooKeeper's czxid (epoch << 32 | counter), are all accepted;
 *  5. `concurrent_writers`: in each round, several threads take tokens as owners
 *     of successive terms would, wait a random delay (an owner paused between its
 *     token check and its write), then write, some twice (a retry), while a
 *     reader reads. The round passes when the final value comes from a write with
 *     the round's highest token, no write was accepted after a write with a higher
 *     token had been accepted (in real time), and the reader never saw the token
 *     go back. A resource whose check and write are not one atomic step fails here.
 *
 * @param[out] out the report, even when cases failed; free with simba_tck_report_free().
 * @param[in] resource the resource; its version must be SIMBA_TCK_RESOURCE_V1.
 * @param[in] opts tuning, or NULL for the defaults.
 * @return SIMBA_OK when the spec ran (read the verdict from the report);
 *         SIMBA_EINVAL (NULL out or resource, a NULL function, an unknown version,
 *         writers > 64); SIMBA_ENOMEM.
 */
SIMBA_API int simba_tck_run_fencing_spec(simba_tck_report_t **out,
                                         const simba_tck_resource_t *resource,
                                         const simba_tck_options_t *opts);

/**
 * @brief 1 if every case passed, else 0 (and 0 for NULL).
 * @param[in] r the report.
 * @return 1 if every case passed, else 0.
 */
SIMBA_API int simba_tck_report_passed(const simba_tck_report_t *r);

/**
 * @brief Number of cases in the report (0 for NULL).
 * @param[in] r the report.
 * @return the number of cases.
 */
SIMBA_API size_t simba_tck_report_case_count(const simba_tck_report_t *r);

/**
 * @brief Name of case @p i ("equal_token_accepted", ...); NULL when out of range.
 *        Borrowed until simba_tck_report_free().
 * @param[in] r the report.
 * @param[in] i the case, from 0 to simba_tck_report_case_count() - 1.
 * @return the case's name, borrowed for the life of the report.
 */
SIMBA_API const char *simba_tck_report_case_name(const simba_tck_report_t *r, size_t i);

/**
 * @brief 1 if case @p i passed, 0 if it failed or is out of range.
 * @param[in] r the report.
 * @param[in] i the case, from 0 to simba_tck_report_case_count() - 1.
 * @return 1 if the case passed, else 0.
 */
SIMBA_API int simba_tck_report_case_passed(const simba_tck_report_t *r, size_t i);

/**
 * @brief What case @p i found: empty when it passed, else the first violation seen; NULL
 *        when out of range. Borrowed until simba_tck_report_free().
 * @param[in] r the report.
 * @param[in] i the case, from 0 to simba_tck_report_case_count() - 1.
 * @return what the case saw, borrowed for the life of the report.
 */
SIMBA_API const char *simba_tck_report_case_detail(const simba_tck_report_t *r, size_t i);

/**
 * @brief The whole report as text, one "PASS name" or "FAIL name: detail" line per
 *        case, then a verdict line naming the seed. Borrowed until
 *        simba_tck_report_free(); "" for NULL.
 * @param[in] r the report.
 * @return the whole report as text, borrowed for the life of the report.
 */
SIMBA_API const char *simba_tck_report_text(const simba_tck_report_t *r);

/**
 * @brief Free a report. NULL is a no-op.
 * @param[in] r the report.
 */
SIMBA_API void simba_tck_report_free(simba_tck_report_t *r);

#ifdef __cplusplus
}
#endif

#endif /* SIMBA_TCK_H */
