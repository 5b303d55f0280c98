// The ZooKeeper backend's permits (ADR 0046): acquire_permit and
// release_permit on the resource nodes {c}/sem/{name} and {c}/rw/{name} and
// their ephemeral entries; the data model is in zookeeper_backend_impl.h.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/zookeeper/zookeeper_backend_impl.h"

namespace simba::zookeeper_impl {

Backend::CallRef ZookeeperBackend::acquire_permit(const std::string& session,
                                                  const std::string& name, const PermitAsk& ask,
                                                  Duration timeout, AcquireCb cb) {
  Call* c = new_call(Kind::kAcquire, timeout);
  c->acquire = std::move(cb);
  Session* s = call_session(c, session);
  if (!s) return c->id;
  auto op = std::make_shared<PermitOp>();
  op->call = c->id;
  op->name = name;
  op->resource = permit_resource(ask.kind, name);
  op->ask = ask;
  permit_round(s, op);
  return c->id;
}

ZkPermitPlan ZookeeperBackend::plan_permit(Session* s, const PermitOp& op) {
  PermitAsk ask = op.ask;
  if (ask.intent != 0) {
    // Another session's intent (or one withdrawn) is no intent of this writer.
    auto held = s->permits.find(op.resource);
    bool mine = false;
    if (held != s->permits.end()) {
      auto e = held->second.find(ask.intent);
      mine = e != held->second.end() && e->second.kind == PermitKind::kIntent;
    }
    if (!mine) ask.intent = 0;
  }
  const PermitView& v = s->views[op.resource];
  return plan_zk_permit(ask, v.version, v.data, v.children);
}

void ZookeeperBackend::permit_round(Session* s, const std::shared_ptr<PermitOp>& op) {
  // Bounded: a process that goes through endless names reads them again.
  if (s->views.size() >= 100'000 && !s->views.count(op->resource)) s->views.clear();
  PermitView& v = s->views[op->resource];
  const std::string path = resource_path(op->resource);
  op->multi = false;
  op->multi_rc = ZOK;
  op->data_rc = ZOK;
  op->data.clear();
  op->stat = {};
  // A grant goes alone (its view follows it); an intent and every answer
  // but a grant read the node after it, arming the children watch of a
  // waiter. A read-only round when the view is unknown or stale.
  op->reads = true;
  if (v.known && !op->must_read) {
    op->plan = plan_permit(s, *op);
    op->multi = op->plan.what == ZkPermitPlan::kGrant || op->plan.what == ZkPermitPlan::kIntent;
    op->reads = op->plan.what != ZkPermitPlan::kGrant;
  } else if (!v.known) {
    // First use of the name by this session: the resource node ("exists
    // already" is fine), read below.
    create_dir(s, op->resource.compare(0, 4, "sem/") == 0 ? sem_dir_ : rw_dir_, nullptr);
    create_dir(s, path, nullptr);
  }
  if (op->multi) {
    const ZkPermitPlan& p = op->plan;
    const PermitKind kind = p.what == ZkPermitPlan::kIntent ? PermitKind::kIntent : op->ask.kind;
    const HeldPermit e{kind, p.token};
    Req* r = new_req(s, op->reads ? 0 : op->call, [this, op, e, n = p.permit](Req& r, int rc) {
      // Applied or not: the entry is read back once reconnected (the call is
      // answered with the error now, as a lost answer always was).
      if (connection_rc(rc)) r.s->unsure_permits[op->resource][n] = e;
      // The first failing operation tells why (those before it answer ZOK).
      op->multi_rc = rc;
      for (const zoo_op_result_t& res : r.results) {
        if (res.err != ZOK) {
          op->multi_rc = res.err;
          break;
        }
      }
      op->multi_version = r.op_stat.version;
      if (!op->reads) permit_round_answered(r.s, op, rc, {});
    });
    r->paths = {path, entry_path(op->resource, kind, p.permit)};
    r->payload = std::to_string(p.token);
    r->value = p.data;
    if (p.drop_intent)
      r->paths.push_back(entry_path(op->resource, PermitKind::kIntent, op->ask.intent));
    const int n = static_cast<int>(r->paths.size());
    r->ops.resize(n);
    r->results.assign(n, zoo_op_result_t{ZOK, nullptr, 0, nullptr});
    zoo_set_op_init(&r->ops[0], r->paths[0].c_str(), r->value.data(),
                    static_cast<int>(r->value.size()), v.version, &r->op_stat);
    zoo_create_op_init(&r->ops[1], r->paths[1].c_str(), r->payload.data(),
                       static_cast<int>(r->payload.size()), &acl_, ZOO_EPHEMERAL, nullptr, 0);
    if (p.drop_intent) zoo_delete_op_init(&r->ops[2], r->paths[2].c_str(), -1);
    const int rc = zoo_amulti(s->zk->zh(), n, r->ops.data(), r->results.data(), void_done, r);
    if (rc != ZOK) {
      s->reqs.erase(r);
      Outcome o;
      std::string err;
      fill_error(s, rc, &o, &err);
      preset(op->call, o, err);
      return;
    }
    if (!op->reads) {
      s->zk->kick();
      return;
    }
  }
  op->must_read = false;
  // The view after it, read in the same round trip: the data and version,
  // then the children (a create between the two shows up as an extra child,
  // and the version guard of the next multi fails: never a missing one).
  Req* d = new_req(s, 0, [op](Req& r, int rc) {
    op->data_rc = rc;
    op->data = r.value;
    op->stat = r.stat;
  });
  d->paths = {path};
  sent(s, d, zoo_aget(s->zk->zh(), d->paths[0].c_str(), 0, data_done, d));
  if (s->dead) return;
  Req* c = new_req(s, op->call, [this, op](Req& r, int rc) {
    permit_round_answered(r.s, op, rc, std::move(r.strings));
  });
  c->paths = {path};
  sent(s, c,
       zoo_awget_children(s->zk->zh(), c->paths[0].c_str(), UvZk::watcher(), s->zk->watcher_ctx(),
                          strings_done, c));
}

void ZookeeperBackend::permit_view_granted(Session* s, const PermitOp& op) {
  PermitView& v = s->views[op.resource];
  v.version = op.multi_version;
  v.data = op.plan.data;
  auto& c = v.children;
  if (op.plan.drop_intent) {
    c.erase(std::remove(c.begin(), c.end(), zk_permit_child(PermitKind::kIntent, op.ask.intent)),
            c.end());
  }
  const std::string entry = zk_permit_child(op.ask.kind, op.plan.permit);
  c.insert(std::upper_bound(c.begin(), c.end(), entry), entry);
}

void ZookeeperBackend::permit_round_answered(Session* s, const std::shared_ptr<PermitOp>& op,
                                             int rc, std::vector<std::string> children) {
  PermitView& v = s->views[op->resource];
  const bool read = op->reads && rc == ZOK && op->data_rc == ZOK;
  if (read) {
    v.known = true;
    v.version = op->stat.version;
    v.data = op->data;
    permit_children(s, op->resource, std::move(children));
  } else if (op->reads) {
    v.known = false;
  }
  AcquireReply out;
  if (op->multi && op->multi_rc == ZOK) {
    // Recorded even when nobody waits for the answer any more: the next
    // keep-alive lists it and the core releases what it has no term for.
    const ZkPermitPlan& p = op->plan;
    const bool intent = p.what == ZkPermitPlan::kIntent;
    auto& mine = s->permits[op->resource];
    mine[p.permit] = HeldPermit{intent ? PermitKind::kIntent : op->ask.kind, p.token};
    if (p.drop_intent) mine.erase(op->ask.intent);
    watch_entry(s, op->resource, p.permit);
    if (!op->reads) permit_view_granted(s, *op);
    if (!intent) {
      out.outcome = Outcome::kOk;
      out.permit = p.permit;
      out.token = p.token;
      deliver_acquire(op->call, out);
      return;
    }
    op->ask.intent = p.permit;  // kept from now on, and answered with a Held
  } else if (op->multi) {
    const bool lost =
        op->multi_rc == ZBADVERSION || (op->plan.drop_intent && op->multi_rc == ZNONODE);
    if (op->multi_rc == ZNODEEXISTS) {
      // The guard held, yet the entry exists: the resource node was deleted
      // and made again, its counter restarted. Never by Simba.
      out.error = "zookeeper: permit " + std::to_string(op->plan.permit) + " of " + op->resource +
                  " exists already (was " + resource_path(op->resource) + " deleted?)";
      deliver_acquire(op->call, out);
      return;
    }
    if (!lost && op->multi_rc != ZNONODE) {
      fill_error(s, op->multi_rc, &out.outcome, &out.error);
      deliver_acquire(op->call, out);
      return;
    }
    if (!op->reads) {
      // A grant that went alone lost: read, then decide (one round more).
      if (op->multi_rc == ZNONODE) v.known = false;  // the node went: made again
      op->must_read = true;
      if (op->rounds_left-- > 0 && calls_.find(op->call)) {
        permit_round(s, op);
        return;
      }
      out.outcome = Outcome::kHeld;
      out.holder_remaining = Duration::zero();
      deliver_acquire(op->call, out);
      return;
    }
  }
  if (!read) {
    const int bad = rc != ZOK ? rc : op->data_rc;
    if (bad == ZNONODE && op->rounds_left-- > 0 && calls_.find(op->call)) {
      permit_round(s, op);  // someone removed the directory: made again
      return;
    }
    if (op->ask.intent != 0 && op->multi && op->multi_rc == ZOK) {
      out.outcome = Outcome::kHeld;
      out.permit = op->ask.intent;
      deliver_acquire(op->call, out);
      return;
    }
    fill_error(s, bad, &out.outcome, &out.error);
    deliver_acquire(op->call, out);
    return;
  }
  // Decided on the view just read.
  const ZkPermitPlan p = plan_permit(s, *op);
  switch (p.what) {
    case ZkPermitPlan::kHeld:
      out.outcome = Outcome::kHeld;  // the holders' remaining time is not known here
      out.permit = p.permit;
      break;
    case ZkPermitPlan::kRefused:
      out.outcome = Outcome::kRefused;
      out.size = p.size;
      break;
    case ZkPermitPlan::kError:
      out.error = p.error;
      break;
    case ZkPermitPlan::kGrant:
    case ZkPermitPlan::kIntent:
      // The view had room (or wants an intent) but was stale, or this round
      // only read: one more round with the fresh view.
      if (op->rounds_left-- > 0 && calls_.find(op->call)) {
        permit_round(s, op);
        return;
      }
      // Lost the race again: the core tries again soon.
      out.outcome = Outcome::kHeld;
      out.holder_remaining = Duration::zero();
      out.permit = p.what == ZkPermitPlan::kGrant && p.drop_intent ? op->ask.intent : 0;
      break;
  }
  deliver_acquire(op->call, out);
}

void ZookeeperBackend::permit_children(Session* s, const std::string& resource,
                                       std::vector<std::string> children) {
  PermitView& v = s->views[resource];
  std::sort(children.begin(), children.end());
  bool gone = false;
  for (const std::string& c : v.children) {
    gone |= !std::binary_search(children.begin(), children.end(), c);
  }
  v.children = std::move(children);
  if (gone) released(resource);
}

void ZookeeperBackend::watch_permits(Session* s, const std::string& resource) {
  Req* r = new_req(s, 0, [this, resource](Req& r, int rc) {
    if (rc == ZOK) permit_children(r.s, resource, std::move(r.strings));
  });
  r->paths = {resource_path(resource)};
  sent(s, r,
       zoo_awget_children(s->zk->zh(), r->paths[0].c_str(), UvZk::watcher(), s->zk->watcher_ctx(),
                          strings_done, r));
}

void ZookeeperBackend::watch_entry(Session* s, const std::string& resource, uint64_t permit) {
  Req* r = new_req(s, 0, [resource, permit](Req& r, int rc) {
    if (rc != ZNONODE) return;
    // Deleted before the watch was set: no event will say so.
    auto it = r.s->permits.find(resource);
    if (it != r.s->permits.end()) it->second.erase(permit);
  });
  r->paths = {resource_path(resource) + "/" +
              zk_permit_child(s->permits[resource][permit].kind, permit)};
  sent(s, r,
       zoo_awexists(s->zk->zh(), r->paths[0].c_str(), UvZk::watcher(), s->zk->watcher_ctx(),
                    stat_done, r));
}

void ZookeeperBackend::watch(const std::string& name) {
  watches_.insert(name);
  if (name.find('/') == std::string::npos) return;  // a lease: its exists-watches
  // A resource this backend may never have read: its children, watched, on
  // the newest session (an acquire's own read watches them too).
  Session* s = nullptr;
  for (auto& [serial, sp] : sessions_) {
    if (sp->ready && !sp->dead && !sp->expired && sp->zk) s = sp.get();
  }
  if (s) watch_permits(s, name);
}

bool ZookeeperBackend::permit_event(Session* s, int type, const std::string& path) {
  const bool sem = path.compare(0, sem_dir_.size() + 1, sem_dir_ + "/") == 0;
  if (!sem && path.compare(0, rw_dir_.size() + 1, rw_dir_ + "/") != 0) return false;
  const std::string rest = path.substr(url_.chroot.size() + 1);  // "sem/X" or "sem/X/child"
  const size_t slash = rest.find('/', rest.find('/') + 1);
  if (slash == std::string::npos) {
    // An entry came or went: keep watching while the core waits here.
    if (type == ZOO_CHILD_EVENT && watches_.count(rest)) watch_permits(s, rest);
    return true;
  }
  const std::string resource = rest.substr(0, slash);
  const std::string child = rest.substr(slash + 1);
  if (type != ZOO_DELETED_EVENT) return true;
  // An entry of ours is gone: our release, or someone deleting it (its term
  // ends TAKEN_OVER at the next keep-alive). Either way there is room.
  if (const auto e = parse_zk_permit_child(child)) {
    auto it = s->permits.find(resource);
    if (it != s->permits.end()) {
      it->second.erase(e->permit);
      if (it->second.empty()) s->permits.erase(it);
    }
  }
  auto& children = s->views[resource].children;
  children.erase(std::remove(children.begin(), children.end(), child), children.end());
  released(resource);
  return true;
}

Backend::CallRef ZookeeperBackend::release_permit(const std::string& session,
                                                  const std::string& name, PermitKind kind,
                                                  uint64_t permit, uint64_t token, Duration timeout,
                                                  DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  // No session (kExpired): its entries went with it.
  Session* s = call_session(c, session);
  if (!s) return c->id;
  const std::string resource = permit_resource(kind, name);
  auto held = s->permits.find(resource);
  const HeldPermit* e = nullptr;
  if (held != s->permits.end()) {
    auto it = held->second.find(permit);
    if (it != held->second.end()) e = &it->second;
  }
  if (!e || e->kind != kind || e->token != token) {
    // Not ours (any more): nothing to free.
    preset(c, Outcome::kOk, "");
    return c->id;
  }
  // Entry names are never reused (the counter never goes back), so a plain
  // delete can only remove this entry.
  Req* r = new_req(s, c->id, [this, resource, permit](Req& r, int rc) {
    Session* s = r.s;
    DoneReply out;
    if (rc == ZOK || rc == ZNONODE) {
      auto it = s->permits.find(resource);
      if (it != s->permits.end()) {
        it->second.erase(permit);
        if (it->second.empty()) s->permits.erase(it);
      }
      out.outcome = Outcome::kOk;
    } else {
      fill_error(s, rc, &out.outcome, &out.error);
    }
    deliver_done(r.call, out);
  });
  r->paths = {entry_path(resource, kind, permit)};
  sent(s, r, zoo_adelete(s->zk->zh(), r->paths[0].c_str(), -1, void_done, r));
  return c->id;
}

}  // namespace simba::zookeeper_impl
