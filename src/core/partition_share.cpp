#include "core/partition_share.h"

#include <algorithm>
#include <map>

namespace simba {

namespace {

// The member locks that are held, by slot, ordered by how many partitions
// their session holds now, most first; ties keep the lower slot first.
std::vector<uint32_t> ranked_members(const PartitionRead& read) {
  std::map<std::string, size_t> holding;  // session -> partitions it holds
  for (const std::string& h : read.partition_holders) {
    if (!h.empty()) ++holding[h];
  }
  std::vector<uint32_t> members;
  for (uint32_t k = 0; k < read.slot_holders.size(); ++k) {
    if (!read.slot_holders[k].empty()) members.push_back(k);
  }
  std::stable_sort(members.begin(), members.end(), [&](uint32_t a, uint32_t b) {
    return holding[read.slot_holders[a]] > holding[read.slot_holders[b]];
  });
  return members;
}

// Free partitions not pursued nor being handed over, starting at a point that
// depends on the rank and wrapping around.
std::vector<uint32_t> rotated_candidates(const std::vector<uint32_t>& free, uint32_t rank,
                                         uint32_t members, const std::set<uint32_t>& pursued,
                                         const std::set<uint32_t>& handing_over) {
  std::vector<uint32_t> out;
  if (free.empty()) return out;
  const size_t start = (static_cast<size_t>(rank) * free.size()) / members;
  for (size_t j = 0; j < free.size(); ++j) {
    const uint32_t i = free[(start + j) % free.size()];
    if (!pursued.count(i) && !handing_over.count(i)) out.push_back(i);
  }
  return out;
}

}  // namespace

uint32_t partition_share(uint32_t partitions, uint32_t members, uint32_t rank) {
  return partitions / members + (rank < partitions % members ? 1 : 0);
}

PartitionPlan plan_partitions(const PartitionRead& read, const std::set<uint32_t>& pursued_now,
                              const std::set<uint32_t>& handing_over_now) {
  PartitionPlan plan;
  const std::vector<uint32_t> members = ranked_members(read);
  const auto me = std::find(members.begin(), members.end(), read.own_slot);
  if (read.own_slot >= read.slot_holders.size() || read.slot_holders[read.own_slot] != read.own ||
      me == members.end()) {
    plan.stale = true;
    return plan;
  }
  const uint32_t n = static_cast<uint32_t>(read.partition_holders.size());
  plan.members = static_cast<uint32_t>(members.size());
  plan.rank = static_cast<uint32_t>(me - members.begin());
  plan.share = partition_share(n, plan.members, plan.rank);

  // What this member will pursue and hand over once the plan is carried out.
  std::set<uint32_t> pursued = pursued_now;
  std::set<uint32_t> handing_over = handing_over_now;
  std::vector<uint32_t> held, free;
  for (uint32_t i = 0; i < n; ++i) {
    const std::string& h = read.partition_holders[i];
    if (h == read.own) {
      if (pursued.count(i)) held.push_back(i);
      continue;
    }
    if (handing_over.erase(i)) plan.handed_over.push_back(i);
    if (h.empty()) {
      free.push_back(i);
    } else if (pursued.erase(i)) {
      plan.lost.push_back(i);
    }
  }
  while (held.size() > plan.share) {
    plan.hand_over.push_back(held.back());
    pursued.erase(held.back());
    handing_over.insert(held.back());
    held.pop_back();
  }
  for (auto it = pursued.begin(); it != pursued.end() && pursued.size() > plan.share;) {
    if (std::find(held.begin(), held.end(), *it) != held.end()) {
      ++it;
      continue;
    }
    plan.withdraw.push_back(*it);
    it = pursued.erase(it);
  }
  plan.want = plan.share > pursued.size() ? plan.share - pursued.size() : 0;
  if (plan.want > 0) {
    plan.candidates = rotated_candidates(free, plan.rank, plan.members, pursued, handing_over);
  }
  return plan;
}

}  // namespace simba
