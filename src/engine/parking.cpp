#include "engine/parking.h"

#include <cstddef>
#include <cstdint>

namespace simba::engine {

namespace {
// Enough that unrelated objects rarely share one.
constexpr size_t kSlots = 64;

Parking& slot_for(Parking* slots, const void* object) {
  // Heap blocks are 16-byte aligned: the low four bits would pick every slot
  // but a few; fold in higher bits too.
  const auto a = reinterpret_cast<uintptr_t>(object);
  return slots[((a >> 4) ^ (a >> 10)) % kSlots];
}
}  // namespace

// Never destroyed: terms and queues may outlive static destruction on a host's
// threads.
Parking& parking_for(const void* object) {
  static Parking* const slots = new Parking[kSlots];
  return slot_for(slots, object);
}

Parking& queue_parking_for(const void* queue) {
  static Parking* const slots = new Parking[kSlots];
  return slot_for(slots, queue);
}

}  // namespace simba::engine
