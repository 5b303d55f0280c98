#include "core/lease_name.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <ostream>

namespace simba {

LeaseName::LeaseName(std::string_view s) {
  if (s.empty()) return;  // the empty name holds no block
  // names.cpp bounds a name to 128 characters; the size fits 32 bits anyway.
  void* p = std::malloc(sizeof(Block) + s.size() + 1);
  if (!p) throw std::bad_alloc();
  block_ = new (p) Block{{1}, static_cast<uint32_t>(s.size())};
  char* chars = reinterpret_cast<char*>(block_ + 1);
  std::memcpy(chars, s.data(), s.size());
  chars[s.size()] = '\0';
}

void LeaseName::drop() noexcept {
  if (block_ && block_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    block_->~Block();
    std::free(block_);
  }
  block_ = nullptr;
}

std::ostream& operator<<(std::ostream& o, const LeaseName& n) { return o << n.view(); }

}  // namespace simba
