// The Redis data model's names, written once: the C++ side names keys with
// RedisKeys, and every Lua script starts with the functions of kLuaKeys, made
// from the same parts (redis_scripts.cpp). ({p} = the URL's prefix.)
//   {p}:session:{sid}          string, PEXPIRE lease; sid = 128 random bits in hex
//   {p}:session:{sid}:leases   set of the lease names the session won, same expiry
//                              (a released name stays until the next keep-alive),
//                              and of its permit entries as "sem/{name}/{permit}"
//                              or "rw/{name}/{permit}" ('/' is outside the name rule)
//   {p}:lease:{name}           hash {session, token}; never deleted, so the token
//                              counts up across terms (+1 per term); also the
//                              name's run record (ADR 0048), kRunFields, which
//                              so outlives the release and the holder's expiry
//   {p}:sem:{name}             hash of semaphore {name}'s permits (ADR 0046): seq (the
//   {p}:rw:{name}              last permit id, never reset), size (a semaphore's, while
//                              it has holders), epoch (a read/write lock's last
//                              writer's token) and e:{permit} = "{kind} {sid} {token}"
//                              per entry, kind semaphore|read|write|intent; an
//                              entry of a dead session is swept by the acquire
//                              that meets it; never deleted
//   {p}:released:{name}        the channel a release or a close publishes on; a
//                              second connection SUBSCRIBEs to it while this
//                              client is a candidate for the name; a permit's
//                              release publishes on {p}:released:sem/{name} or
//                              {p}:released:rw/{name} (permit_resource)
#ifndef SIMBA_BACKEND_REDIS_REDIS_KEYS_H
#define SIMBA_BACKEND_REDIS_REDIS_KEYS_H

#include <string>

namespace simba {

namespace redis_layout {
constexpr char kSession[] = ":session:";
constexpr char kLeases[] = ":leases";
constexpr char kLease[] = ":lease:";
constexpr char kSem[] = ":sem:";
constexpr char kRw[] = ":rw:";
constexpr char kReleased[] = ":released:";
// The run record's fields in the lease hash: period id, started, ended (ms),
// the run's token, its outcome's name; the replies carry them in this order.
constexpr const char* kRunFields[] = {"run_p", "run_s", "run_e", "run_t", "run_o"};
}  // namespace redis_layout

class RedisKeys {
 public:
  explicit RedisKeys(std::string prefix) : p_(std::move(prefix)) {}
  std::string session(const std::string& sid) const { return p_ + redis_layout::kSession + sid; }
  std::string leases(const std::string& sid) const { return session(sid) + redis_layout::kLeases; }
  std::string lease(const std::string& name) const { return p_ + redis_layout::kLease + name; }
  // The hash of semaphore `name`'s permits (`semaphore`), or of read/write lock `name`'s.
  std::string permits(bool semaphore, const std::string& name) const {
    return p_ + (semaphore ? redis_layout::kSem : redis_layout::kRw) + name;
  }
  std::string released(const std::string& name) const { return released_head() + name; }
  // What every released channel starts with: a message's name follows it.
  std::string released_head() const { return p_ + redis_layout::kReleased; }

 private:
  std::string p_;
};

// The same names as Lua functions of the prefix `p`, for the scripts.
std::string redis_lua_keys();

}  // namespace simba

#endif
