#include "backend/memory/memory_store.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <utility>

#include "backend/backend_parts.h"

namespace simba {

namespace {

// now + lease, saturating instead of overflowing for an absurdly long lease.
TimePoint expiry_after(TimePoint now, Duration lease) {
  const Duration since_origin = now.time_since_epoch();
  if (since_origin > Duration::zero() && lease > Duration::max() - since_origin) {
    return TimePoint::max();
  }
  return now + lease;
}

constexpr char kBadLease[] = "lease duration must be positive";

}  // namespace

MemoryStore::MemoryStore(const Clock& clock) : clock_(clock) {}

std::string_view MemoryStore::name_of(const Lease& lease) const {
  static_assert(sizeof(Lease) == 24, "a record is 24 bytes: see the comment on Lease");
  // The length in 7-bit groups, low first (one byte below 128), then the characters.
  const char* p = name_blocks_[lease.name >> 16].get() + (lease.name & 0xffff);
  size_t size = 0;
  for (unsigned shift = 0;; shift += 7) {
    const auto byte = static_cast<unsigned char>(*p++);
    size |= static_cast<size_t>(byte & 0x7f) << shift;
    if (byte < 0x80) break;
  }
  return std::string_view(p, size);
}

uint32_t MemoryStore::find(std::string_view name) const {
  if (index_.empty()) return kNone;
  const size_t mask = index_.size() - 1;
  for (size_t slot = std::hash<std::string_view>{}(name)&mask;; slot = (slot + 1) & mask) {
    if (index_[slot] == 0) return kNone;
    if (name_of(at(index_[slot] - 1)) == name) return index_[slot] - 1;
  }
}

MemoryStore::Lease* MemoryStore::find_lease(std::string_view name) const {
  const uint32_t i = find(name);
  return i == kNone ? nullptr : &at(i);
}

void MemoryStore::place(uint32_t i) {
  const size_t mask = index_.size() - 1;
  size_t slot = std::hash<std::string_view>{}(name_of(at(i))) & mask;
  while (index_[slot] != 0) slot = (slot + 1) & mask;
  index_[slot] = i + 1;
}

uint32_t MemoryStore::store_name(std::string_view name) {
  char prefix[10];
  size_t prefix_size = 0;
  for (size_t size = name.size();; size >>= 7) {
    prefix[prefix_size++] = static_cast<char>((size & 0x7f) | (size > 0x7f ? 0x80 : 0));
    if (size <= 0x7f) break;
  }
  const size_t need = prefix_size + name.size();
  constexpr size_t kNameBlock = 64 * 1024;
  if (need > names_left_) {
    if (name_blocks_.size() == kNameBlock) throw std::length_error("memory:// store: names full");
    const size_t size = std::max(kNameBlock, need);
    name_blocks_.push_back(std::make_unique<char[]>(size));
    names_free_ = name_blocks_.back().get();
    names_left_ = size;
  }
  const auto offset = static_cast<uint32_t>(names_free_ - name_blocks_.back().get());
  std::copy(name.begin(), name.end(), std::copy(prefix, prefix + prefix_size, names_free_));
  names_free_ += need;
  names_left_ -= need;
  return static_cast<uint32_t>(name_blocks_.size() - 1) << 16 | offset;
}

uint32_t MemoryStore::record(std::string_view name) {
  const uint32_t found = find(name);
  if (found != kNone) return found;
  // kNone itself is no index; index_ holds index + 1 in 32 bits.
  if (leases_ == kNone) throw std::length_error("memory:// store: too many lease names");
  const uint32_t stored = store_name(name);  // first: it may throw
  constexpr uint32_t kChunk = 1u << kChunkBits;
  if (leases_ % kChunk == 0) chunks_.push_back(std::make_unique<Lease[]>(kChunk));
  const uint32_t i = leases_++;
  at(i).name = stored;
  if (size_t{leases_} * 4 > index_.size() * 3) {
    // Grows by doubling (16 slots first) and places every record again.
    index_.assign(index_.empty() ? 16 : index_.size() * 2, 0);
    for (uint32_t j = 0; j < leases_; ++j) place(j);
  } else {
    place(i);
  }
  return i;
}

void MemoryStore::link(uint32_t i, Session& s) {
  Lease& lease = at(i);
  lease.holder = s.slot + 1;
  lease.prev = kNone;
  lease.next = s.leases;
  if (s.leases != kNone) at(s.leases).prev = i;
  s.leases = i;
}

void MemoryStore::unlink(Lease& lease) {
  Session* holder = holder_of(lease);
  if (holder == nullptr) return;
  if (lease.prev != kNone) {
    at(lease.prev).next = lease.next;
  } else {
    holder->leases = lease.next;
  }
  if (lease.next != kNone) at(lease.next).prev = lease.prev;
  lease.holder = 0;
  lease.prev = lease.next = kNone;
}

std::vector<MemoryStore::Lease*> MemoryStore::sorted_leases(const Session& s) const {
  std::vector<Lease*> sorted;
  for (uint32_t i = s.leases; i != kNone; i = at(i).next) sorted.push_back(&at(i));
  std::sort(sorted.begin(), sorted.end(),
            [this](const Lease* a, const Lease* b) { return name_of(*a) < name_of(*b); });
  return sorted;
}

void MemoryStore::add_holder(Session& s) {
  if (free_holders_.empty()) {
    // Slot + 1 is a Lease::holder; kNone - 1 slots are more sessions than memory holds.
    s.slot = static_cast<uint32_t>(holders_.size());
    holders_.push_back(&s);
  } else {
    s.slot = free_holders_.back();
    free_holders_.pop_back();
    holders_[s.slot] = &s;
  }
}

void MemoryStore::drop_holder(const Session& s) {
  holders_[s.slot] = nullptr;
  free_holders_.push_back(s.slot);
}

std::shared_ptr<MemoryStore> MemoryStore::named(const std::string& name) {
  struct Registry {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<MemoryStore>> stores;
  };
  // Never destroyed: a client on another thread may still reach its store while
  // the process exits, after function-local statics would have been torn down.
  static Registry& registry = *new Registry;
  std::lock_guard<std::mutex> lock(registry.mu);
  std::shared_ptr<MemoryStore>& store = registry.stores[name];
  if (!store) store = std::make_shared<MemoryStore>(MonotonicClock::instance());
  return store;
}

bool MemoryStore::live_locked(const std::string& session, TimePoint now) {
  auto it = sessions_.find(session);
  // A session is expired from the instant now reaches expires_at.
  return it != sessions_.end() && it->second.expires_at > now;
}

// Removes the session (live or not) and frees every lease it holds, appending
// the freed names to *freed for a broadcast once the lock is released. Lease
// records stay, so their tokens keep counting up. No-op for an unknown session.
void MemoryStore::expire_locked(const std::string& session, Freed* freed, bool hand_over) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  // Its candidates go first: a closing session is never chosen.
  const std::set<std::string, std::less<>> waits = it->second.candidate_names;
  for (const std::string& name : waits) drop_candidates(it->second, name);
  const TimePoint now = clock_.now();
  for (Lease* lease : sorted_leases(it->second)) {
    const std::string name(name_of(*lease));
    if (hand_over) {
      bool absent = false;
      hand_off(find(name), name, {}, now, freed, &absent);
    } else {
      freed->push_back(name);
      unlink(*lease);
    }
  }
  const std::set<std::string, std::less<>> resources = it->second.permit_resources;
  for (const std::string& key : resources) drop_permits(it->second, key, freed);
  drop_holder(it->second);
  sessions_.erase(it);
}

