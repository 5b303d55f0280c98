// A mutex and a condition variable from a fixed, process-wide set, chosen by an
// object's address: for the many objects that are rarely locked or waited on
// (a term, an election's stop state), where a pair of their own would be most
// of their bytes (ADR 0024). Objects that share a slot only see spurious
// wake-ups, so every wait re-checks its condition. A parking lock is never held
// while taking another lock, so it is always the innermost: a free waiting
// under its election's queue lock reads the stop state under one.
#ifndef SIMBA_ENGINE_PARKING_H
#define SIMBA_ENGINE_PARKING_H

#include <condition_variable>
#include <mutex>

namespace simba::engine {

struct Parking {
  std::mutex mu;
  std::condition_variable cv;
};

Parking& parking_for(const void* object);

// The same for the threads sleeping for a SerialQueue's lock word: a set of its
// own, so that waking them never wakes a term's waiters. Its mutex is taken only
// inside the word's lock() and unlock(), and nothing is locked under it.
Parking& queue_parking_for(const void* queue);

}  // namespace simba::engine

#endif
