// Tests of the partition-share rule of ADR 0012 (src/core/partition_share.*):
// the share of each member, its rank among the members, and what one member
// hands over, stops contending for and pursues after one read.
#include "core/partition_share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace simba {
namespace {

using Ids = std::vector<uint32_t>;

// A read with `n` partitions: member slot K held by `slots[K]` ("" free),
// partition I by `parts[I]`; this member is `own` in slot `own_slot`.
PartitionRead read_of(std::vector<std::string> slots, std::vector<std::string> parts,
                      const std::string& own, uint32_t own_slot) {
  PartitionRead r;
  r.slot_holders = std::move(slots);
  r.partition_holders = std::move(parts);
  r.own = own;
  r.own_slot = own_slot;
  return r;
}

// ---------------------------------------------------------------------------
// partition_share

TEST(PartitionShare, EvenDivisionGivesEveryMemberTheSame) {
  for (uint32_t rank = 0; rank < 3; ++rank) EXPECT_EQ(partition_share(6, 3, rank), 2u);
  for (uint32_t rank = 0; rank < 4; ++rank) EXPECT_EQ(partition_share(8, 4, rank), 2u);
  EXPECT_EQ(partition_share(7, 1, 0), 7u);
  for (uint32_t rank = 0; rank < 5; ++rank) EXPECT_EQ(partition_share(5, 5, rank), 1u);
}

struct ShareCase {
  uint32_t partitions, members, rank, share;
};

void expect_shares(const std::vector<ShareCase>& cases) {
  for (const ShareCase& c : cases) {
    EXPECT_EQ(partition_share(c.partitions, c.members, c.rank), c.share)
        << c.partitions << " over " << c.members << ", rank " << c.rank;
  }
}

TEST(PartitionShare, UnevenDivisionGivesTheExtraToTheLowestRanks) {
  expect_shares({
      {10, 3, 0, 4},
      {10, 3, 1, 3},
      {10, 3, 2, 3},  // 10 over 3: 4, 3, 3
      {5, 2, 0, 3},
      {5, 2, 1, 2},  // 5 over 2: 3, 2
      // 7 over 4: 2, 2, 2, 1; the edge is between rank N mod m − 1 and N mod m.
      {7, 4, 2, 2},
      {7, 4, 3, 1},
  });
}

TEST(PartitionShare, RanksAtTheEdges) {
  expect_shares({
      {1, 3, 0, 1},
      {1, 3, 2, 0},  // one partition over three: only rank 0
      {9, 10, 8, 1},
      {9, 10, 9, 0},  // N − 1 over N: every rank but the last
      {10000, 3, 0, 3334},
      {10000, 3, 2, 3333},  // the largest group the engine allows
  });
}

TEST(PartitionShare, SharesAddUpToThePartitionsAndDifferByAtMostOne) {
  for (uint32_t n = 1; n <= 40; ++n) {
    for (uint32_t m = 1; m <= n; ++m) {
      uint32_t sum = 0, lo = n, hi = 0;
      for (uint32_t rank = 0; rank < m; ++rank) {
        const uint32_t s = partition_share(n, m, rank);
        sum += s;
        lo = std::min(lo, s);
        hi = std::max(hi, s);
        EXPECT_TRUE(s == n / m || s == (n + m - 1) / m) << n << "/" << m << " rank " << rank;
      }
      EXPECT_EQ(sum, n) << n << " over " << m;
      EXPECT_LE(hi - lo, 1u) << n << " over " << m;
    }
  }
}

// ---------------------------------------------------------------------------
// plan_partitions: rank and share

TEST(PlanPartitions, AStaleReadDoesNothing) {
  // Our member lock shows another holder, or none.
  EXPECT_TRUE(plan_partitions(read_of({"x", "b"}, {"", ""}, "a", 0), {}, {}).stale);
  EXPECT_TRUE(plan_partitions(read_of({"", "b"}, {"", ""}, "a", 0), {}, {}).stale);
  EXPECT_TRUE(plan_partitions(read_of({"a"}, {""}, "a", 3), {}, {}).stale);  // no such slot
  EXPECT_FALSE(plan_partitions(read_of({"a", "b"}, {"", ""}, "a", 0), {}, {}).stale);
}

TEST(PlanPartitions, TheMembersHoldingTheMostGetTheExtraPartitions) {
  // ADR 0012: five partitions held 3 + 2 by slots 1 and 2, a joiner in slot 0.
  const std::vector<std::string> slots = {"j", "p", "q"};
  const std::vector<std::string> parts = {"p", "p", "p", "q", "q"};
  const PartitionPlan joiner = plan_partitions(read_of(slots, parts, "j", 0), {}, {});
  const PartitionPlan three = plan_partitions(read_of(slots, parts, "p", 1), {0, 1, 2}, {});
  const PartitionPlan two = plan_partitions(read_of(slots, parts, "q", 2), {3, 4}, {});
  EXPECT_EQ(three.rank, 0u);
  EXPECT_EQ(two.rank, 1u);
  EXPECT_EQ(joiner.rank, 2u);
  EXPECT_EQ(three.share, 2u);
  EXPECT_EQ(two.share, 2u);
  EXPECT_EQ(joiner.share, 1u);
  for (const PartitionPlan* p : {&joiner, &three, &two}) EXPECT_EQ(p->members, 3u);
  // One move: the holder of three hands its highest-numbered over.
  EXPECT_EQ(three.hand_over, Ids{2});
  EXPECT_TRUE(two.hand_over.empty());
  EXPECT_TRUE(joiner.hand_over.empty());
  // Nothing is free yet, so the joiner waits for the handed-over partition.
  EXPECT_EQ(joiner.want, 1u);
  EXPECT_TRUE(joiner.candidates.empty());
}

TEST(PlanPartitions, TiesGoToTheLowerMemberLock) {
  // Nobody holds anything: the rank is the order of the member locks held.
  const std::vector<std::string> slots = {"", "b", "", "d", "e"};
  const std::vector<std::string> parts(5, "");
  EXPECT_EQ(plan_partitions(read_of(slots, parts, "b", 1), {}, {}).rank, 0u);
  EXPECT_EQ(plan_partitions(read_of(slots, parts, "d", 3), {}, {}).rank, 1u);
  const PartitionPlan last = plan_partitions(read_of(slots, parts, "e", 4), {}, {});
  EXPECT_EQ(last.rank, 2u);
  EXPECT_EQ(last.members, 3u);
  EXPECT_EQ(last.share, 1u);  // 5 over 3: 2, 2, 1
}

TEST(PlanPartitions, EveryMemberReadingTheSameStateComputesTheSameSplit) {
  std::mt19937_64 rng(12);
  for (int round = 0; round < 500; ++round) {
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % 12);
    const std::vector<std::string> sessions = {"a", "b", "c", "d", "e", "f"};
    std::vector<std::string> slots(n, "");
    std::vector<std::string> members;
    for (uint32_t k = 0; k < n && members.size() < sessions.size(); ++k) {
      if (rng() % 3 == 0) continue;
      slots[k] = sessions[members.size()];
      members.push_back(slots[k]);
    }
    if (members.empty()) continue;
    std::vector<std::string> parts(n, "");
    for (std::string& p : parts) {
      if (rng() % 4 != 0) p = members[rng() % members.size()];
    }
    uint32_t sum = 0;
    std::set<uint32_t> ranks;
    for (uint32_t k = 0; k < n; ++k) {
      if (slots[k].empty()) continue;
      const PartitionPlan p = plan_partitions(read_of(slots, parts, slots[k], k), {}, {});
      ASSERT_FALSE(p.stale);
      EXPECT_EQ(p.members, members.size());
      sum += p.share;
      ranks.insert(p.rank);
    }
    EXPECT_EQ(sum, n);
    EXPECT_EQ(ranks.size(), members.size());  // a permutation of 0 .. m − 1
    EXPECT_EQ(*ranks.rbegin(), members.size() - 1);
  }
}