// Runs outside the lock, on a copy of the subscriber list, so that a subscriber
// may call back into the store (acquire the freed lease, unsubscribe itself).
void MemoryStore::broadcast(const Freed& names) {
  if (names.empty()) return;
  // Per name, who hears it: the subscribers of every name, then its watchers.
  std::vector<std::vector<GrantFn>> hearers(names.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < names.size(); ++i) {
      for (const auto& [id, sub] : subscribers_) {
        if (sub.all_names) hearers[i].push_back(sub.fn);
      }
      auto w = watchers_.find(names[i].name);
      if (w == watchers_.end()) continue;
      for (uint64_t id : w->second) {
        auto sub = subscribers_.find(id);
        if (sub != subscribers_.end()) hearers[i].push_back(sub->second.fn);
      }
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (const auto& fn : hearers[i]) fn(names[i].name, names[i].grant);
  }
}

OpenReply MemoryStore::open_session(Duration lease_duration, const std::string& client_name) {
  OpenReply reply;
  if (lease_duration <= Duration::zero()) {
    reply.error = kBadLease;
    return reply;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::string id;
  try {
    // Expired sessions are removed, so only a live id can collide here; a
    // collision with any id ever issued is as likely as guessing 128 bits.
    do {
      id = random_session_id();
    } while (sessions_.count(id) != 0);
  } catch (const std::exception& e) {
    reply.error = std::string("no random source for a session id: ") + e.what();
    return reply;
  }
  ++next_session_;  // Counts the sessions opened; ids themselves are random.
  auto entry = sessions_.try_emplace(id).first;
  Session& s = entry->second;
  s.id = &entry->first;
  s.expires_at = expiry_after(clock_.now(), lease_duration);
  s.client_name = client_name;
  add_holder(s);
  reply.outcome = Outcome::kOk;
  reply.session_id = std::move(id);
  reply.remaining = lease_duration;
  return reply;
}

KeepAliveReply MemoryStore::keep_alive(const std::string& session, Duration lease_duration) {
  KeepAliveReply reply;
  if (lease_duration <= Duration::zero()) {
    reply.error = kBadLease;
    return reply;
  }
  with_session(
      session,
      [&](TimePoint now, Freed*) {
        Session& s = sessions_.find(session)->second;
        s.expires_at = expiry_after(now, lease_duration);
        reply.outcome = Outcome::kOk;
        reply.remaining = lease_duration;
        const std::vector<Lease*> leases = sorted_leases(s);
        reply.owned.reserve(leases.size());
        for (const Lease* lease : leases) {
          reply.owned.push_back(OwnedLease{std::string(name_of(*lease)), lease->token});
        }
        for (const std::string& name : s.candidate_names) {
          for (const CandidateEntry& e : candidates_.find(name)->second.entries) {
            if (e.session == &s) {
              reply.owned.push_back(OwnedLease{name, 0, PermitKind::kCandidate, e.id});
            }
          }
        }
        for (const std::string& key : s.permit_resources) {
          const std::string name = key.substr(key.find('/') + 1);
          for (const PermitEntry& e : permits_.find(key)->second.entries) {
            if (e.holder == &s) reply.owned.push_back(OwnedLease{name, e.token, e.kind, e.permit});
          }
        }
      },
      // Never revived: an expired session stays expired, its leases freed.
      [&] { reply.outcome = Outcome::kExpired; });
  return reply;
}

AcquireReply MemoryStore::acquire(const std::string& session, const std::string& name,
                                  const CandidateAsk& ask) {
  AcquireReply reply;
  with_session(
      session,
      [&](TimePoint now, Freed* freed) {
        const uint32_t i = record(name);  // A new one: token 0.
        Lease& lease = at(i);
        Session& s = sessions_.find(session)->second;
        // A holder that is no session of this store (set by hand_over) stands
        // for a foreign node whose session never expires here.
        const Session* holder = holder_of(lease);
        if (holder && holder != &s && !holder->foreign && holder->expires_at <= now) {
          const std::string expired = *holder->id;  // expire_locked erases the session.
          expire_locked(expired, freed);
          holder = nullptr;
        }
        auto waiting = candidates_.find(name);
        CandidateEntry* mine = nullptr;
        if (waiting != candidates_.end() && ask.id != 0) {
          for (CandidateEntry& e : waiting->second.entries) {
            if (e.id == ask.id && e.session == &s) mine = &e;
          }
        }
        if (holder == &s && ask.id != 0 && !mine) {
          // A release handed it to this candidate: the grant is the answer.
          reply.outcome = Outcome::kOk;
          reply.token = lease.token;
          reply.run = run_of(name);
        } else if (!holder) {
          if (mine) drop_candidates(s, name, ask.id);  // the grant takes its entry
          ++lease.token;
          link(i, s);
          reply.outcome = Outcome::kOk;
          reply.token = lease.token;
          reply.run = run_of(name);
          // Freed and taken in one step: nobody could have acquired it, so
          // waking candidates for it would only cost them a Held.
          for (auto it = freed->begin(); it != freed->end(); ++it) {
            if (it->name == name) {
              freed->erase(it);
              break;
            }
          }
        } else {
          // Held by another live session, a foreign holder, or this session
          // itself (never two terms of one name for one session).
          reply.outcome = Outcome::kHeld;
          if (!holder->foreign) reply.holder_remaining = holder->expires_at - now;
          if (!ask.leave) return;
          // A waiting contender keeps its entry (its priority may have moved), or leaves one.
          if (!mine) {
            Candidates& c = candidates_[name];
            c.entries.push_back(CandidateEntry{++c.seq, 0, {}, &s});
            s.candidate_names.insert(name);
            mine = &c.entries.back();
          }
          mine->priority = ask.priority;
          mine->client = ask.client;
          reply.permit = mine->id;
        }
      },
      [&] { reply.outcome = Outcome::kExpired; });
  return reply;
}

DoneReply MemoryStore::release(const std::string& session, const std::string& name,
                               uint64_t token) {
  DoneReply reply;
  reply.outcome = release_handoff(session, name, token, {}).outcome;
  return reply;
}

ReleaseReply MemoryStore::release_handoff(const std::string& session, const std::string& name,
                                          uint64_t token, const std::string& target) {
  ReleaseReply reply;
  with_session(
      session,
      [&](TimePoint now, Freed* freed) {
        const uint32_t i = find(name);
        // Both must match: a late release carrying an older term's token must
        // not free a later term of the same session or of another one.
        if (i != kNone && holder_of(at(i)) == &sessions_.find(session)->second &&
            at(i).token == token) {
          reply.grant = hand_off(i, name, target, now, freed, &reply.target_absent);
        }
      },
      // Harmless: an expired session's leases are freed by its expiry anyway.
      [] {});
  reply.outcome = Outcome::kOk;
  return reply;
}

RunReply MemoryStore::write_run(const std::string& session, const std::string& name, uint64_t token,
                                const RunRecord& record) {
  RunReply reply;
  with_session(
      session,
      [&](TimePoint, Freed*) {
        const Lease* lease = find_lease(name);
        auto run = runs_.find(name);
        const bool holds =
            lease && holder_of(*lease) == &sessions_.find(session)->second && lease->token == token;
        // A start needs a period above the stored one; an end, the stored one.
        const bool start = record.outcome == RunOutcome::kRunning;
        const bool period_ok = run == runs_.end() ? start
                               : start            ? run->second.period_id < record.period_id
                                                  : run->second.period_id == record.period_id;
        reply.outcome = Outcome::kRefused;
        if (!holds) {
          reply.refused = RunRefusal::kNotHolder;
        } else if (!period_ok) {
          reply.refused = RunRefusal::kPeriod;
        } else {
          run = runs_.insert_or_assign(name, record).first;
          reply.outcome = Outcome::kOk;
        }
        if (run != runs_.end()) reply.stored = run->second;
      },
      [&] { reply.outcome = Outcome::kExpired; });
  return reply;
}

// ---------------------------------------------------------------------------
// Candidates (ADR 0047)

void MemoryStore::drop_candidates(Session& s, const std::string& name, uint64_t id) {
  auto c = candidates_.find(name);
  if (c == candidates_.end()) return;
  auto& entries = c->second.entries;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const CandidateEntry& e) {
                                 return e.session == &s && (id == 0 || e.id == id);
                               }),
                entries.end());
  if (std::none_of(entries.begin(), entries.end(),
                   [&](const CandidateEntry& e) { return e.session == &s; })) {
    s.candidate_names.erase(name);
  }
}

