#include "engine/parking.h"

#include <cstddef>
#include <cstdint>

namespace simba::engine {

Parking& parking_for(const void* object) {
  // Enough that unrelated objects rarely share one. Never destroyed: terms may
  // outlive static destruction on a host's threads.
  constexpr size_t kSlots = 64;
  static Parking* const slots = new Parking[kSlots];
  // Heap blocks are 16-byte aligned: the low four bits would pick every slot
  // but a few; fold in higher bits too.
  const auto a = reinterpret_cast<uintptr_t>(object);
  return slots[((a >> 4) ^ (a >> 10)) % kSlots];
}

}  // namespace simba::engine
