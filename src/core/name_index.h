// Items by name, each name's items in arrival order: an open-addressing table
// (linear probing) from a name to the first of its items, the others linked
// behind it through the items themselves. The Node lists its contenders so
// (one election per name, or the locks queued on it): about 16 bytes per name
// at 100,000 names, where a std::multimap node costs 64 (ADR 0024).
//
// T has `name` (anything a std::string_view is made from, whose characters
// stay put while the item is listed) and `T* next_of_name`, which the index
// owns while the item is listed. Items are not owned: one must stay where it
// is from insert() to erase().
#ifndef SIMBA_CORE_NAME_INDEX_H
#define SIMBA_CORE_NAME_INDEX_H

#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

namespace simba {

template <typename T>
class NameIndex {
 public:
  // The first item of `name`; null when none.
  T* first(std::string_view name) const {
    const size_t slot = find_slot(name);
    return slot == kNone ? nullptr : slots_[slot];
  }

  // Lists `item` last among the items of its name.
  void insert(T* item) {
    item->next_of_name = nullptr;
    const std::string_view name = key(item);
    if (T* head = first(name)) {
      while (head->next_of_name) head = head->next_of_name;
      head->next_of_name = item;
      return;
    }
    if ((names_ + 1) * 4 > slots_.size() * 3)
      resize(slots_.empty() ? kMinSlots : slots_.size() * 2);
    place(item);
    ++names_;
  }

  // Unlists `item` (no-op if it is not listed).
  void erase(T* item) {
    const size_t slot = find_slot(key(item));
    if (slot == kNone) return;
    if (slots_[slot] == item) {
      if (item->next_of_name) {
        slots_[slot] = item->next_of_name;  // same name: same slot
      } else {
        vacate(slot);
        --names_;
        if (slots_.size() > kMinSlots && names_ * 8 < slots_.size()) resize(slots_.size() / 2);
      }
    } else {
      for (T* before = slots_[slot]; before->next_of_name; before = before->next_of_name) {
        if (before->next_of_name == item) {
          before->next_of_name = item->next_of_name;
          break;
        }
      }
    }
    item->next_of_name = nullptr;
  }

  void clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    names_ = 0;
  }

  // Distinct names listed.
  size_t names() const { return names_; }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  static constexpr size_t kMinSlots = 16;

  static std::string_view key(const T* item) { return std::string_view(item->name); }
  size_t home(std::string_view name) const {
    return std::hash<std::string_view>{}(name) & (slots_.size() - 1);
  }
  size_t next(size_t slot) const { return (slot + 1) & (slots_.size() - 1); }

  size_t find_slot(std::string_view name) const {
    if (slots_.empty()) return kNone;
    for (size_t i = home(name);; i = next(i)) {
      if (slots_[i] == nullptr) return kNone;
      if (key(slots_[i]) == name) return i;
    }
  }

  void place(T* head) {
    size_t i = home(key(head));
    while (slots_[i] != nullptr) i = next(i);
    slots_[i] = head;
  }

  // Empties `slot` and moves back the entries after it that probing would no
  // longer reach (deletion without tombstones).
  void vacate(size_t slot) {
    slots_[slot] = nullptr;
    for (size_t i = next(slot); slots_[i] != nullptr; i = next(i)) {
      const size_t want = home(key(slots_[i]));
      // Moves back when its home is not in (slot, i], cyclically.
      const bool reachable = slot <= i ? (slot < want && want <= i) : (slot < want || want <= i);
      if (!reachable) {
        slots_[slot] = slots_[i];
        slots_[i] = nullptr;
        slot = i;
      }
    }
  }

  void resize(size_t size) {
    std::vector<T*> old(size, nullptr);
    old.swap(slots_);
    for (T* head : old) {
      if (head) place(head);
    }
  }

  std::vector<T*> slots_;  // a power of two in size, at most 3/4 full; null: empty
  size_t names_ = 0;
};

}  // namespace simba

#endif
