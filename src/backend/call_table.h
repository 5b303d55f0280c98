// The calls a backend has started and not yet completed: the plumbing the
// Redis, PostgreSQL and ZooKeeper backends share. Each call completes exactly
// once: by its answer, by a preset outcome (known before any I/O, or its
// connection is gone; delivered on a later loop turn, never inside the call
// that started it), or by its timer. A completed call is never found again,
// so an answer that comes later finds nothing and is dropped (a late reply is
// never adopted).
#ifndef SIMBA_BACKEND_CALL_TABLE_H
#define SIMBA_BACKEND_CALL_TABLE_H

#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "backend/open_handles.h"
#include "core/backend_types.h"
#include "core/time.h"

namespace simba {

// What every call has; a backend's call type derives from it and adds what it
// sends and whom it answers.
struct CallBase {
  uint64_t id = 0;
  int64_t timeout_ms = 0;  // its timer, each time it is (re)started
  bool preset = false;     // its timer fires at once and completes it with:
  Outcome preset_outcome = Outcome::kError;
  std::string preset_error;
  bool finished = false;  // forgotten; its memory goes when its timer closed
  uv_timer_t timer;
  void* table = nullptr;
};

template <typename Call>
class CallTable {
 public:
  struct Hooks {
    // The timer of a call fired with no answer and nothing preset: the
    // backend drops what the call went out on and completes it (kTimeout).
    std::function<void(Call*)> timed_out;
    // A preset outcome is due: the backend completes the call with it.
    std::function<void(Call*, Outcome, const std::string&)> preset_due;
  };

  // Each call's timer counts in the backend's `open_handles` until it closed.
  CallTable(uv_loop_t* loop, OpenHandles* open_handles, Hooks hooks)
      : loop_(loop), open_handles_(open_handles), hooks_(std::move(hooks)) {}
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;

  // A new call whose timer runs `timeout` (at least 1 ms) from now.
  Call* start(Duration timeout) {
    auto* c = new Call;
    c->id = ++next_id_;
    c->table = this;
    c->timeout_ms = std::max<int64_t>(1, to_ms_ceil(timeout));
    uv_timer_init(loop_, &c->timer);
    c->timer.data = c;
    open_handles_->opened();
    calls_[c->id] = c;
    restart_timer(c);
    return c;
  }

  // The call `id`, or nullptr once it completed.
  Call* find(uint64_t id) const {
    auto it = calls_.find(id);
    return it == calls_.end() ? nullptr : it->second;
  }

  // Completes `c` with `o` on a later loop turn (preset_due).
  void preset(Call* c, Outcome o, std::string error) {
    c->preset = true;
    c->preset_outcome = o;
    c->preset_error = std::move(error);
    uv_timer_start(&c->timer, on_timer, 0, 0);
  }

  // Its timeout counts from now (a call that waited in a queue goes on the wire).
  void restart_timer(Call* c) {
    uv_timer_start(&c->timer, on_timer, static_cast<uint64_t>(c->timeout_ms), 0);
  }
  void stop_timer(Call* c) { uv_timer_stop(&c->timer); }

  // Forgets `c`: nothing finds it again. Its memory stays valid until a later
  // loop turn (its timer's close callback), so move its callback out first and
  // run it after. Finishing a finished call does nothing.
  void finish(Call* c) {
    if (c->finished) return;
    c->finished = true;
    calls_.erase(c->id);
    uv_timer_stop(&c->timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), [](uv_handle_t* h) {
      auto* call = static_cast<Call*>(h->data);
      auto* table = static_cast<CallTable*>(call->table);
      delete call;
      table->open_handles_->closed();
    });
  }

  // At shutdown: forgets every call, completing none.
  void drop_all() {
    std::map<uint64_t, Call*> calls;
    calls.swap(calls_);
    for (auto& kv : calls) finish(kv.second);
  }

  // `fn(call)` for each pending call, in the order they started. `fn` must not
  // start or finish calls (collect them, then act).
  template <typename Fn>
  void for_each(Fn fn) const {
    for (const auto& kv : calls_) fn(kv.second);
  }

 private:
  static void on_timer(uv_timer_t* t) {
    auto* c = static_cast<Call*>(t->data);
    auto* table = static_cast<CallTable*>(c->table);
    if (c->finished) return;
    if (c->preset) {
      table->hooks_.preset_due(c, c->preset_outcome, c->preset_error);
    } else {
      table->hooks_.timed_out(c);
    }
  }

  uv_loop_t* loop_;
  OpenHandles* open_handles_;
  Hooks hooks_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Call*> calls_;
};

}  // namespace simba

#endif  // SIMBA_BACKEND_CALL_TABLE_H
