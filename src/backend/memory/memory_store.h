// The state of a memory:// backend: sessions that expire on the store's own
// clock, lease records name -> (session, token) that are never deleted (so a
// token never resets), release broadcast, and close freeing every lease at once.
// Candidates (ADR 0047) wait beside the leases; a release hands a lease to one.
// Thread-safe: clients on different loops of one process share a store.
#ifndef SIMBA_BACKEND_MEMORY_STORE_H
#define SIMBA_BACKEND_MEMORY_STORE_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend_types.h"
#include "core/time.h"

namespace simba {

class MemoryStore {
 public:
  // The store's clock measures session expiry: the monotonic clock in the
  // engine, a virtual one in the simulation.
  explicit MemoryStore(const Clock& clock);

  // The process-wide store for memory://NAME, created on first use and kept for
  // the life of the process.
  static std::shared_ptr<MemoryStore> named(const std::string& name);

  OpenReply open_session(Duration lease_duration, const std::string& client_name = {});
  // Extends a live session by lease_duration and lists its leases.
  KeepAliveReply keep_alive(const std::string& session, Duration lease_duration);
  // kOk with token+1 if the lease is free or its holder's session expired;
  // kHeld with the holder's remaining time if another live session holds it;
  // kExpired if `session` is not live. A session that already holds the lease
  // gets kHeld too: a session never holds two terms of one name.
  // With a candidate ask, Backend::acquire_candidate says what it adds.
  AcquireReply acquire(const std::string& session, const std::string& name,
                       const CandidateAsk& ask = {});
  // Frees the lease only if it is held by `session` with `token`, handing it
  // to a candidate as release_handoff does; broadcasts.
  DoneReply release(const std::string& session, const std::string& name, uint64_t token);
  // Backend::release_handoff: the lease goes to `target`'s live candidate, else
  // the highest priority then the earliest live one, else it is freed.
  ReleaseReply release_handoff(const std::string& session, const std::string& name, uint64_t token,
                               const std::string& target);
  // Permits of semaphores and read/write locks (ADR 0046; Backend::acquire_permit
  // and release_permit say what each answers); release_permit of a kCandidate
  // entry withdraws it.
  AcquireReply acquire_permit(const std::string& session, const std::string& name,
                              const PermitAsk& ask);
  DoneReply release_permit(const std::string& session, const std::string& name, PermitKind kind,
                           uint64_t permit, uint64_t token);
  // Backend::write_run: the run record of `name` (ADR 0048), kept per name in
  // runs_, apart from the 24-byte lease records.
  RunReply write_run(const std::string& session, const std::string& name, uint64_t token,
                     const RunRecord& record);
  // Hands over or frees every lease of the session (as release_handoff) and
  // deletes it; broadcasts each release.
  DoneReply close_session(const std::string& session);

  // Every live session and the leases `names` (every lease record when empty).
  InspectReply inspect(const std::vector<std::string>& names);

  // Release broadcast: `fn(name)` runs synchronously, without the store's lock,
  // for every release (`all_names`), or only for the releases of the names
  // the subscriber watches (watch()). Returns an id for unsubscribe.
  uint64_t subscribe(std::function<void(const std::string& name)> fn, bool all_names = true);
  // The same, hearing each release's grant too (ADR 0047; empty when freed).
  using GrantFn = std::function<void(const std::string& name, const Grant& grant)>;
  uint64_t subscribe_grants(GrantFn fn, bool all_names);
  void unsubscribe(uint64_t id);
  // The subscriber `id` hears the releases of `name` from now on (ADR 0040).
  // Returns whether `name` is free now: a release the subscriber may have
  // missed just before. unwatch() undoes one watch().
  bool watch(uint64_t id, const std::string& name);
  void unwatch(uint64_t id, const std::string& name);

  // Test hooks.
  // Ends the session now, as if it had expired on the backend.
  void expire_session(const std::string& session);
  // Gives the lease to `session` (any string; need not be a live session),
  // incrementing the token, as a take-over by another node would; "" leaves
  // it free (with the token incremented all the same).
  uint64_t hand_over(const std::string& name, const std::string& session);