// ---------------------------------------------------------------------------
// plan_partitions: what to hand over, stop and pursue

TEST(PlanPartitions, ExcessIsHandedOverHighestNumberedFirst) {
  // Alone, then a second member joins: 6 partitions, all ours, share 3.
  const std::vector<std::string> parts(6, "a");
  const PartitionPlan p =
      plan_partitions(read_of({"a", "b"}, parts, "a", 0), {0, 1, 2, 3, 4, 5}, {});
  EXPECT_EQ(p.share, 3u);
  EXPECT_EQ(p.hand_over, (Ids{5, 4, 3}));
  EXPECT_TRUE(p.withdraw.empty());
  EXPECT_EQ(p.want, 0u);
  EXPECT_TRUE(p.candidates.empty());
}

TEST(PlanPartitions, OnlyPursuedPartitionsCountAsHeld) {
  // A lease of ours that no election of this member pursues is not handed over.
  const PartitionPlan p =
      plan_partitions(read_of({"a", "b"}, {"a", "a", "b", "b"}, "a", 0), {0}, {});
  EXPECT_EQ(p.share, 2u);
  EXPECT_TRUE(p.hand_over.empty());
  EXPECT_EQ(p.want, 1u);
}

TEST(PlanPartitions, AShrinkingShareStopsTheContestsBeyondIt) {
  // Contending for three free partitions with share 3; two members join and
  // the share drops to 1: the lowest contests beyond the share stop, the one
  // held stays.
  const std::vector<std::string> parts = {"", "a", "", "", "", ""};
  const PartitionPlan alone = plan_partitions(read_of({"a", "", ""}, parts, "a", 0), {0, 1, 2}, {});
  EXPECT_TRUE(alone.withdraw.empty());
  EXPECT_EQ(alone.share, 6u);
  const PartitionPlan crowded =
      plan_partitions(read_of({"a", "b", "c"}, {"", "a", "", "", "b", "c"}, "a", 0), {0, 1, 2}, {});
  EXPECT_EQ(crowded.share, 2u);  // 6 over 3
  EXPECT_EQ(crowded.withdraw, Ids{0});
  const std::vector<std::string> more = {"", "a", "", "", "b", "c", "d", "e", "f"};
  const PartitionPlan shrunk = plan_partitions(
      read_of({"a", "b", "c", "d", "e", "f", "", "", ""}, more, "a", 0), {0, 1, 2, 3}, {});
  EXPECT_EQ(shrunk.share, 2u);  // 9 over 6: the three holding most (a first) get 2
  EXPECT_EQ(shrunk.withdraw, (Ids{0, 2}));
  EXPECT_TRUE(shrunk.hand_over.empty());
  EXPECT_EQ(shrunk.want, 0u);
}