Grant MemoryStore::hand_off(uint32_t i, const std::string& name, const std::string& target,
                            TimePoint now, Freed* freed, bool* target_absent) {
  unlink(at(i));
  auto c = candidates_.find(name);
  const CandidateEntry* chosen = nullptr;
  if (c != candidates_.end()) {
    // Only live sessions count: a dead candidate's session ends here, its
    // entries (and leases) with it.
    std::vector<std::string> dead;
    for (const CandidateEntry& e : c->second.entries) {
      if (e.session->expires_at <= now) dead.push_back(*e.session->id);
    }
    for (const std::string& d : dead) expire_locked(d, freed);
    const auto& entries = c->second.entries;
    if (!target.empty()) {
      auto t = std::find_if(entries.begin(), entries.end(),
                            [&](const CandidateEntry& e) { return e.client == target; });
      if (t != entries.end()) chosen = &*t;
    }
    if (chosen == nullptr) {
      // The highest priority, then the earliest: entries are in arrival order.
      for (const CandidateEntry& e : entries) {
        if (chosen == nullptr || e.priority > chosen->priority) chosen = &e;
      }
    }
  }
  if (!target.empty() && (chosen == nullptr || chosen->client != target)) *target_absent = true;
  if (chosen == nullptr) {
    freed->push_back(name);
    return {};
  }
  Session& next = *chosen->session;
  drop_candidates(next, name, chosen->id);  // `chosen` dangles from here
  ++at(i).token;
  link(i, next);
  Grant grant{*next.id, at(i).token};
  freed->push_back(Released{name, grant});
  return grant;
}

