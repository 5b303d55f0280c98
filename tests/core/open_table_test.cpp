// OpenTable: items by key, against a reference model, through growth,
// shrinking, long probe runs (colliding hashes) and untagged slots.
#include "core/open_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace simba {
namespace {

struct Item {
  uint64_t key = 0;
};
struct KeyOf {
  uint64_t operator()(const Item* item) const { return item->key; }
};
// Few distinct hashes: long runs of entries with the same home and tag,
// distances past the 255 a slot records.
struct Colliding {
  size_t operator()(uint64_t key) const { return static_cast<size_t>(key % 3); }
};

template <typename Table>
void check_against(const Table& table, const std::map<uint64_t, Item*>& model, uint64_t keys) {
  ASSERT_EQ(table.size(), model.size());
  for (uint64_t k = 0; k < keys; ++k) {
    const auto it = model.find(k);
    ASSERT_EQ(table.find(k), it == model.end() ? nullptr : it->second) << "key " << k;
  }
  std::set<const Item*> seen;
  table.for_each([&](Item* item) { EXPECT_TRUE(seen.insert(item).second); });
  EXPECT_EQ(seen.size(), model.size());
}

template <typename Table>
void random_steps(uint64_t keys, int steps, unsigned seed) {
  std::mt19937 rng(seed);
  Table table;
  std::deque<Item> items;  // never moves its elements
  std::map<uint64_t, Item*> model;
  for (int step = 0; step < steps; ++step) {
    const uint64_t k = rng() % keys;
    const bool grow = step < steps / 2;
    const auto it = model.find(k);
    if (it == model.end()) {
      if (rng() % 100 < (grow ? 90u : 20u)) {
        items.push_back(Item{k});
        table.insert(&items.back());
        model[k] = &items.back();
      }
    } else if (rng() % 4 == 0) {
      items.push_back(Item{k});  // the same key, another item
      table.replace(&items.back());
      it->second = &items.back();
    } else if (rng() % 100 < (grow ? 30u : 80u)) {
      table.erase(k);
      model.erase(it);
    }
    if (step % 97 == 0 || step == steps - 1) check_against(table, model, keys);
  }
  for (const auto& entry : model) table.erase(entry.first);
  EXPECT_EQ(table.size(), 0u);
  table.erase(0);  // absent: no-op
  EXPECT_EQ(table.find(0), nullptr);
}

TEST(OpenTableTest, MatchesAModelThroughGrowthAndShrinking) {
  random_steps<OpenTable<Item, KeyOf>>(6000, 40000, 1);
}

TEST(OpenTableTest, MatchesAModelWhenHashesCollide) {
  random_steps<OpenTable<Item, KeyOf, uint64_t, Colliding>>(900, 6000, 2);
}

// An address with its top bits set (a tagged-pointer ABI) turns the tags off:
// every item stays found. The key is the address, so no item is read.
struct Address {
  uint64_t operator()(const Item* item) const { return reinterpret_cast<uintptr_t>(item); }
};

TEST(OpenTableTest, KeepsItemsWhoseAddressesUseTheTopBits) {
  if (sizeof(void*) != 8) GTEST_SKIP() << "no tags with 32-bit pointers";
  OpenTable<Item, Address> table;
  std::vector<Item> real(300);
  std::vector<Item*> all;
  for (Item& item : real) all.push_back(&item);
  for (Item* item : all) table.insert(item);
  for (uintptr_t i = 1; i <= 300; ++i) {
    all.push_back(reinterpret_cast<Item*>((uintptr_t{0xA5} << 56) | (i << 4)));
    table.insert(all.back());
  }
  ASSERT_EQ(table.size(), all.size());
  for (Item* item : all) ASSERT_EQ(table.find(reinterpret_cast<uintptr_t>(item)), item);
  size_t visited = 0;
  table.for_each([&](Item*) { ++visited; });
  EXPECT_EQ(visited, all.size());
  for (size_t i = 0; i < all.size(); i += 2) table.erase(reinterpret_cast<uintptr_t>(all[i]));
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(table.find(reinterpret_cast<uintptr_t>(all[i])), i % 2 ? all[i] : nullptr);
  }
}

}  // namespace
}  // namespace simba
