// A lease name as every layer of one lease keeps it: the node's contender, each
// of its terms and the engine's election share one immutable block instead of
// holding a string each (ADR 0024). Copying it counts a reference.
//
// A name may also live inside its owner's own allocation (make_inline; an
// election's, ADR 0043): such a block is not counted, so a copy of it is a
// name of its own (a heap block), and only borrow() shares it, where the
// caller knows that the owner outlives the copy.
#ifndef SIMBA_CORE_LEASE_NAME_H
#define SIMBA_CORE_LEASE_NAME_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace simba {

class LeaseName {
  template <typename T>
  using Text = std::enable_if_t<std::is_convertible_v<const T&, std::string_view>>;
  template <typename T>
  using NotName = std::enable_if_t<!std::is_same_v<T, LeaseName>>;

 public:
  LeaseName() = default;  // the empty name
  // Implicit, as std::string's: a name is written wherever a string is.
  LeaseName(std::string_view s);  // NOLINT(google-explicit-constructor)
  LeaseName(const std::string& s) : LeaseName(std::string_view(s)) {}                    // NOLINT
  LeaseName(const char* s) : LeaseName(s ? std::string_view(s) : std::string_view()) {}  // NOLINT
  LeaseName(const LeaseName& o) : word_(o.word_) { retain_or_copy(); }
  LeaseName(LeaseName&& o) noexcept : word_(o.word_) { o.word_ = 0; }
  LeaseName& operator=(LeaseName o) noexcept {
    std::swap(word_, o.word_);
    return *this;
  }
  ~LeaseName() { drop(); }

  // The bytes a name of `s` takes inside its owner's allocation, and the
  // name made there (at: suitably aligned for 4 bytes; the owner keeps them
  // until every borrow() of the name is gone).
  static size_t inline_bytes(std::string_view s) { return sizeof(Block) + s.size() + 1; }
  static LeaseName make_inline(void* at, std::string_view s);
  // `n` itself, uncounted when it is inline (its owner must outlive the copy).
  static LeaseName borrow(const LeaseName& n) {
    LeaseName b;
    b.word_ = n.word_;
    if (b.word_ && !b.is_inline()) b.block()->refs.fetch_add(1, std::memory_order_relaxed);
    return b;
  }

  std::string_view view() const {
    return word_ ? std::string_view(chars(), block()->size) : std::string_view();
  }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  std::string str() const { return std::string(view()); }
  // NUL-terminated, valid as long as any copy of this name lives.
  const char* c_str() const { return word_ ? chars() : ""; }
  size_t size() const { return word_ ? block()->size : 0; }
  bool empty() const { return size() == 0; }

  // Compared as text with another name or anything a string_view is made from,
  // on either side, without making a name of the other side.
  template <typename T, typename = Text<T>>
  friend bool operator==(const LeaseName& a, const T& b) {
    return a.view() == std::string_view(b);
  }
  template <typename T, typename = Text<T>>
  friend bool operator!=(const LeaseName& a, const T& b) {
    return !(a == b);
  }
  template <typename T, typename = Text<T>, typename = NotName<T>>
  friend bool operator==(const T& a, const LeaseName& b) {
    return b == a;
  }
  template <typename T, typename = Text<T>, typename = NotName<T>>
  friend bool operator!=(const T& a, const LeaseName& b) {
    return !(b == a);
  }
  friend std::ostream& operator<<(std::ostream& o, const LeaseName& n);
  friend std::string operator+(const std::string& a, const LeaseName& b) {
    return a + std::string(b.view());
  }
  friend std::string operator+(const char* a, const LeaseName& b) {
    return std::string(a) + std::string(b.view());
  }
  friend std::string operator+(const LeaseName& a, const std::string& b) {
    return std::string(a.view()) + b;
  }
  friend std::string operator+(const LeaseName& a, const char* b) {
    return std::string(a.view()) + b;
  }

 private:
  // One heap block: this header, then the characters and a NUL.
  struct Block {
    std::atomic<uint32_t> refs;
    uint32_t size;
  };
  static Block* make_block(void* at, std::string_view s);
  // The block's address, and in its lowest bit (a block is 4-aligned) whether
  // it is inline: read from this word alone, never from the block, since a
  // borrowed name may be destroyed after its owner freed the block.
  static constexpr uintptr_t kInline = 1;
  Block* block() const { return reinterpret_cast<Block*>(word_ & ~kInline); }
  bool is_inline() const { return (word_ & kInline) != 0; }
  const char* chars() const { return reinterpret_cast<const char*>(block() + 1); }
  void retain_or_copy();
  void drop() noexcept;
  uintptr_t word_ = 0;
};

}  // namespace simba

#endif
