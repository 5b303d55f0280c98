// A pointer to an object that counts its own references (intrusive): T has
// retain() and release(), and release() frees it after the last. One count
// serves the core, the engine and the C handles of the same object, where a
// std::shared_ptr would add a control block and a second count (ADR 0035).
#ifndef SIMBA_CORE_REF_PTR_H
#define SIMBA_CORE_REF_PTR_H

#include <cstddef>
#include <utility>

namespace simba {

template <typename T>
class RefPtr {
 public:
  RefPtr() = default;
  RefPtr(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): as shared_ptr
  // Takes a new reference to `p` (null allowed).
  explicit RefPtr(T* p) : p_(p) {
    if (p_) p_->retain();
  }
  RefPtr(const RefPtr& o) : RefPtr(o.p_) {}
  RefPtr(RefPtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U>
  RefPtr(const RefPtr<U>& o) : RefPtr(o.get()) {}  // NOLINT(google-explicit-constructor)
  RefPtr& operator=(RefPtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~RefPtr() { reset(); }

  void reset() {
    if (T* p = std::exchange(p_, nullptr)) p->release();
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

  friend bool operator==(const RefPtr& a, const RefPtr& b) { return a.p_ == b.p_; }
  friend bool operator!=(const RefPtr& a, const RefPtr& b) { return a.p_ != b.p_; }
  friend bool operator==(const RefPtr& a, std::nullptr_t) { return a.p_ == nullptr; }
  friend bool operator!=(const RefPtr& a, std::nullptr_t) { return a.p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

}  // namespace simba

#endif
