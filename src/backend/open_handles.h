// What a backend has open on the loop (timers, lookups, connections) and the
// end of its shutdown: Backend::shutdown's `done` runs when the last of them
// closed, so that nothing of the backend is left on the loop after it.
#ifndef SIMBA_BACKEND_OPEN_HANDLES_H
#define SIMBA_BACKEND_OPEN_HANDLES_H

#include <functional>
#include <utility>

namespace simba {

class OpenHandles {
 public:
  void opened(int n = 1) { count_ += n; }
  // One closed (or was never opened after all). After begin_shutdown, the
  // last one runs the shutdown's `done`, which may delete the backend: the
  // caller must not touch it after this call.
  void closed() {
    if (--count_ == 0 && closing_ && done_) {
      auto done = std::move(done_);
      done();
    }
  }
  void begin_shutdown(std::function<void()> done) {
    closing_ = true;
    done_ = std::move(done);
  }
  // Shutting down: nothing is delivered any more and nothing new starts.
  bool closing() const { return closing_; }

 private:
  int count_ = 0;
  bool closing_ = false;
  std::function<void()> done_;
};

}  // namespace simba

#endif  // SIMBA_BACKEND_OPEN_HANDLES_H
