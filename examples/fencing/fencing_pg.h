/* Fencing recipe: a resource kept in PostgreSQL (docs/fencing.md).
 *
 * One conditional UPDATE checks the token and writes, atomically: the row lock
 * serializes concurrent writers, and PostgreSQL re-checks the WHERE clause on the
 * newest row version before updating. Zero rows updated means a stale owner.
 * PostgreSQL counts the rows the WHERE clause matched, so a retry with the same
 * token and the same values still reports 1 row: accepted.
 *
 *     create table if not exists ledger_state (
 *       id text primary key,
 *       fencing_token bigint not null default 0,
 *       last_batch text);
 *     -- once per resource:
 *     insert into ledger_state (id) values ($1) on conflict do nothing;
 *     -- every write:
 *     update ledger_state set last_batch = $1, fencing_token = $2
 *      where id = $3 and fencing_token <= $2;
 */
#ifndef SIMBA_EXAMPLE_FENCING_PG_H
#define SIMBA_EXAMPLE_FENCING_PG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* Create the table if it does not exist: 0, or -1 (PQerrorMessage(c) says why). */
int fence_pg_setup(PGconn *c);

/* Create the row of resource @p id (token 0, no value) unless it exists: 0 or -1. */
int fence_pg_create(PGconn *c, const char *id);

/* Write @p value to resource @p id with the writer's token, in one UPDATE:
 * 1 accepted, 0 rejected (stale owner, or no such row: create it first),
 * -1 error (token above INT64_MAX, connection or SQL error; retry with the SAME
 * token and value). */
int fence_pg_write(PGconn *c, const char *id, uint64_t token, const char *value);

/* Read the value: 1 (copied into buf, NUL-terminated), 0 (none), -1 error. */
int fence_pg_read(PGconn *c, const char *id, char *buf, size_t cap);

/* Delete the row of @p id: 0 or -1. */
int fence_pg_delete(PGconn *c, const char *id);

#endif