  struct LeaseView {
    std::string holder;  // empty when free (or the holder's session expired)
    uint64_t token = 0;  // the last token granted for the name
  };
  LeaseView lease(const std::string& name);
  bool session_live(const std::string& session);
  std::vector<std::string> live_sessions();

 private:
  struct Session;
  // A release to broadcast: the name and whom it went to.
  struct Released {
    Released(std::string n, Grant g = {}) : name(std::move(n)), grant(std::move(g)) {}
    std::string name;
    Grant grant;
  };
  using Freed = std::vector<Released>;
  static constexpr uint32_t kNone = UINT32_MAX;  // no record
  // A lease record: 24 bytes. Records are never erased (a token never resets),
  // so they live in chunks that never move, and refer to each other, their
  // names and their holders by 32-bit numbers; a session links the records it
  // holds (unlinking one is O(1) however many it holds). Per name ever leased,
  // about 55 bytes at 100,000 names with its characters and its index slots,
  // where 56-byte records in a deque with a NameIndex cost 99 (ADR 0024 for
  // the std::map before).
  struct Lease {
    uint64_t token = 0;
    uint32_t name = 0;      // where in name_blocks_ (name_of)
    uint32_t holder = 0;    // the holder's slot in holders_ + 1; 0 when free
    uint32_t prev = kNone;  // the holder's other records
    uint32_t next = kNone;
  };
  struct Session {
    const std::string* id = nullptr;  // its key in sessions_ (or foreign_)
    TimePoint expires_at = TimePoint::max();
    std::string client_name;
    uint32_t leases = kNone;  // the records it holds, linked through prev/next
    uint32_t slot = 0;        // in holders_
    bool foreign = false;     // a hand_over holder that is no session: never expires
    // The permit resources (permits_' keys) where it holds an entry.
    std::set<std::string, std::less<>> permit_resources;
    // The lease names (candidates_' keys) where it has a candidate entry.
    std::set<std::string, std::less<>> candidate_names;
  };
  // A lease's candidates (ADR 0047), apart from the 24-byte records like the
  // permits: one per name ever waited on, never erased, so ids never reset.
  struct CandidateEntry {
    uint64_t id;
    int32_t priority;
    std::string client;
    Session* session;  // a session of sessions_: expire_locked drops its entries
  };
  struct Candidates {
    uint64_t seq = 0;                     // the last candidate id taken
    std::vector<CandidateEntry> entries;  // in arrival order
  };
  // Drops `s`'s candidate entries of `name` (all when id is 0).
  void drop_candidates(Session& s, const std::string& name, uint64_t id = 0);
  // Takes record `i` (of `name`) from its holder and gives it to the chosen
  // live candidate (target's first), or frees it; notes it in *freed.
  Grant hand_off(uint32_t i, const std::string& name, const std::string& target, TimePoint now,
                 Freed* freed, bool* target_absent);
  // Permits live apart from the lease records, whose 24 bytes they leave
  // alone: one Permits per resource ever used (permit_resource(kind, name)),
  // never erased, so permit ids never reset.
  struct PermitEntry {
    PermitKind kind;
    uint64_t permit;
    uint64_t token;   // 0 for an intent
    Session* holder;  // a session of sessions_: expire_locked drops its entries
  };
  struct Permits {
    uint32_t size = 0;   // a semaphore's, set by its first holder, 0 without holders
    uint64_t seq = 0;    // the last permit id taken (grants and intents)
    uint64_t epoch = 0;  // a read/write lock's: the last writer's token
    std::vector<PermitEntry> entries;
  };
  // Drops `s`'s entries of `key`, noting the resource in *freed.
  void drop_permits(Session& s, const std::string& key, Freed* freed);
  // Expires the holders of `p`'s entries whose sessions ended by `now`.
  void sweep_permits(Permits& p, TimePoint now, Freed* freed);
  // Whether an acquire of `p` (of resource `key`) could be granted now.
  static bool permits_room(const std::string& key, const Permits& p);
  void grant_permit(Permits& p, const std::string& key, Session& s, PermitKind kind,
                    AcquireReply* reply);
  void held_permit(Permits& p, const std::string& key, Session& s, const PermitAsk& ask,
                   TimePoint now, AcquireReply* reply);
  // 2048 records (48 KiB) a chunk: a power of two, so at() is a shift and a mask.
  static constexpr unsigned kChunkBits = 11;
  Lease& at(uint32_t i) const { return chunks_[i >> kChunkBits][i & ((1u << kChunkBits) - 1)]; }
  std::string_view name_of(const Lease& lease) const;
  // The session holding `lease`; null when it is free.
  Session* holder_of(const Lease& lease) const {
    return lease.holder ? holders_[lease.holder - 1] : nullptr;
  }
  // Gives `s` a slot in holders_; drop_holder() frees it.
  void add_holder(Session& s);
  void drop_holder(const Session& s);
  // The index of `name`'s record; kNone when it never was leased.
  uint32_t find(std::string_view name) const;
  // The record of `name`; null when it never was leased.
  Lease* find_lease(std::string_view name) const;
  // The index of `name`'s record, made (free, token 0) on first use.
  uint32_t record(std::string_view name);
  // Copies `name` into name_blocks_, length-prefixed; where it is for Lease::name.
  uint32_t store_name(std::string_view name);
  // Puts record `i` in index_, which has room.
  void place(uint32_t i);
  // Gives record `i` (free) to `s`; unlink() frees it from its holder.
  void link(uint32_t i, Session& s);
  void unlink(Lease& lease);
  // `s`'s records, sorted by name.
  std::vector<Lease*> sorted_leases(const Session& s) const;
  bool live_locked(const std::string& session, TimePoint now);
  // `hand_over`: a close, whose leases go to candidates; an expiry frees them.
  void expire_locked(const std::string& session, Freed* freed, bool hand_over = false);
  void broadcast(const Freed& names);
  // One step of `session`, under the lock: `live(now, &freed)` when the
  // session is live, else it expires (its leases freed) and `gone()` runs.
  // What was freed is broadcast after the lock.
  template <typename Live, typename Gone>
  void with_session(const std::string& session, Live live, Gone gone) {
    Freed freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const TimePoint now = clock_.now();
      if (live_locked(session, now)) {
        live(now, &freed);
      } else {
        expire_locked(session, &freed);
        gone();
      }
    }
    broadcast(freed);
  }

  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Session> sessions_;
  std::map<std::string, Session> foreign_;  // hand_over holders that are no session
  std::map<std::string, Permits, std::less<>> permits_;
  std::map<std::string, Candidates, std::less<>> candidates_;
  // The run records (ADR 0048) by lease name; never erased.
  std::map<std::string, RunRecord, std::less<>> runs_;
  std::optional<RunRecord> run_of(std::string_view name) const {
    auto it = runs_.find(name);
    return it == runs_.end() ? std::nullopt : std::optional<RunRecord>(it->second);
  }
  std::vector<std::unique_ptr<Lease[]>> chunks_;  // the records
  uint32_t leases_ = 0;                           // records made
  // From a name to its record: open addressing with linear probing, slots
  // holding a record's index + 1 (0: empty), 3/8 to 3/4 full. 4-byte slots,
  // where an OpenTable of pointers costs 8; nothing is ever erased.
  std::vector<uint32_t> index_;
  // The sessions and foreign holders by slot (null: a free slot, listed in
  // free_holders_), for Lease::holder.
  std::vector<Session*> holders_;
  std::vector<uint32_t> free_holders_;
  // The records' names, packed in blocks of 64 KiB (a longer name gets a
  // block of its own); a name's place is its block << 16 | its offset.
  std::vector<std::unique_ptr<char[]>> name_blocks_;
  char* names_free_ = nullptr;
  size_t names_left_ = 0;
  uint64_t next_session_ = 1;
  struct Subscriber {
    GrantFn fn;
    bool all_names = true;
  };
  std::map<uint64_t, Subscriber> subscribers_;
  uint64_t next_subscriber_ = 1;
  // Per watched name, the subscribers (not all_names) that watch it: a release
  // wakes only these, not every client of the store.
  std::map<std::string, std::vector<uint64_t>, std::less<>> watchers_;
};

}  // namespace simba

#endif
