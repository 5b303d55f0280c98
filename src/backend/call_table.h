// The calls a backend has started and not yet completed: the plumbing the
// Redis, PostgreSQL and ZooKeeper backends share. Each call completes exactly
// once: by its answer, or by a preset outcome (known before any I/O, or its
// connection is gone; delivered on a later loop turn, never inside the call
// that started it). No call times out here: the caller owns the timeout and
// abandons the call (backend.h, ADR 0039), and the backend's `abandoned` hook
// ends it on a later loop turn. A completed call is never found again, so an
// answer that comes later finds nothing and is dropped (a late reply is never
// adopted).
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
  int64_t timeout_ms = 0;  // the caller's budget, for what a transport needs one for
  bool abandoned = false;  // the caller gave up: its timer runs the `abandoned` hook
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
    // The caller abandoned the call and nothing is preset: the backend ends
    // it (with an answer its transport already holds, else kError) and drops
    // what the call may have left stuck.
    std::function<void(Call*)> abandoned;
    // A preset outcome is due: the backend completes the call with it.
    std::function<void(Call*, Outcome, const std::string&)> preset_due;
  };

  // Each call's timer counts in the backend's `open_handles` until it closed.
  CallTable(uv_loop_t* loop, OpenHandles* open_handles, Hooks hooks)
      : loop_(loop), open_handles_(open_handles), hooks_(std::move(hooks)) {}
  CallTable(const CallTable&) = delete;
  CallTable& operator=(const CallTable&) = delete;

  // A new call with the budget `timeout` (at least 1 ms); no timer runs.
  Call* start(Duration timeout) {
    auto* c = new Call;
    c->id = ++next_id_;
    c->table = this;
    c->timeout_ms = std::max<int64_t>(1, to_ms_ceil(timeout));
    uv_timer_init(loop_, &c->timer);
    c->timer.data = c;
    open_handles_->opened();
    calls_[c->id] = c;
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

  // The caller gave up on `c`: the `abandoned` hook runs on a later loop turn
  // (`after_ms` from now), unless a preset outcome completes it first.
  void abandon(Call* c, int64_t after_ms = 0) {
    if (c->preset || c->finished) return;
    c->abandoned = true;
    uv_timer_start(&c->timer, on_timer, static_cast<uint64_t>(std::max<int64_t>(0, after_ms)), 0);
  }
  // Backend::abandon: the call `id`, unless it completed.
  void abandon(uint64_t id) {
    if (Call* c = find(id)) abandon(c);
  }

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
    } else if (c->abandoned) {
      table->hooks_.abandoned(c);
    }
  }

  uv_loop_t* loop_;
  OpenHandles* open_handles_;
  Hooks hooks_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Call*> calls_;
};

// A call of `kind` answered through its member `slot` (set to `cb`) that
// completes on a later loop turn with kError and `error`: for a call the
// backend cannot make (ADR 0046 step 1: permits).
template <typename Call, typename Kind, typename Cb>
uint64_t fail_call_later(CallTable<Call>& calls, Kind kind, Duration timeout, Cb Call::*slot, Cb cb,
                         const char* error) {
  Call* c = calls.start(timeout);
  c->kind = kind;
  c->*slot = std::move(cb);
  calls.preset(c, Outcome::kError, error);
  return c->id;
}

}  // namespace simba

#endif  // SIMBA_BACKEND_CALL_TABLE_H
