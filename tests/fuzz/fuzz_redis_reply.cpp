// The Redis backend's reply decoders, fed with every reply the hiredis reader
// (the one hiredis' async context uses, with Simba's limits) makes of the
// input bytes, as a hostile server or network could send them.
#include <hiredis/hiredis.h>

#include "backend/redis/redis_replies.h"
#include "fuzz_common.h"

namespace {

constexpr int64_t kMaxNs = 1'000'000'000'000LL * 1'000'000LL;  // the decoders' ceiling

void check_duration(simba::Duration d, const char* what) {
  FUZZ_CHECK(d.count() >= -kMaxNs && d.count() <= kMaxNs, "%s out of bounds", what);
}

void decode_all(const redisReply* r) {
  (void)simba::reply_str(r);
  long long v = 0;
  (void)simba::reply_int(r, &v);
  if (r->type != REDIS_REPLY_ERROR) {
    const simba::OpenReply o = simba::decode_open_reply(r, "sid");
    if (o.outcome == simba::Outcome::kOk) check_duration(o.remaining, "open remaining");
    FUZZ_CHECK(o.outcome == simba::Outcome::kOk || !o.error.empty(), "open without error");

    const simba::KeepAliveReply k = simba::decode_keep_alive_reply(r);
    if (k.outcome == simba::Outcome::kOk) {
      FUZZ_CHECK(k.remaining.count() >= 0, "negative keep-alive remaining");
      check_duration(k.remaining, "keep-alive remaining");
      for (const auto& l : k.owned) {
        // A permit entry's token may be 0 (a reader before any writer, an intent).
        FUZZ_CHECK(l.token <= INT64_MAX && (l.token > 0 || l.kind != simba::PermitKind::kLease),
                   "token");
        FUZZ_CHECK((l.kind == simba::PermitKind::kLease) == (l.permit == 0), "permit id");
      }
    } else {
      FUZZ_CHECK(k.owned.empty(), "leases listed with a failed keep-alive");
    }

    const simba::AcquireReply a = simba::decode_acquire_reply(r);
    if (a.outcome == simba::Outcome::kOk) FUZZ_CHECK(a.token > 0, "token 0 granted");
    if (a.outcome == simba::Outcome::kHeld) check_duration(a.holder_remaining, "holder");

    const simba::AcquireReply ap = simba::decode_acquire_permit_reply(r);
    if (ap.outcome == simba::Outcome::kOk) FUZZ_CHECK(ap.permit > 0, "permit 0 granted");
    if (ap.outcome == simba::Outcome::kRefused) FUZZ_CHECK(ap.size > 0, "refused without size");
    if (ap.outcome == simba::Outcome::kHeld) check_duration(ap.holder_remaining, "holder");

    const simba::RunReply w = simba::decode_write_run_reply(r);
    FUZZ_CHECK(w.outcome != simba::Outcome::kOk || w.stored.has_value(), "applied without record");
    FUZZ_CHECK((w.outcome == simba::Outcome::kRefused) == (w.refused != simba::RunRefusal::kNone),
               "refusal reason");
    if (w.stored) FUZZ_CHECK(w.stored->token <= INT64_MAX, "run token");

    const simba::InspectReply i = simba::decode_inspect_reply(r);
    for (const auto& s : i.sessions) check_duration(s.remaining, "session remaining");
    for (const auto& l : i.leases) check_duration(l.holder_remaining, "lease remaining");
  }
  (void)simba::decode_subscriber_message(r, "simba:released:");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  redisReader* reader = simba::make_redis_reader();
  if (!reader) return 0;
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
    for (int n = 0; n < 64; ++n) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK || !reply) break;
      decode_all(static_cast<redisReply*>(reply));
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