// ---------------------------------------------------------------------------
// Permits (ADR 0046)

void MemoryStore::drop_permits(Session& s, const std::string& key, Freed* freed) {
  auto p = permits_.find(key);
  s.permit_resources.erase(key);
  if (p == permits_.end()) return;
  auto& entries = p->second.entries;
  const size_t before = entries.size();
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const PermitEntry& e) { return e.holder == &s; }),
                entries.end());
  if (entries.size() == before) return;
  if (entries.empty()) p->second.size = 0;  // the next first holder sets it
  freed->push_back(key);
}

void MemoryStore::sweep_permits(Permits& p, TimePoint now, Freed* freed) {
  std::vector<std::string> ended;
  for (const PermitEntry& e : p.entries) {
    if (e.holder->expires_at <= now &&
        std::find(ended.begin(), ended.end(), *e.holder->id) == ended.end()) {
      ended.push_back(*e.holder->id);
    }
  }
  for (const std::string& session : ended) expire_locked(session, freed);
}

bool MemoryStore::permits_room(const std::string& key, const Permits& p) {
  if (key.compare(0, 4, "sem/") == 0) return p.entries.size() < p.size || p.entries.empty();
  bool read = false, write = false, intent = false;
  for (const PermitEntry& e : p.entries) {
    read |= e.kind == PermitKind::kRead;
    write |= e.kind == PermitKind::kWrite;
    intent |= e.kind == PermitKind::kIntent;
  }
  // A writer could go, or a reader could.
  return (!read && !write) || (!write && !intent);
}

