// NameIndex: names to their items in arrival order, against a reference model.
#include "core/name_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace simba {
namespace {

struct Item {
  std::string name;
  int id = 0;
  Item* next_of_name = nullptr;
};

// The ids listed under `name`, first to last.
std::vector<int> listed(const NameIndex<Item>& index, const std::string& name) {
  std::vector<int> ids;
  for (const Item* it = index.first(name); it; it = it->next_of_name) ids.push_back(it->id);
  return ids;
}

TEST(NameIndexTest, KeepsEachNamesItemsInArrivalOrder) {
  NameIndex<Item> index;
  Item a{"x", 1}, b{"x", 2}, c{"y", 3}, d{"x", 4};
  EXPECT_EQ(index.first("x"), nullptr);
  for (Item* it : {&a, &b, &c, &d}) index.insert(it);
  EXPECT_EQ(listed(index, "x"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(listed(index, "y"), (std::vector<int>{3}));
  EXPECT_EQ(index.names(), 2u);
  index.erase(&b);  // from the middle
  EXPECT_EQ(listed(index, "x"), (std::vector<int>{1, 4}));
  index.erase(&a);  // the first: the next one leads
  EXPECT_EQ(listed(index, "x"), (std::vector<int>{4}));
  index.erase(&a);  // no longer listed: no-op
  index.erase(&d);
  EXPECT_EQ(index.first("x"), nullptr);
  EXPECT_EQ(listed(index, "y"), (std::vector<int>{3}));
  EXPECT_EQ(index.names(), 1u);
  index.clear();
  EXPECT_EQ(index.first("y"), nullptr);
}

// Random inserts and erases over few names (long lists) and many (the table
// grows, shrinks, and moves entries back on deletion), checked after every
// step against a model.
TEST(NameIndexTest, MatchesAModelUnderRandomInsertsAndErases) {
  for (const int distinct : {3, 200, 5000}) {
    std::mt19937 rng(static_cast<unsigned>(distinct));
    NameIndex<Item> index;
    std::deque<Item> items;  // never moves its elements
    std::map<std::string, std::vector<int>> model;
    std::vector<Item*> listed_items;
    for (int step = 0; step < 20000; ++step) {
      const bool insert = listed_items.empty() || rng() % 100 < (step < 10000 ? 70 : 30);
      std::string name;
      if (insert) {
        name = "name-" + std::to_string(rng() % distinct);
        items.push_back(Item{name, step});
        index.insert(&items.back());
        listed_items.push_back(&items.back());
        model[name].push_back(step);
      } else {
        const size_t pick = rng() % listed_items.size();
        Item* item = listed_items[pick];
        listed_items.erase(listed_items.begin() + static_cast<std::ptrdiff_t>(pick));
        index.erase(item);
        name = item->name;
        std::vector<int>& ids = model[name];
        ids.erase(std::find(ids.begin(), ids.end(), item->id));
        if (ids.empty()) model.erase(name);
      }
      const auto want = model.find(name);
      ASSERT_EQ(listed(index, name), want == model.end() ? std::vector<int>{} : want->second)
          << "step " << step << ", " << distinct << " names";
      ASSERT_EQ(index.names(), model.size());
    }
    // Every name still finds its whole list, after all the moves.
    for (const auto& [name, ids] : model) ASSERT_EQ(listed(index, name), ids) << name;
    for (Item* item : listed_items) index.erase(item);
    EXPECT_EQ(index.names(), 0u);
    for (const auto& entry : model) EXPECT_EQ(index.first(entry.first), nullptr);
  }
}

}  // namespace
}  // namespace simba
