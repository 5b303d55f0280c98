// postgresql://...: the PostgreSQL backend (libpq, non-blocking, on the
// client's libuv loop). Data model: postgres_schema.cpp and docs/backends.md.
#ifndef SIMBA_BACKEND_POSTGRES_POSTGRES_BACKEND_H
#define SIMBA_BACKEND_POSTGRES_POSTGRES_BACKEND_H

#include <memory>

#include "backend/backend.h"
#include "backend/postgres/postgres_url.h"

namespace simba {

std::unique_ptr<Backend> make_postgres_backend(const BackendContext& ctx, const PostgresUrl& url);

}  // namespace simba

#endif
