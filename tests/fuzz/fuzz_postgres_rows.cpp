// The PostgreSQL backend's row decoders, fed with results of any shape (field
// count, NULLs, values with embedded NULs, huge numbers) built through libpq's
// own PGresult functions, as a server or a changed schema could answer.
#include <libpq-fe.h>

#include <vector>

#include "backend/postgres/postgres_rows.h"
#include "fuzz_common.h"

namespace {

constexpr int64_t kMaxNs = 1'000'000'000'000LL * 1'000'000LL;

void check_duration(simba::Duration d, const char* what) {
  FUZZ_CHECK(d.count() >= -kMaxNs && d.count() <= kMaxNs, "%s out of bounds", what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const int nfields = in.byte() % 8;
  const int nrows = in.byte() % 16;
  PGresult* r = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  if (!r) return 0;
  std::vector<PGresAttDesc> attrs(static_cast<size_t>(nfields));
  std::vector<std::string> names(static_cast<size_t>(nfields));
  for (int f = 0; f < nfields; ++f) {
    names[f] = "f" + std::to_string(f);
    attrs[f] = PGresAttDesc{const_cast<char*>(names[f].c_str()), 0, 0, 0, 25 /* text */, -1, -1};
  }
  if (nfields == 0 || PQsetResultAttrs(r, nfields, attrs.data())) {
    for (int row = 0; row < nrows && nfields > 0 && !in.empty(); ++row) {
      for (int f = 0; f < nfields; ++f) {
        const uint8_t kind = in.byte();
        if (kind % 5 == 0) {
          PQsetvalue(r, row, f, nullptr, -1);  // NULL
        } else {
          std::string v = in.str(64);
          PQsetvalue(r, row, f, v.data(), static_cast<int>(v.size()));
        }
      }
    }
    const simba::OpenReply o = simba::decode_pg_open(r, "sid");
    if (o.outcome == simba::Outcome::kOk) check_duration(o.remaining, "open remaining");
    const simba::KeepAliveReply k = simba::decode_pg_keep_alive(r);
    if (k.outcome == simba::Outcome::kOk) {
      FUZZ_CHECK(k.remaining.count() >= 0, "negative keep-alive remaining");
      check_duration(k.remaining, "keep-alive remaining");
      for (const auto& l : k.owned) FUZZ_CHECK(l.token > 0 && l.token <= INT64_MAX, "token");
    } else {
      FUZZ_CHECK(k.owned.empty(), "leases listed with a failed keep-alive");
    }
    const simba::KeepAliveReply ka = simba::decode_pg_keep_alive_all(r);
    if (ka.outcome == simba::Outcome::kOk) {
      check_duration(ka.remaining, "keep-alive remaining");
      for (const auto& l : ka.owned) {
        FUZZ_CHECK(l.token <= INT64_MAX && l.permit <= INT64_MAX, "entry");
        FUZZ_CHECK(
            l.kind == simba::PermitKind::kLease ? l.token > 0 && l.permit == 0 : l.permit > 0,
            "entry of its kind");
      }
    } else {
      FUZZ_CHECK(ka.owned.empty(), "entries listed with a failed keep-alive");
    }
    const simba::AcquireReply ap = simba::decode_pg_acquire_permit(r);
    if (ap.outcome == simba::Outcome::kOk) FUZZ_CHECK(ap.permit > 0, "permit 0 granted");
    if (ap.outcome == simba::Outcome::kRefused) FUZZ_CHECK(ap.size > 0, "refused without a size");
    if (ap.outcome == simba::Outcome::kHeld) check_duration(ap.holder_remaining, "holder");
    const simba::AcquireReply a = simba::decode_pg_acquire(r);
    if (a.outcome == simba::Outcome::kOk) FUZZ_CHECK(a.token > 0, "token 0 granted");
    if (a.outcome == simba::Outcome::kHeld) check_duration(a.holder_remaining, "holder");
    const simba::InspectReply i = simba::decode_pg_inspect(r);
    for (const auto& s : i.sessions) check_duration(s.remaining, "session remaining");
    for (const auto& l : i.leases) check_duration(l.holder_remaining, "lease remaining");
    // Out-of-range reads are refused, not performed.
    long long v = 0;
    FUZZ_CHECK(!simba::pg_field_int(r, nrows + 1, 0, &v), "row out of range read");
    FUZZ_CHECK(!simba::pg_field_int(r, 0, nfields, &v), "field out of range read");
    FUZZ_CHECK(simba::pg_field(r, -1, -1).empty(), "negative index read");
  }
  PQclear(r);
  return 0;
}
