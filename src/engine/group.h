// A partition group (simba_group_join): partitions GROUP.0 .. GROUP.N-1 spread
// over the members that joined. Built from the client's own parts, on a
// manager thread of its own:
//
//   - membership: each member holds one member lock GROUP.member.K (K < N; a
//     member beyond N holds no partition and waits for a slot), so members
//     discover each other through the backend on every backend;
//   - each round (about one renew interval) the manager reads the backend
//     (Client::inspect of the member locks and partitions), computes its fair
//     share from the number of members and its rank among them
//     (floor(N/m), plus one for the N mod m members that hold the most: the
//     rule of ADR 0012, in core/partition_share.h), hands its excess over
//     (stop: handover order, waits for the work) and contends for free
//     partitions up to its share;
//   - each partition is an election with work, exactly like
//     simba_run_while_leader.
//
// Safety comes from the leases alone (one valid holder per partition); the
// reads only steer the balance, so a stale read costs a round, never a second
// holder. Only excess partitions move, so a join or leave moves as few as
// possible.
#ifndef SIMBA_ENGINE_GROUP_H
#define SIMBA_ENGINE_GROUP_H

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/client.h"
#include "engine/task.h"

namespace simba::engine {

class Group final : public Task, public std::enable_shared_from_this<Group> {
 public:
  // Joins `group` with `partitions` partitions; `work` runs for each partition
  // this member leads. Code::kEInval when the names GROUP.member.K would break the
  // lease-name rule.
  static Result join(const std::shared_ptr<Client>& client, const std::string& group,
                     uint32_t partitions, WorkFn work, std::shared_ptr<Group>* out);
  ~Group() override;

  // Hands every partition over (handover order), leaves the group, then `done`.
  Result stop(DoneFn done) override;
  // The same, then joins again after `cooldown`; `done` once released.
  Result step_down(Duration cooldown, DoneFn done) override;
  // Blocking: stop, then wait until the manager and every run of the work ended.
  // From a callback, leader work or the loop it only starts the stop.
  void close() override;
  // Stops; a thread of its own waits for the manager and the work, then posts
  // `last` after the stop's done.
  void close_async(LastFn last) override;

 private:
  Group(std::shared_ptr<Client> client, std::string group, uint32_t partitions, WorkFn work);
  void run();
  void round();
  bool ensure_member_slot();
  // Stops contending for (or leading) `partition`, in handover order.
  void stop_pursuing(uint32_t partition);
  // stop_pursuing, and remembers it as held until its work exits.
  void hand_over(uint32_t partition);
  // Stops every partition election (in parallel, each in handover order),
  // waits for the stops, and leaves the group (frees the member lock).
  void leave();
  void release_slot();
  // Runs a stop's or step-down's done on the callback executor, like the
  // dones of every other task (never on the manager thread).
  void deliver(DoneFn done);
  std::string partition_name(uint32_t i) const { return group_ + "." + std::to_string(i); }
  std::string slot_name(uint32_t i) const { return group_ + ".member." + std::to_string(i); }

  const std::shared_ptr<Client> client_;
  const std::string group_;
  const uint32_t n_;
  const WorkFn work_;
  const QueueRef queue_;  // the dones, on the callback executor

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool finished_ = false;
  DoneFn stop_done_;
  bool step_down_requested_ = false;
  Duration step_down_cooldown_{0};
  std::vector<DoneFn> step_down_dones_;
  std::thread thread_;
  Waiter manager_exited_;  // finished as run() returns (close waits for it)

  // Manager thread only.
  Term* slot_ = nullptr;
  uint32_t slot_index_ = 0;
  std::map<uint32_t, ElectionRef> pursued_;  // contending or leading
  std::set<uint32_t> handing_over_;          // stopped by us; held until their work exits
  std::vector<ElectionRef> elections_;       // every one started (close waits)
};

}  // namespace simba::engine

#endif
