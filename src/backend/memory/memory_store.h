// The state of a memory:// backend: sessions that expire on the store's own
// clock, lease records name -> (session, token) that are never deleted (so a
// token never resets), release broadcast, and close freeing every lease at once.
// Thread-safe: clients on different loops of one process share a store.
#ifndef SIMBA_BACKEND_MEMORY_STORE_H
#define SIMBA_BACKEND_MEMORY_STORE_H

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend_types.h"
#include "core/name_index.h"
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
  AcquireReply acquire(const std::string& session, const std::string& name);
  // Frees the lease only if it is held by `session` with `token`; broadcasts.
  DoneReply release(const std::string& session, const std::string& name, uint64_t token);
  // Frees every lease of the session and deletes it; broadcasts each release.
  DoneReply close_session(const std::string& session);

  // Every live session and the leases `names` (every lease record when empty).
  InspectReply inspect(const std::vector<std::string>& names);

  // Release broadcast: `fn(name)` runs synchronously, without the store's lock,
  // for every release (`all_names`), or only for the releases of the names
  // the subscriber watches (watch()). Returns an id for unsubscribe.
  uint64_t subscribe(std::function<void(const std::string& name)> fn, bool all_names = true);
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
  // A lease record. Records are never erased (a token never resets), so they
  // live in a deque, whose elements never move, with no heap block of their
  // own; their names live in names_, and each session links the records it
  // holds. About 90 bytes per name ever leased, where a std::map of records
  // and a std::set per session cost 176 (ADR 0024).
  struct Lease {
    std::string_view name;      // in names_
    Session* holder = nullptr;  // null when free
    uint64_t token = 0;
    Lease* prev = nullptr;  // the holder's other records
    Lease* next = nullptr;
    Lease* next_of_name = nullptr;  // index_'s (always null: one record per name)
  };
  struct Session {
    const std::string* id = nullptr;  // its key in sessions_ (or foreign_)
    TimePoint expires_at = TimePoint::max();
    std::string client_name;
    Lease* leases = nullptr;  // the records it holds, linked through prev/next
    bool foreign = false;     // a hand_over holder that is no session: never expires
  };
  // The record of `name`; null when it never was leased.
  Lease* find_lease(std::string_view name) const;
  // The record of `name`, made (free, token 0) on first use.
  Lease& record(std::string_view name);
  // Gives `lease` (free) to `s`, or frees it from its holder.
  static void link(Lease& lease, Session& s);
  static void unlink(Lease& lease);
  // `s`'s records, sorted by name.
  static std::vector<Lease*> sorted_leases(const Session& s);
  bool live_locked(const std::string& session, TimePoint now);
  void expire_locked(const std::string& session, std::vector<std::string>* freed);
  void broadcast(const std::vector<std::string>& names);
  // One step of `session`, under the lock: `live(now, &freed)` when the
  // session is live, else it expires (its leases freed) and `gone()` runs.
  // What was freed is broadcast after the lock.
  template <typename Live, typename Gone>
  void with_session(const std::string& session, Live live, Gone gone) {
    std::vector<std::string> freed;
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
  std::deque<Lease> leases_;
  NameIndex<Lease> index_;  // from a name to its record
  // The records' names, packed in blocks.
  std::vector<std::unique_ptr<char[]>> name_blocks_;
  char* names_free_ = nullptr;
  size_t names_left_ = 0;
  uint64_t next_session_ = 1;
  struct Subscriber {
    std::function<void(const std::string&)> fn;
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
