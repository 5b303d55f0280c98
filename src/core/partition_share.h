// The partition-share rule of a partition group (ADR 0012), as a pure function
// of one read of the backend: no threads, no I/O. The engine's Group
// (src/engine/group.cpp) reads the member locks and the partition leases each
// round, asks plan_partitions() what to do, and does it.
//
// With N partitions and m members, each member gets ⌊N/m⌋ partitions and the
// N mod m members that hold the most partitions now (ties: the lower member
// lock) get one more. Every member computes the same split from the same read,
// and a member that already holds ⌈N/m⌉ keeps it, so a join or a leave moves
// as few partitions as it can.
#ifndef SIMBA_CORE_PARTITION_SHARE_H
#define SIMBA_CORE_PARTITION_SHARE_H

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace simba {

// ⌊partitions / members⌋, plus one for the members ranked below
// partitions mod members. `members` > 0, `rank` < `members`.
uint32_t partition_share(uint32_t partitions, uint32_t members, uint32_t rank);

// One read of a group's backend state, as one member sees it.
struct PartitionRead {
  // Per member lock GROUP.member.K: the session holding it, empty if free.
  std::vector<std::string> slot_holders;
  // Per partition GROUP.I (N of them): the session holding it, empty if free.
  std::vector<std::string> partition_holders;
  std::string own;        // this member's session
  uint32_t own_slot = 0;  // the member lock this member holds
};

// What this member does after a read. The lists are in the order to act on.
struct PartitionPlan {
  // The read does not show this member holding its member lock: do nothing.
  bool stale = false;
  uint32_t members = 0;
  uint32_t rank = 0;   // among the members, most partitions held first
  uint32_t share = 0;  // partition_share(N, members, rank)
  // Were being handed over and are no longer held by this member: they may be
  // pursued again.
  std::vector<uint32_t> handed_over;
  // Pursued, but another member holds them now: stop contending.
  std::vector<uint32_t> lost;
  // Held beyond the share: hand them over (stop, in handover order), the
  // highest-numbered first.
  std::vector<uint32_t> hand_over;
  // Still contended for beyond the share (it dropped as members joined): stop
  // those contests, so they are not won only to be handed straight back.
  std::vector<uint32_t> withdraw;
  // Free partitions to contend for, in order, and how many of them to start
  // (a start that fails is skipped for the next one). The order begins at a
  // point that depends on the rank, so that members who look at the same free
  // set pick different ones.
  std::vector<uint32_t> candidates;
  size_t want = 0;
};

// `pursued`: the partitions this member contends for or leads; `handing_over`:
// those it stopped and still holds until their work exits.
PartitionPlan plan_partitions(const PartitionRead& read, const std::set<uint32_t>& pursued,
                              const std::set<uint32_t>& handing_over);

}  // namespace simba

#endif