void MemoryStore::grant_permit(Permits& p, const std::string& key, Session& s, PermitKind kind,
                               AcquireReply* reply) {
  const uint64_t permit = ++p.seq;
  uint64_t token = permit;  // a semaphore's and a writer's
  if (kind == PermitKind::kWrite) p.epoch = permit;
  if (kind == PermitKind::kRead) token = p.epoch;
  p.entries.push_back(PermitEntry{kind, permit, token, &s});
  s.permit_resources.insert(key);
  reply->outcome = Outcome::kOk;
  reply->permit = permit;
  reply->token = token;
}

void MemoryStore::held_permit(Permits& p, const std::string& key, Session& s, const PermitAsk& ask,
                              TimePoint now, AcquireReply* reply) {
  reply->outcome = Outcome::kHeld;
  // The first holder's remaining time: the core retries after it, in case it died.
  for (const PermitEntry& e : p.entries) {
    if (e.kind != PermitKind::kIntent && e.holder != &s) {
      const Duration left = e.holder->expires_at - now;
      if (reply->holder_remaining < Duration::zero() || left < reply->holder_remaining) {
        reply->holder_remaining = left;
      }
    }
  }
  if (ask.kind != PermitKind::kWrite || !ask.leave_intent) return;
  // A blocking writer keeps its intent, or leaves one.
  for (const PermitEntry& e : p.entries) {
    if (e.kind == PermitKind::kIntent && e.permit == ask.intent && e.holder == &s) {
      reply->permit = e.permit;
      return;
    }
  }
  reply->permit = ++p.seq;
  p.entries.push_back(PermitEntry{PermitKind::kIntent, reply->permit, 0, &s});
  s.permit_resources.insert(key);  // listed, and dropped with the session
}

