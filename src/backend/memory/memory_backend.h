// memory://NAME: the in-process backend. Operations apply to the process-wide
// MemoryStore of NAME at once; answers come back on a later loop turn, delayed,
// dropped or withheld by the test-only fault switches.
#ifndef SIMBA_BACKEND_MEMORY_BACKEND_H
#define SIMBA_BACKEND_MEMORY_BACKEND_H

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "backend/backend.h"
#include "backend/memory/memory_store.h"

namespace simba {

// Fault switches of one memory backend (one client), for tests. Any thread.
struct MemoryFaults {
  std::atomic<int64_t> reply_delay_ns{0};  // answers arrive this much later
  std::atomic<bool> drop_replies{false};   // applied, but the answer is lost
  std::atomic<bool> hang{false};           // not applied, no answer
  std::atomic<bool> unreachable{false};    // not applied, answered with an error
  // Not a fault: the thread that last made a call or took in an answer, i.e.
  // the one running the client's loop then (tests of who runs the loop).
  std::atomic<std::thread::id> loop_runner{};
};

std::unique_ptr<Backend> make_memory_backend(uv_loop_t* loop, const std::string& store_name,
                                             const std::string& client_name,
                                             std::shared_ptr<MemoryFaults> faults);

}  // namespace simba

#endif