TEST(PlanPartitions, APartitionAnotherMemberWonIsLost) {
  const PartitionPlan p =
      plan_partitions(read_of({"a", "b"}, {"b", "", "a", ""}, "a", 0), {0, 1, 2}, {});
  EXPECT_EQ(p.lost, Ids{0});
  EXPECT_TRUE(p.hand_over.empty());
  EXPECT_TRUE(p.withdraw.empty());  // pursuing 1 and 2 fits the share of 2
  EXPECT_EQ(p.want, 0u);
}

TEST(PlanPartitions, AHandoverEndsWhenThePartitionIsNoLongerOurs) {
  // Partition 1 was handed over and is free now; 2 is still ours (its work
  // runs): only 1 may be pursued again.
  const PartitionPlan p = plan_partitions(read_of({"a"}, {"", "", "a"}, "a", 0), {}, {1, 2});
  EXPECT_EQ(p.handed_over, Ids{1});
  EXPECT_EQ(p.share, 3u);
  EXPECT_EQ(p.want, 3u);
  EXPECT_EQ(p.candidates, (Ids{0, 1}));
}

TEST(PlanPartitions, DeficitPursuesFreePartitionsFromARankDependentStart) {
  // 8 partitions over 4 members, none held: each member starts at its rank's
  // quarter of the free list, wrapping around.
  const std::vector<std::string> slots = {"a", "b", "c", "d"};
  const std::vector<std::string> parts(8, "");
  const PartitionPlan first = plan_partitions(read_of(slots, parts, "a", 0), {}, {});
  const PartitionPlan last = plan_partitions(read_of(slots, parts, "d", 3), {}, {});
  EXPECT_EQ(first.want, 2u);
  EXPECT_EQ(first.candidates, (Ids{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(last.want, 2u);
  EXPECT_EQ(last.candidates, (Ids{6, 7, 0, 1, 2, 3, 4, 5}));
}

TEST(PlanPartitions, CandidatesSkipWhatIsAlreadyPursued) {
  // Contending for 0 (still free): it counts against the share and is no
  // candidate; the others are.
  const PartitionPlan p = plan_partitions(read_of({"a"}, {"", "", ""}, "a", 0), {0}, {});
  EXPECT_EQ(p.want, 2u);
  EXPECT_EQ(p.candidates, (Ids{1, 2}));
}

TEST(PlanPartitions, NothingToPursueWhenTheShareIsFull) {
  const PartitionPlan p =
      plan_partitions(read_of({"a", "b"}, {"a", "", "b", ""}, "a", 0), {0, 1}, {});
  EXPECT_EQ(p.share, 2u);
  EXPECT_EQ(p.want, 0u);
  EXPECT_TRUE(p.candidates.empty());
}

}  // namespace
}  // namespace simba