AcquireReply MemoryStore::acquire_permit(const std::string& session, const std::string& name,
                                         const PermitAsk& ask) {
  AcquireReply reply;
  const bool semaphore = ask.kind == PermitKind::kSemaphore;
  if (!semaphore && ask.kind != PermitKind::kRead && ask.kind != PermitKind::kWrite) {
    reply.error = "memory backend: no such permit kind";
    return reply;
  }
  if (semaphore && ask.size == 0) {
    reply.error = "memory backend: a semaphore's size must be positive";
    return reply;
  }
  const std::string key = permit_resource(ask.kind, name);
  with_session(
      session,
      [&](TimePoint now, Freed* freed) {
        Permits& p = permits_[key];
        sweep_permits(p, now, freed);
        Session& s = sessions_.find(session)->second;
        bool in_the_way = false;
        for (const PermitEntry& e : p.entries) {
          if (ask.kind == PermitKind::kRead) {
            in_the_way |= e.kind == PermitKind::kWrite || e.kind == PermitKind::kIntent;
          } else if (ask.kind == PermitKind::kWrite) {
            in_the_way |= e.kind == PermitKind::kWrite || e.kind == PermitKind::kRead;
          }
        }
        if (semaphore) {
          if (!p.entries.empty() && p.size != ask.size) {
            reply.outcome = Outcome::kRefused;
            reply.size = p.size;
            return;
          }
          if (p.entries.empty()) p.size = ask.size;
          in_the_way = p.entries.size() >= p.size;
        }
        if (in_the_way) {
          held_permit(p, key, s, ask, now, &reply);
          return;
        }
        if (ask.kind == PermitKind::kWrite && ask.intent != 0) {
          // The grant deletes the writer's intent in the same step.
          auto& entries = p.entries;
          entries.erase(std::remove_if(entries.begin(), entries.end(),
                                       [&](const PermitEntry& e) {
                                         return e.kind == PermitKind::kIntent &&
                                                e.permit == ask.intent && e.holder == &s;
                                       }),
                        entries.end());
        }
        grant_permit(p, key, s, ask.kind, &reply);
      },
      [&] { reply.outcome = Outcome::kExpired; });
  return reply;
}

