// Decoders of the PostgreSQL backend's rows: what each simba_* function
// returns, turned into the core's reply types. Kept apart from the connection
// code so that tests/fuzz/ can feed them any result libpq can hold: a server
// (or a schema someone else changed) must never make them read out of bounds or
// overflow.
#ifndef SIMBA_BACKEND_POSTGRES_POSTGRES_ROWS_H
#define SIMBA_BACKEND_POSTGRES_POSTGRES_ROWS_H

#include <libpq-fe.h>

#include <string>

#include "core/backend_types.h"

namespace simba {

// The text of a field, "" when NULL or out of range.
std::string pg_field(const PGresult* r, int row, int col);
// A field holding exactly a decimal integer (false when NULL, out of range,
// empty, not a number or beyond long long).
bool pg_field_int(const PGresult* r, int row, int col, long long* out);

// Each decoder takes a successful result (PGRES_TUPLES_OK; the caller handles
// errors) and fills every field of the reply; on unexpected rows the reply has
// outcome kError and an error message.
OpenReply decode_pg_open(const PGresult* r, const std::string& session_id);
KeepAliveReply decode_pg_keep_alive(const PGresult* r);
// The keep-alive of a schema with permits: its rows also carry (kind, permit).
KeepAliveReply decode_pg_keep_alive_all(const PGresult* r);
AcquireReply decode_pg_acquire(const PGresult* r);
AcquireReply decode_pg_acquire_permit(const PGresult* r);
// Rows of either inspect statement (with or without permits).
InspectReply decode_pg_inspect(const PGresult* r);

}  // namespace simba

#endif
