#include "backend/postgres/postgres_rows.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <tuple>

#include "backend/reply_parts.h"

namespace simba {
namespace {

bool in_range(const PGresult* r, int row, int col) {
  return row >= 0 && col >= 0 && row < PQntuples(r) && col < PQnfields(r);
}

// A permit entry's kind as the schema numbers it (PermitKind), or false.
bool permit_kind(long long v, PermitKind* out) {
  if (v < static_cast<long long>(PermitKind::kSemaphore) ||
      v > static_cast<long long>(PermitKind::kIntent)) {
    return false;
  }
  *out = static_cast<PermitKind>(v);
  return true;
}

// Rows (v, name, token[, kind, permit]): one with name NULL whose v is the
// remaining time (ms, negative when the session is gone), and one per lease
// (kind 0) or permit entry held. A lease's token is positive; a permit's may
// be 0 (a read before any writer, an intent).
KeepAliveReply keep_alive_rows(const PGresult* r, bool permits) {
  KeepAliveReply out;
  long long remaining = -2;
  bool bad = PQnfields(r) != (permits ? 5 : 3);
  for (int row = 0; !bad && row < PQntuples(r); ++row) {
    long long v = 0, token = 0, kind = 0, permit = 0;
    if (!pg_field_int(r, row, 0, &v)) {
      bad = true;
    } else if (PQgetisnull(r, row, 1)) {
      remaining = v;
    } else if (!pg_field_int(r, row, 2, &token) ||
               (permits &&
                (!pg_field_int(r, row, 3, &kind) || !pg_field_int(r, row, 4, &permit)))) {
      bad = true;
    } else if (kind == 0) {
      bad = token <= 0 || permit != 0;
      out.owned.push_back(OwnedLease{pg_field(r, row, 1), static_cast<uint64_t>(token)});
    } else {
      OwnedLease e{pg_field(r, row, 1), static_cast<uint64_t>(token)};
      bad = token < 0 || permit <= 0 || !permit_kind(kind, &e.kind);
      e.permit = static_cast<uint64_t>(permit);
      out.owned.push_back(std::move(e));
    }
  }
  if (bad || remaining == -2) {
    out = KeepAliveReply();
    out.error = "postgresql: unexpected answer to keep-alive";
  } else if (remaining < 0) {
    out = KeepAliveReply();
    out.outcome = Outcome::kExpired;
  } else {
    out.outcome = Outcome::kOk;
    out.remaining = reply_ms(remaining);
    std::sort(out.owned.begin(), out.owned.end(), [](const OwnedLease& a, const OwnedLease& b) {
      return std::tie(a.kind, a.name, a.permit) < std::tie(b.kind, b.name, b.permit);
    });
  }
  return out;
}

}  // namespace

std::string pg_field(const PGresult* r, int row, int col) {
  if (!in_range(r, row, col) || PQgetisnull(r, row, col)) return std::string();
  const char* v = PQgetvalue(r, row, col);
  return v ? std::string(v, static_cast<size_t>(PQgetlength(r, row, col))) : std::string();
}

bool pg_field_int(const PGresult* r, int row, int col, long long* out) {
  if (!in_range(r, row, col) || PQgetisnull(r, row, col)) return false;
  const char* s = PQgetvalue(r, row, col);
  const int len = PQgetlength(r, row, col);
  if (!s || len <= 0) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  // The whole field, not a prefix up to an embedded NUL; no overflow.
  if (errno == ERANGE || end != s + len) return false;
  *out = v;
  return true;
}

OpenReply decode_pg_open(const PGresult* r, const std::string& session_id) {
  // One row: the lease duration granted (ms), or -1 when the id is taken.
  OpenReply out;
  long long v = 0;
  if (PQntuples(r) != 1 || !pg_field_int(r, 0, 0, &v)) {
    out.error = "postgresql: unexpected answer to open";
  } else if (v < 0) {
    out.error = "postgresql: session id collision";
  } else {
    out.outcome = Outcome::kOk;
    out.session_id = session_id;
    out.remaining = reply_ms(v);
  }
  return out;
}

KeepAliveReply decode_pg_keep_alive(const PGresult* r) { return keep_alive_rows(r, false); }

KeepAliveReply decode_pg_keep_alive_all(const PGresult* r) { return keep_alive_rows(r, true); }

AcquireReply decode_pg_acquire(const PGresult* r) {
  // One row (code, v): 1 and the token (won), 0 and the holder's remaining ms
  // (held), -1 (our session is gone).
  long long code = 0, v = 0;
  if (PQntuples(r) != 1 || PQnfields(r) != 2 || !pg_field_int(r, 0, 0, &code) ||
      !pg_field_int(r, 0, 1, &v)) {
    AcquireReply out;
    out.error = "postgresql: unexpected answer to acquire";
    return out;
  }
  return acquire_reply(code, v, "postgresql");
}

AcquireReply decode_pg_acquire_permit(const PGresult* r) {
  // One row (code, token, permit, v): 1 granted (token, permit), 0 held (v the
  // holder's remaining ms or negative, permit the writer's intent or 0), 2
  // refused (v the semaphore's size), -1 our session is gone.
  AcquireReply out;
  long long code = 0, token = 0, permit = 0, v = 0;
  if (PQntuples(r) != 1 || PQnfields(r) != 4 || !pg_field_int(r, 0, 0, &code) ||
      !pg_field_int(r, 0, 1, &token) || !pg_field_int(r, 0, 2, &permit) ||
      !pg_field_int(r, 0, 3, &v) || token < 0 || permit < 0) {
    out.error = "postgresql: unexpected answer to acquire_permit";
    return out;
  }
  if (code == 2) {
    if (v <= 0 || v > UINT32_MAX) {
      out.error = "postgresql: a refused permit without a size";
      return out;
    }
    out.outcome = Outcome::kRefused;
    out.size = static_cast<uint32_t>(v);
    return out;
  }
  if (code == 1 && permit == 0) {
    out.error = "postgresql: a permit granted without an id";
    return out;
  }
  // A read's token may be 0 (no writer yet): acquire_reply wants a positive one.
  out = acquire_reply(code, code == 1 ? 1 : v, "postgresql");
  out.permit = static_cast<uint64_t>(permit);
  if (out.outcome == Outcome::kOk) out.token = static_cast<uint64_t>(token);
  return out;
}

InspectReply decode_pg_inspect(const PGresult* r) {
  // Rows (kind, id or name, client or holder, token, remaining ms[, permit
  // kind, permit]); kind "s" is a session, "p" a permit entry, anything else a
  // lease.
  InspectReply out;
  const bool permits = PQnfields(r) == 7;
  if (PQnfields(r) != 5 && !permits) {
    out.error = "postgresql: unexpected answer to inspect";
    return out;
  }
  for (int row = 0; row < PQntuples(r); ++row) {
    long long token = 0, remaining = -1;
    if (!pg_field_int(r, row, 3, &token)) token = 0;
    if (!pg_field_int(r, row, 4, &remaining)) remaining = -1;
    if (pg_field(r, row, 0) == "s") {
      out.sessions.push_back(SessionInfo{pg_field(r, row, 1), pg_field(r, row, 2),
                                         reply_ms(std::max(0LL, remaining))});
    } else {
      LeaseInfo l;
      l.name = pg_field(r, row, 1);
      l.holder = pg_field(r, row, 2);
      l.token = token > 0 ? static_cast<uint64_t>(token) : 0;
      l.holder_remaining = l.holder.empty() ? Duration(-1) : reply_ms(std::max(0LL, remaining));
      long long kind = 0, permit = 0;
      if (permits && pg_field(r, row, 0) == "p") {
        // An entry of a kind or id this libsimba does not know is left out.
        if (!pg_field_int(r, row, 5, &kind) || !permit_kind(kind, &l.kind) ||
            !pg_field_int(r, row, 6, &permit) || permit <= 0) {
          continue;
        }
        l.permit = static_cast<uint64_t>(permit);
      }
      out.leases.push_back(std::move(l));
    }
  }
  out.outcome = Outcome::kOk;
  return out;
}

}  // namespace simba