DoneReply MemoryStore::release_permit(const std::string& session, const std::string& name,
                                      PermitKind kind, uint64_t permit, uint64_t token) {
  if (kind == PermitKind::kCandidate) {
    // A withdrawn candidate frees nothing: no broadcast.
    with_session(
        session,
        [&](TimePoint, Freed*) {
          if (token == 0) drop_candidates(sessions_.find(session)->second, name, permit);
        },
        [] {});
    DoneReply reply;
    reply.outcome = Outcome::kOk;
    return reply;
  }
  const std::string key = permit_resource(kind, name);
  with_session(
      session,
      [&](TimePoint, Freed* freed) {
        auto p = permits_.find(key);
        if (p == permits_.end()) return;
        Session& s = sessions_.find(session)->second;
        auto& entries = p->second.entries;
        // Session, permit and token must all match, as a lease's release.
        auto it = std::find_if(entries.begin(), entries.end(), [&](const PermitEntry& e) {
          return e.kind == kind && e.permit == permit && e.token == token && e.holder == &s;
        });
        if (it == entries.end()) return;
        entries.erase(it);
        if (entries.empty()) p->second.size = 0;
        if (std::none_of(entries.begin(), entries.end(),
                         [&](const PermitEntry& e) { return e.holder == &s; })) {
          s.permit_resources.erase(key);
        }
        freed->push_back(key);  // an intent withdrawn wakes the readers it held back
      },
      [] {});
  DoneReply reply;
  reply.outcome = Outcome::kOk;
  return reply;
}

DoneReply MemoryStore::close_session(const std::string& session) {
  Freed freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expire_locked(session, &freed, /*hand_over=*/true);
  }
  broadcast(freed);
  DoneReply reply;
  reply.outcome = Outcome::kOk;
  return reply;
}

InspectReply MemoryStore::inspect(const std::vector<std::string>& names) {
  InspectReply reply;
  std::lock_guard<std::mutex> lock(mu_);
  const TimePoint now = clock_.now();
  for (const auto& [id, session] : sessions_) {
    if (session.expires_at > now) {
      reply.sessions.push_back(SessionInfo{id, session.client_name, session.expires_at - now});
    }
  }
  auto describe = [&](std::string_view name, const Lease* lease) {
    LeaseInfo info;
    info.name = std::string(name);
    if (const Session* held_by = lease ? holder_of(*lease) : nullptr) {
      const Session& holder = *held_by;
      if (holder.foreign) {
        info.holder = *holder.id;  // a foreign holder (hand_over): never expires here
      } else if (holder.expires_at > now) {
        info.holder = *holder.id;
        info.holder_remaining = holder.expires_at - now;
      }
    }
    if (lease) info.token = lease->token;
    info.run = run_of(name);
    reply.leases.push_back(std::move(info));
  };
  if (names.empty()) {
    std::vector<const Lease*> all;
    all.reserve(leases_);
    for (uint32_t i = 0; i < leases_; ++i) all.push_back(&at(i));
    std::sort(all.begin(), all.end(),
              [this](const Lease* a, const Lease* b) { return name_of(*a) < name_of(*b); });
    for (const Lease* lease : all) describe(name_of(*lease), lease);
  } else {
    for (const std::string& name : names) describe(name, find_lease(name));
  }
  // Every permit entry of the names asked for (of every name if none).
  for (const auto& [key, permits] : permits_) {
    const std::string name = key.substr(key.find('/') + 1);
    if (!names.empty() && std::find(names.begin(), names.end(), name) == names.end()) continue;
    for (const PermitEntry& e : permits.entries) {
      if (e.holder->expires_at <= now) continue;
      LeaseInfo info;
      info.name = name;
      info.kind = e.kind;
      info.permit = e.permit;
      info.token = e.token;
      info.holder = *e.holder->id;
      info.holder_remaining = e.holder->expires_at - now;
      reply.leases.push_back(std::move(info));
    }
  }
  reply.outcome = Outcome::kOk;
  return reply;
}

