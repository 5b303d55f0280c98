// The ZooKeeper backend's leases: acquire requests on the lease and token
// nodes, the exists-watches on lease nodes that carry the release broadcast,
// and the reads behind inspect().
#include <zookeeper/zookeeper.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/zookeeper/zookeeper_backend_impl.h"

namespace simba::zookeeper_impl {

// --- acquire ---------------------------------------------------------------

void ZookeeperBackend::send_acquire(Session* s, uint64_t call, const std::string& name,
                                    int retries) {
  // Whether this attempt found the lease held: only then does an absent node
  // at the watch's answer mean that the holder released it meanwhile.
  auto held = std::make_shared<bool>(false);
  if (!tokens_known_.count(name)) create_dir(s, token_path(name), nullptr);
  ++s->acquires_in_flight;
  Req* r = new_req(s, call, [this, name, retries, held](Req& r, int rc) {
    acquire_answered(r, rc, name, retries, held);
  });
  r->paths = {lease_path(name), token_path(name)};
  r->payload = s->id;
  r->ops.resize(2);
  r->results.assign(2, zoo_op_result_t{ZOK, nullptr, 0, nullptr});
  zoo_create_op_init(&r->ops[0], r->paths[0].c_str(), r->payload.data(),
                     static_cast<int>(r->payload.size()), &acl_, ZOO_EPHEMERAL, nullptr, 0);
  zoo_set_op_init(&r->ops[1], r->paths[1].c_str(), nullptr, -1, -1, &r->op_stat);
  const int rc = zoo_amulti(s->zk->zh(), 2, r->ops.data(), r->results.data(), void_done, r);
  if (rc != ZOK) --s->acquires_in_flight;  // its completion never runs
  sent(s, r, rc);
  if (!s->dead) watch(s, name, held);
}

void ZookeeperBackend::acquire_answered(Req& r, int rc, const std::string& name, int retries,
                                        const std::shared_ptr<bool>& held) {
  Session* s = r.s;
  --s->acquires_in_flight;
  next_acquires(s);
  AcquireReply out;
  // A failed multi answers ZOK for the operations before the failing one.
  if (rc == ZOK && r.results[0].err == ZOK && r.results[1].err == ZOK) {
    out = decode_zk_acquire_token(r.op_stat);
    if (out.outcome != Outcome::kOk) {
      // Never from a sound server (zxids are positive). The node stays
      // ours until the session ends; no term is started on a bad token.
      deliver_acquire(r.call, out);
      return;
    }
    Owned o;
    o.token = out.token;
    o.version = r.op_stat.version;
    // Recorded even when nobody waits for the answer any more: the next
    // keep-alive lists it and the core releases what it has no term for.
    s->owned[name] = o;
    remember_token_node(name);
    out.outcome = Outcome::kOk;
    out.token = o.token;
    deliver_acquire(r.call, out);
    return;
  }
  if (r.results[0].err == ZNODEEXISTS) {
    auto mine = s->owned.find(name);
    if (mine != s->owned.end()) {
      // Our own session holds it, won by an attempt whose answer came too
      // late. Handing it over (the core adopts it only with a token above
      // every one it released, and frees it otherwise) beats answering
      // Held: under load every new attempt would time out too, keep the
      // lease "explained" and never let the core release or adopt it.
      out.outcome = Outcome::kOk;
      out.token = mine->second.token;
      deliver_acquire(r.call, out);
      return;
    }
    *held = true;
    remember_token_node(name);
    out.outcome = Outcome::kHeld;  // the holder's remaining time is not known here
    deliver_acquire(r.call, out);
    return;
  }
  if (r.results[1].err == ZNONODE || r.results[0].err == ZNONODE) {
    // Someone removed our directories (or the token node): make them again.
    tokens_known_.erase(name);
    create_dir(s, url_.chroot, nullptr);
    create_dir(s, leases_dir_, nullptr);
    create_dir(s, tokens_dir_, nullptr);
    if (retries > 0 && calls_.find(r.call)) {
      send_acquire(s, r.call, name, retries - 1);
      return;
    }
  }
  // The multi may have been applied: the node is read back once reconnected
  // (answering the call with it would have to wait for that).
  if (connection_rc(rc)) s->unsure_leases.insert(name);
  fill_error(s, rc, &out.outcome, &out.error);
  deliver_acquire(r.call, out);
}

void ZookeeperBackend::next_acquires(Session* s) {
  while (s->acquires_in_flight < kMaxAcquiresInFlight && !s->acquire_queue.empty() && !s->dead) {
    auto [call, name] = std::move(s->acquire_queue.front());
    s->acquire_queue.pop_front();
    if (calls_.find(call)) send_acquire(s, call, name, 2);
  }
}

void ZookeeperBackend::remember_token_node(const std::string& name) {
  // Bounded: a process that goes through endless names only pays one
  // "exists already" create per name again after a reset.
  if (tokens_known_.size() >= 100'000) tokens_known_.clear();
  tokens_known_.insert(name);
}

void ZookeeperBackend::watch(Session* s, const std::string& name, std::shared_ptr<bool> held) {
  Req* r = new_req(s, 0, [this, name, held](Req& r, int rc) {
    Session* s = r.s;
    auto it = s->owned.find(name);
    if (rc == ZOK && r.has_stat) {
      if (it != s->owned.end() && static_cast<uint64_t>(r.stat.czxid) != it->second.token) {
        s->owned.erase(it);  // ours was deleted and someone else holds it now
      } else if (it == s->owned.end() && ours(s, r.stat)) {
        // Held by our session, won by an attempt whose answer was lost
        // (ZNODEEXISTS since): recorded, so the keep-alive lists it.
        check_lease(s, name);
      }
    } else if (rc == ZNONODE) {
      // Deleted before the watch was set: no event will say so. After an
      // attempt that failed for another reason the node was simply never
      // there: no news (and no retry storm).
      const bool ours = it != s->owned.end();
      if (ours) s->owned.erase(it);
      if (ours || !held || *held) released(name);
    }
  });
  r->paths = {lease_path(name)};
  sent(s, r,
       zoo_awexists(s->zk->zh(), r->paths[0].c_str(), UvZk::watcher(), s->zk->watcher_ctx(),
                    stat_done, r));
}

// --- answers lost with the connection ---------------------------------------

void ZookeeperBackend::check_unsure(Session* s) {
  if (s->dead || s->expired || !s->zk || zoo_state(s->zk->zh()) != ZOO_CONNECTED_STATE) return;
  const std::set<std::string> leases = std::move(s->unsure_leases);
  const auto permits = std::move(s->unsure_permits);
  s->unsure_leases.clear();
  s->unsure_permits.clear();
  for (const std::string& name : leases) check_lease(s, name);
  for (const auto& [resource, entries] : permits) {
    for (const auto& [permit, e] : entries) check_entry(s, resource, permit, e);
  }
}

void ZookeeperBackend::check_lease(Session* s, const std::string& name) {
  // Two reads in one round trip, answered in order: a token node whose mzxid
  // is still the lease node's czxid carries the version our acquire set.
  auto lease = std::make_shared<std::pair<int, struct Stat>>(ZOK, Stat{});
  Req* a = new_req(s, 0, [lease](Req& r, int rc) { *lease = {rc, r.stat}; });
  a->paths = {lease_path(name)};
  sent(s, a, zoo_aexists(s->zk->zh(), a->paths[0].c_str(), 0, stat_done, a));
  if (s->dead) return;
  Req* t = new_req(s, 0, [this, name, lease](Req& r, int rc) {
    Session* s = r.s;
    const auto& [lease_rc, st] = *lease;
    if (connection_rc(lease_rc) || connection_rc(rc)) {
      s->unsure_leases.insert(name);  // at the next reconnection
      return;
    }
    // Absent: never applied, or gone since. Another owner: not won.
    if (lease_rc != ZOK || rc != ZOK || !ours(s, st) || r.stat.mzxid != st.czxid) return;
    if (s->owned.count(name)) return;  // an answer came meanwhile
    s->owned[name] = Owned{static_cast<uint64_t>(st.czxid), r.stat.version};
    log(kLogInfo, "lease " + name + " (token " + std::to_string(st.czxid) +
                      ") was won by an acquire whose answer was lost; listed as the session's");
    watch(s, name);
  });
  t->paths = {token_path(name)};
  sent(s, t, zoo_aexists(s->zk->zh(), t->paths[0].c_str(), 0, stat_done, t));
}

void ZookeeperBackend::check_entry(Session* s, const std::string& resource, uint64_t permit,
                                   HeldPermit e) {
  Req* r = new_req(s, 0, [this, resource, permit, e](Req& r, int rc) {
    Session* s = r.s;
    if (connection_rc(rc)) {
      s->unsure_permits[resource][permit] = e;  // at the next reconnection
      return;
    }
    if (rc != ZOK || !r.has_stat || !ours(s, r.stat)) return;
    auto& mine = s->permits[resource];
    if (mine.count(permit)) return;
    mine[permit] = e;
    log(kLogInfo, std::string(permit_kind_name(e.kind)) + " " + resource + " #" +
                      std::to_string(permit) +
                      " was won by an acquire whose answer was lost; listed as the session's");
    watch_entry(s, resource, permit);
  });
  r->paths = {entry_path(resource, e.kind, permit)};
  sent(s, r, zoo_aexists(s->zk->zh(), r->paths[0].c_str(), 0, stat_done, r));
}

// --- inspect ---------------------------------------------------------------

void ZookeeperBackend::inspect_step_done(const std::shared_ptr<InspectState>& st) {
  if (--st->pending > 0) return;
  InspectReply out;
  if (!st->error.empty()) {
    out.error = st->error;
    deliver_inspect(st->call, out);
    return;
  }
  out = build_zk_inspect(st->sessions, st->asked, st->tokens, st->leases);
  for (const InspectState::PermitNode& e : st->permits) {
    if (auto row = zk_permit_row(e.name, e.child, e.data, e.stat, st->sessions)) {
      out.leases.push_back(std::move(*row));
    }
  }
  deliver_inspect(st->call, out);
}

void ZookeeperBackend::inspect_failed(const std::shared_ptr<InspectState>& st, Session* s, int rc) {
  if (!st->error.empty()) return;
  Outcome o;
  fill_error(s, rc, &o, &st->error);
}

void ZookeeperBackend::inspect_children(
    Session* s, const std::shared_ptr<InspectState>& st, const std::string& dir,
    std::function<void(Session*, const std::vector<std::string>&)> then) {
  ++st->pending;
  Req* r = new_req(s, 0, [this, st, then](Req& r, int rc) {
    if (rc == ZOK) {
      then(r.s, r.strings);
    } else if (rc != ZNONODE) {
      inspect_failed(st, r.s, rc);
    }
    inspect_step_done(st);
  });
  r->paths = {dir};
  inspect_sent(s, st, r, zoo_aget_children(s->zk->zh(), r->paths[0].c_str(), 0, strings_done, r));
}

void ZookeeperBackend::inspect_sent(Session* s, const std::shared_ptr<InspectState>& st, Req* r,
                                    int rc) {
  if (rc != ZOK) {
    s->reqs.erase(r);
    inspect_failed(st, s, rc);
    // Answered on a later turn (the preset outcome).
    preset(st->call, Outcome::kError, st->error);
    return;
  }
  s->zk->kick();
}

void ZookeeperBackend::inspect_read(Session* s, const std::shared_ptr<InspectState>& st,
                                    const std::string& path, bool data,
                                    std::function<void(Req&)> then) {
  ++st->pending;
  Req* r = new_req(s, 0, [this, st, then](Req& r, int rc) {
    if (rc == ZOK) {
      then(r);
    } else if (rc != ZNONODE) {
      inspect_failed(st, r.s, rc);
    }
    inspect_step_done(st);
  });
  r->paths = {path};
  const int rc = data ? zoo_aget(s->zk->zh(), r->paths[0].c_str(), 0, data_done, r)
                      : zoo_aexists(s->zk->zh(), r->paths[0].c_str(), 0, stat_done, r);
  inspect_sent(s, st, r, rc);
}

void ZookeeperBackend::inspect_name(Session* s, const std::shared_ptr<InspectState>& st,
                                    const std::string& name) {
  if (!st->asked.insert(name).second) return;
  inspect_read(s, st, token_path(name), false, [st, name](Req& r) {
    if (r.has_stat) st->tokens[name] = r.stat;
  });
  inspect_read(s, st, lease_path(name), false, [st, name](Req& r) {
    if (r.has_stat) st->leases[name] = r.stat;
  });
}

void ZookeeperBackend::inspect_permits(Session* s, const std::shared_ptr<InspectState>& st,
                                       const std::string& kind, const std::string& name) {
  const std::string dir = url_.chroot + "/" + kind + "/" + name;
  inspect_children(
      s, st, dir, [this, st, dir, name](Session* s, const std::vector<std::string>& found) {
        for (const std::string& child : found) {
          inspect_read(s, st, dir + "/" + child, true, [st, name, child](Req& r) {
            st->permits.push_back(InspectState::PermitNode{name, child, r.value, r.stat});
          });
        }
      });
}

}  // namespace simba::zookeeper_impl
