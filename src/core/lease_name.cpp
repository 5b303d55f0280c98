#include "core/lease_name.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>

namespace simba {

LeaseName::Block* LeaseName::make_block(void* at, std::string_view s) {
  // names.cpp bounds a name to 128 characters; the size fits 32 bits anyway.
  Block* b = new (at) Block{{1}, static_cast<uint32_t>(s.size())};
  char* chars = reinterpret_cast<char*>(b + 1);
  std::memcpy(chars, s.data(), s.size());
  chars[s.size()] = '\0';
  return b;
}

LeaseName::LeaseName(std::string_view s) {
  if (s.empty()) return;  // the empty name holds no block
  void* p = std::malloc(inline_bytes(s));
  if (!p) throw std::bad_alloc();
  word_ = reinterpret_cast<uintptr_t>(make_block(p, s));
}

LeaseName LeaseName::make_inline(void* at, std::string_view s) {
  LeaseName n;
  if (!s.empty()) n.word_ = reinterpret_cast<uintptr_t>(make_block(at, s)) | kInline;
  return n;
}

void LeaseName::retain_or_copy() {
  if (!word_) return;
  if (is_inline()) {
    const std::string_view text = view();
    word_ = 0;
    *this = LeaseName(text);
    return;
  }
  block()->refs.fetch_add(1, std::memory_order_relaxed);
}

void LeaseName::drop() noexcept {
  if (word_ && !is_inline() && block()->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Block* b = block();
    b->~Block();
    std::free(b);
  }
  word_ = 0;
}

std::ostream& operator<<(std::ostream& o, const LeaseName& n) { return o << n.view(); }

}  // namespace simba