uint64_t MemoryStore::subscribe(std::function<void(const std::string& name)> fn, bool all_names) {
  GrantFn with_grant;
  if (fn) with_grant = [fn = std::move(fn)](const std::string& name, const Grant&) { fn(name); };
  return subscribe_grants(std::move(with_grant), all_names);
}

uint64_t MemoryStore::subscribe_grants(GrantFn fn, bool all_names) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_subscriber_++;
  if (fn) subscribers_.emplace(id, Subscriber{std::move(fn), all_names});
  return id;
}

void MemoryStore::unsubscribe(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
  for (auto w = watchers_.begin(); w != watchers_.end();) {
    w->second.erase(std::remove(w->second.begin(), w->second.end(), id), w->second.end());
    w = w->second.empty() ? watchers_.erase(w) : std::next(w);
  }
}

bool MemoryStore::watch(uint64_t id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  watchers_[name].push_back(id);
  if (name.find('/') != std::string::npos) {
    auto p = permits_.find(name);
    return p == permits_.end() || permits_room(name, p->second);
  }
  const Lease* lease = find_lease(name);
  const Session* holder = lease ? holder_of(*lease) : nullptr;
  if (!holder) return true;
  return !holder->foreign && holder->expires_at <= clock_.now();
}

void MemoryStore::unwatch(uint64_t id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto w = watchers_.find(name);
  if (w == watchers_.end()) return;
  auto it = std::find(w->second.begin(), w->second.end(), id);
  if (it != w->second.end()) w->second.erase(it);
  if (w->second.empty()) watchers_.erase(w);
}

void MemoryStore::expire_session(const std::string& session) {
  Freed freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expire_locked(session, &freed);
  }
  broadcast(freed);
}

uint64_t MemoryStore::hand_over(const std::string& name, const std::string& session) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t i = record(name);
  Lease& lease = at(i);
  unlink(lease);
  ++lease.token;
  // A session of this store (even one whose expiry is not yet noticed) lists
  // it and frees it when it expires; any other string holds it for good, and
  // "" leaves it free.
  auto next = sessions_.find(session);
  if (next != sessions_.end()) {
    link(i, next->second);
  } else if (!session.empty()) {
    auto foreign = foreign_.try_emplace(session).first;
    foreign->second.id = &foreign->first;
    if (!foreign->second.foreign) add_holder(foreign->second);
    foreign->second.foreign = true;
    link(i, foreign->second);
  }
  return lease.token;
}

MemoryStore::LeaseView MemoryStore::lease(const std::string& name) {
  LeaseView view;
  Freed freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const Lease* lease = find_lease(name)) {
      const Session* holder = holder_of(*lease);
      if (holder && !holder->foreign && holder->expires_at <= clock_.now()) {
        const std::string expired = *holder->id;  // expire_locked erases the session.
        expire_locked(expired, &freed);
        holder = nullptr;
      }
      if (holder) view.holder = *holder->id;
      view.token = lease->token;
    }
  }
  broadcast(freed);
  return view;
}

bool MemoryStore::session_live(const std::string& session) {
  bool live;
  Freed freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live = live_locked(session, clock_.now());
    if (!live) expire_locked(session, &freed);
  }
  broadcast(freed);
  return live;
}

std::vector<std::string> MemoryStore::live_sessions() {
  std::vector<std::string> live;
  Freed freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimePoint now = clock_.now();
    std::vector<std::string> expired;
    for (const auto& entry : sessions_) {
      if (entry.second.expires_at > now) {
        live.push_back(entry.first);
      } else {
        expired.push_back(entry.first);
      }
    }
    for (const std::string& session : expired) expire_locked(session, &freed);
  }
  broadcast(freed);
  return live;
}

}  // namespace simba
