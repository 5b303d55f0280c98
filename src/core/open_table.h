// Items by key, one item per key: an open-addressing table (linear probing)
// of pointers to items that the table does not own. A slot costs one pointer;
// the table grows by a quarter when 3/4 full, so it stays 3/5 to 3/4 full:
// 11-14 bytes per item at any count, where a std::map node costs 48 and more
// (ADR 0024, 0043). NameIndex (names, several items per name) and the Node's
// contenders by id are built on it.
//
// Where pointers are 64 bits wide, a slot keeps 16 bits of its item's hash in
// the top bits that user-space addresses leave zero (x86-64, aarch64): a probe
// reads an item only when those bits match, about one in 65,536 others, so a
// lookup of a string key rarely touches more than its own item. An address
// with any of those bits set (a tagged-pointer ABI, 57-bit addresses) turns
// the tags off for the table: it then compares every key it probes.
//
// KeyOf is a function object: KeyOf{}(const T*) gives the item's key, which
// must not change while the item is in the table; Hash hashes that key.
#ifndef SIMBA_CORE_OPEN_TABLE_H
#define SIMBA_CORE_OPEN_TABLE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    const size_t slot = find_slot(key, hash_of(key));
    return slot == kNone ? nullptr : item(slots_[slot]);
  }

  // Puts `item` in place of the item with the same key (there must be one).
  void replace(T* item) {
    const uint64_t h = hash_of(KeyOf{}(item));
    const Slot s = make_slot(item, h);
    const size_t slot = find_slot(KeyOf{}(item), h);
    slots_[slot] = tagged_ ? with_distance(s, static_cast<size_t>(distance_of(slots_[slot]))) : s;
  }

  // Adds `item`, whose key must not be in the table.
  void insert(T* item) {
    if ((size_ + 1) * 4 > slots_.size() * 3) {
      resize(slots_.empty() ? kMinSlots : slots_.size() + slots_.size() / 4);
    }
    const uint64_t h = hash_of(KeyOf{}(item));
    place(make_slot(item, h), h);
    ++size_;
  }

  // Removes the item of `key` (no-op if none).
  void erase(const Key& key) {
    const size_t slot = find_slot(key, hash_of(key));
    if (slot == kNone) return;
    vacate(slot);
    --size_;
    if (slots_.size() > kMinSlots && size_ * 8 < slots_.size()) {
      resize(std::max(kMinSlots, slots_.size() / 2));
    }
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
    for (const Slot s : slots_) {
      if (s) fn(item(s));
    }
  }

 private:
  // An item's address; while tagged_, with 8 bits of its key's hash (a probe
  // reads an item only when they match) and its distance from its home slot
  // (deletion moves entries back without reading their items).
  using Slot = uintptr_t;
  static_assert(sizeof(Slot) >= sizeof(T*), "a slot holds a pointer");
  static constexpr bool kCanTag = sizeof(Slot) == 8;
  static constexpr unsigned kTagShift = sizeof(Slot) * 8 - 8;
  static constexpr unsigned kDistanceShift = sizeof(Slot) * 8 - 16;
  static constexpr Slot kAddressBits = ~Slot(0) >> 16;
  static constexpr Slot kFar = 255;  // a distance of 255 or more: ask the key
  static constexpr size_t kNone = static_cast<size_t>(-1);
  static constexpr size_t kMinSlots = 16;

  // The key's hash, mixed (std::hash of an integer is the integer): its top
  // 32 bits pick the home slot, the 8 below them are the tag.
  static uint64_t hash_of(const Key& key) {
    return static_cast<uint64_t>(Hash{}(key)) * 0x9E3779B97F4A7C15ull;
  }
  // Any table size below 2^32, not only powers of two, without a division.
  size_t home(uint64_t h) const {
    return static_cast<size_t>(((h >> 32) * static_cast<uint64_t>(slots_.size())) >> 32);
  }
  size_t next(size_t slot) const { return slot + 1 == slots_.size() ? 0 : slot + 1; }
  // How far `slot` is past `from`, cyclically.
  size_t distance(size_t from, size_t slot) const {
    return slot >= from ? slot - from : slot + slots_.size() - from;
  }
  static Slot tag(uint64_t h) { return static_cast<Slot>((h >> 24) & 0xFF); }
  static Slot distance_of(Slot s) { return (s >> kDistanceShift) & kFar; }
  static Slot with_distance(Slot s, size_t d) {
    const Slot capped = d < kFar ? static_cast<Slot>(d) : kFar;
    return (s & ~(kFar << kDistanceShift)) | capped << kDistanceShift;
  }

  T* item(Slot s) const { return reinterpret_cast<T*>(tagged_ ? s & kAddressBits : s); }
  // Whether the entry `s`, `d` slots past the home of hash `h`, may be the
  // item of that key.
  bool may_be(Slot s, uint64_t h, size_t d) const {
    if (!tagged_) return true;
    return s >> kTagShift == tag(h) && distance_of(s) == (d < kFar ? d : kFar);
  }
  Slot make_slot(T* item, uint64_t h) {
    const Slot address = reinterpret_cast<Slot>(item);
    if (tagged_ && (address & ~kAddressBits) != 0) untag();
    return tagged_ ? address | tag(h) << kTagShift : address;
  }
  void untag() {
    for (Slot& s : slots_) s &= kAddressBits;
    tagged_ = false;
  }
  // The home slot of the entry in `slot`.
  size_t home_of(size_t slot) const {
    const Slot s = slots_[slot];
    if (tagged_ && distance_of(s) < kFar) {
      return distance(static_cast<size_t>(distance_of(s)), slot);
    }
    return home(hash_of(KeyOf{}(item(s))));
  }

  size_t find_slot(const Key& key, uint64_t h) const {
    if (slots_.empty()) return kNone;
    size_t d = 0;
    for (size_t i = home(h);; i = next(i), ++d) {
      const Slot s = slots_[i];
      if (s == 0) return kNone;
      if (may_be(s, h, d) && KeyOf{}(item(s)) == key) return i;
    }
  }

  void place(Slot s, uint64_t h) {
    size_t d = 0;
    size_t i = home(h);
    for (; slots_[i] != 0; i = next(i)) ++d;
    slots_[i] = tagged_ ? with_distance(s, d) : s;
  }

  // Empties `slot` and moves back the entries after it that probing would no
  // longer reach (deletion without tombstones).
  void vacate(size_t slot) {
    slots_[slot] = 0;
    for (size_t i = next(slot); slots_[i] != 0; i = next(i)) {
      const size_t want = home_of(i);
      // Moves back when its home is not in (slot, i], cyclically.
      const bool reachable = slot <= i ? (slot < want && want <= i) : (slot < want || want <= i);
      if (!reachable) {
        slots_[slot] = tagged_ ? with_distance(slots_[i], distance(want, slot)) : slots_[i];
        slots_[i] = 0;
        slot = i;
      }
    }
  }

  void resize(size_t size) {
    std::vector<Slot> old(size, 0);
    old.swap(slots_);
    for (size_t i = 0; i < old.size(); ++i) {
#if defined(__GNUC__)
      // Every item is read for its key: ask for one a few slots ahead.
      if (i + kAhead < old.size() && old[i + kAhead]) __builtin_prefetch(item(old[i + kAhead]));
#endif
      if (old[i]) place(old[i], hash_of(KeyOf{}(item(old[i]))));
    }
  }
  static constexpr size_t kAhead = 8;

  std::vector<Slot> slots_;  // at most 3/4 full; 0: empty
  size_t size_ = 0;
  bool tagged_ = kCanTag;  // slots carry tags
};

}  // namespace simba

#endif
