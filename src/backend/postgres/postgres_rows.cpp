#include "backend/postgres/postgres_rows.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "backend/reply_parts.h"

namespace simba {
namespace {

bool in_range(const PGresult* r, int row, int col) {
  return row >= 0 && col >= 0 && row < PQntuples(r) && col < PQnfields(r);
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

KeepAliveReply decode_pg_keep_alive(const PGresult* r) {
  // Rows (v, name, token): one with name NULL whose v is the remaining time (ms,
  // negative when the session is gone), and one per lease held.
  KeepAliveReply out;
  long long remaining = -2;
  bool bad = PQnfields(r) != 3;
  for (int row = 0; !bad && row < PQntuples(r); ++row) {
    long long v = 0;
    if (!pg_field_int(r, row, 0, &v)) {
      bad = true;
    } else if (PQgetisnull(r, row, 1)) {
      remaining = v;
    } else {
      long long token = 0;
      if (!pg_field_int(r, row, 2, &token) || token <= 0) {
        bad = true;
      } else {
        out.owned.push_back(OwnedLease{pg_field(r, row, 1), static_cast<uint64_t>(token)});
      }
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
    std::sort(out.owned.begin(), out.owned.end(),
              [](const OwnedLease& a, const OwnedLease& b) { return a.name < b.name; });
  }
  return out;
}

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

InspectReply decode_pg_inspect(const PGresult* r) {
  // Rows (kind, id or name, client or holder, token, remaining ms); kind "s" is
  // a session, anything else a lease.
  InspectReply out;
  if (PQnfields(r) != 5) {
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
      out.leases.push_back(std::move(l));
    }
  }
  out.outcome = Outcome::kOk;
  return out;
}

}  // namespace simba
