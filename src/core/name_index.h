// Items by name, each name's items in arrival order: an open-addressing table
// (linear probing) from a name to the first of its items, the others linked
// behind it through the items themselves. The Node lists its contenders so
// (one election per name, or the locks queued on it): 11-14 bytes per name
// (open_table.h), where a std::multimap node costs 64 (ADR 0024, 0043).
//
// T has `name` (anything a std::string_view is made from, whose characters
// stay put while the item is listed) and `T* next_of_name`, which the index
// owns while the item is listed. Items are not owned: one must stay where it
// is from insert() to erase().
#ifndef SIMBA_CORE_NAME_INDEX_H
#define SIMBA_CORE_NAME_INDEX_H

#include <cstddef>
#include <string_view>

#include "core/open_table.h"

namespace simba {

template <typename T>
class NameIndex {
 public:
  // The first item of `name`; null when none.
  T* first(std::string_view name) const { return heads_.find(name); }

  // Lists `item` last among the items of its name.
  void insert(T* item) {
    item->next_of_name = nullptr;
    if (T* head = first(key(item))) {
      while (head->next_of_name) head = head->next_of_name;
      head->next_of_name = item;
      return;
    }
    heads_.insert(item);
  }

  // Unlists `item` (no-op if it is not listed).
  void erase(T* item) {
    T* head = first(key(item));
    if (!head) return;
    if (head == item) {
      if (item->next_of_name) {
        heads_.replace(item->next_of_name);  // same name: same slot
      } else {
        heads_.erase(key(item));
      }
    } else {
      for (T* before = head; before->next_of_name; before = before->next_of_name) {
        if (before->next_of_name == item) {
          before->next_of_name = item->next_of_name;
          break;
        }
      }
    }
    item->next_of_name = nullptr;
  }

  void clear() { heads_.clear(); }

  // Distinct names listed.
  size_t names() const { return heads_.size(); }

 private:
  static std::string_view key(const T* item) { return std::string_view(item->name); }
  struct KeyOf {
    std::string_view operator()(const T* item) const { return key(item); }
  };
  OpenTable<T, KeyOf> heads_;  // the first item of each name
};

}  // namespace simba

#endif
