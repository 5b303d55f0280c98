// Items by key, one item per key: an open-addressing table (linear probing)
// of pointers to items that the table does not own. A slot costs one pointer,
// the table is 3/8 to 3/4 full: 10-21 bytes per item, where a std::map node
// costs 48 and more (ADR 0024). NameIndex (names, several items per name) and
// the Node's contenders by id are built on it.
//
// KeyOf is a function object: KeyOf{}(const T*) gives the item's key, which
// must not change while the item is in the table; Hash hashes that key.
#ifndef SIMBA_CORE_OPEN_TABLE_H
#define SIMBA_CORE_OPEN_TABLE_H

#include <cstddef>
#include <functional>
#include <type_traits>
#include <vector>

namespace simba {

template <typename T, typename KeyOf,
          typename Key = std::decay_t<decltype(KeyOf{}(static_cast<const T*>(nullptr)))>,
          typename Hash = std::hash<Key>>
class OpenTable {
 public:
  // The item of `key`; null when none.
  T* find(const Key& key) const {
    const size_t slot = find_slot(key);
    return slot == kNone ? nullptr : slots_[slot];
  }

  // Puts `item` in place of the item with the same key (there must be one).
  void replace(T* item) { slots_[find_slot(KeyOf{}(item))] = item; }

  // Adds `item`, whose key must not be in the table.
  void insert(T* item) {
    if ((size_ + 1) * 4 > slots_.size() * 3) resize(slots_.empty() ? kMinSlots : slots_.size() * 2);
    place(item);
    ++size_;
  }

  // Removes the item of `key` (no-op if none).
  void erase(const Key& key) {
    const size_t slot = find_slot(key);
    if (slot == kNone) return;
    vacate(slot);
    --size_;
    if (slots_.size() > kMinSlots && size_ * 8 < slots_.size()) resize(slots_.size() / 2);
  }

  void clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    size_ = 0;
  }

  size_t size() const { return size_; }

  // Calls fn(T*) for every item, in no particular order; fn must not change
  // the table.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (T* item : slots_) {
      if (item) fn(item);
    }
  }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  static constexpr size_t kMinSlots = 16;

  size_t home(const Key& key) const { return Hash{}(key) & (slots_.size() - 1); }
  size_t next(size_t slot) const { return (slot + 1) & (slots_.size() - 1); }

  size_t find_slot(const Key& key) const {
    if (slots_.empty()) return kNone;
    for (size_t i = home(key);; i = next(i)) {
      if (slots_[i] == nullptr) return kNone;
      if (KeyOf{}(slots_[i]) == key) return i;
    }
  }

  void place(T* item) {
    size_t i = home(KeyOf{}(item));
    while (slots_[i] != nullptr) i = next(i);
    slots_[i] = item;
  }

  // Empties `slot` and moves back the entries after it that probing would no
  // longer reach (deletion without tombstones).
  void vacate(size_t slot) {
    slots_[slot] = nullptr;
    for (size_t i = next(slot); slots_[i] != nullptr; i = next(i)) {
      const size_t want = home(KeyOf{}(slots_[i]));
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
    for (T* item : old) {
      if (item) place(item);
    }
  }

  std::vector<T*> slots_;  // a power of two in size, at most 3/4 full; null: empty
  size_t size_ = 0;
};

}  // namespace simba

#endif
