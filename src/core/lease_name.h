// A lease name as every layer of one lease keeps it: the node's contender, each
// of its terms and the engine's election share one immutable block instead of
// holding a string each (ADR 0024). Copying it counts a reference.
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
  LeaseName(const LeaseName& o) noexcept : block_(o.block_) { retain(); }
  LeaseName(LeaseName&& o) noexcept : block_(o.block_) { o.block_ = nullptr; }
  LeaseName& operator=(LeaseName o) noexcept {
    std::swap(block_, o.block_);
    return *this;
  }
  ~LeaseName() { drop(); }

  std::string_view view() const {
    return block_ ? std::string_view(chars(), block_->size) : std::string_view();
  }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  std::string str() const { return std::string(view()); }
  // NUL-terminated, valid as long as any copy of this name lives.
  const char* c_str() const { return block_ ? chars() : ""; }
  size_t size() const { return block_ ? block_->size : 0; }
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
  const char* chars() const { return reinterpret_cast<const char*>(block_ + 1); }
  void retain() const {
    if (block_) block_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void drop() noexcept;
  Block* block_ = nullptr;
};

}  // namespace simba

#endif
