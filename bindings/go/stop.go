package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// doneWaiter is one simba_done_fn completion, seen as a channel.
type doneWaiter struct {
	h       cgo.Handle
	once    sync.Once
	delOnce sync.Once
	ch      chan struct{}
	err     error
}

func newDoneWaiter() *doneWaiter {
	w := &doneWaiter{ch: make(chan struct{})}
	w.h = cgo.NewHandle(w)
	return w
}

func (w *doneWaiter) release() { w.delOnce.Do(w.h.Delete) }

func (w *doneWaiter) finish(code int) {
	w.release()
	w.once.Do(func() {
		if code < 0 {
			w.err = &Error{Code: Code(code), Op: "done"}
		}
		close(w.ch)
	})
}

// start issues the call that will complete w; if it fails, its done will not
// run and w is finished here with that error.
// An error with code ok finishes w without an error (and returns nil).
func (w *doneWaiter) start(op string, ok Code, f func(h C.uintptr_t, m **C.char) C.int) error {
	err := call(op, func(m **C.char) C.int { return f(C.uintptr_t(w.h), m) })
	if err != nil {
		if err.(*Error).Code == ok {
			err = nil
		}
		w.release()
		w.once.Do(func() { w.err = err; close(w.ch) })
	}
	return err
}

func (w *doneWaiter) wait(ctx context.Context, op string) error {
	select {
	case <-w.ch:
		return w.err
	case <-ctx.Done():
		e := ctxError(op, ctx).(*Error)
		e.Message += " (the operation goes on)"
		return e
	}
}

// stopper is the one path by which an Election and a Task stop, step down
// and are freed (simba_election_* and simba_task_* behave alike: s_stop,
// s_step_down and s_free pick the function by kind).
type stopper struct {
	client *Client
	kind   C.int          // S_ELECTION or S_TASK
	p      unsafe.Pointer // the library's handle
	what   string         // "election" or "task", for messages
	onStop func()         // runs when a stop is asked for (an election's Await ends)
	onFree func()         // runs after the handle is freed: the callback state may go

	mu    sync.Mutex
	stopW *doneWaiter   // the stop, once asked for
	freed bool          // Close ran
	ended chan struct{} // closed by Close (its own or the client's)
}

// start makes the library's handle with startC, passing it state (the
// callback state's handle, deleted when the handle is freed, or now if the
// start fails). The client owns the handle from then on: taken under its
// read lock, so its Close frees it too.
func (s *stopper) start(c *Client, op, what string, kind C.int, state cgo.Handle, onStop func(),
	startC func(h *C.simba_client_t, ud C.uintptr_t, out *unsafe.Pointer, m **C.char) C.int) error {
	err := c.with(op, func(h *C.simba_client_t) error {
		var out unsafe.Pointer
		if err := call(op, func(m **C.char) C.int { return startC(h, C.uintptr_t(state), &out, m) }); err != nil {
			return err
		}
		s.client, s.kind, s.p, s.what, s.onStop, s.onFree = c, kind, out, what, onStop, state.Delete
		s.ended = make(chan struct{})
		c.own(s)
		return nil
	})
	if err != nil {
		state.Delete()
	}
	return err
}

// Stop revokes the term (STOPPED), releases the lease with its token (for a
// task, in handover order: after its work returned), and returns once that
// completed and the last callback of the stop ran; or when ctx is done (the
// stop goes on). Stopping again waits for the same stop; stopping a closed
// one returns nil. The handle stays to be closed.
func (s *stopper) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return nil
	}
	w := s.stopW
	if w == nil {
		w = newDoneWaiter()
		s.stopW = w
		// ErrState: already stopped (by the client's Close): w is finished.
		if err := w.start("Stop", CodeState, func(h C.uintptr_t, m **C.char) C.int {
			return C.s_stop(s.kind, s.p, h, m)
		}); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.mu.Unlock()
	if s.onStop != nil {
		s.onStop()
	}
	return w.wait(ctx, "Stop")
}

// StepDown revokes the term (STEPPED_DOWN), releases it (a task: after its
// work returned) and does not contend for cooldown counted from now (a group
// member leaves the group for cooldown); it stays started. It returns once
// the step-down completed, or when ctx is done (it goes on).
func (s *stopper) StepDown(ctx context.Context, cooldown time.Duration) error {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return &Error{Code: CodeState, Op: "StepDown", Message: "the " + s.what + " is closed"}
	}
	w := newDoneWaiter()
	err := w.start("StepDown", 0, func(h C.uintptr_t, m **C.char) C.int {
		return C.s_step_down(s.kind, s.p, ms(cooldown.Milliseconds()), h, m)
	})
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return w.wait(ctx, "StepDown")
}

// Close stops it if needed, waits until the stop completed, every callback
// (and every run of a task's work) returned, and frees it: after it returns
// nothing of it is called again. Called from its own callback or work it
// starts the stop and returns at once. Idempotent; always returns nil.
func (s *stopper) Close() error {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return nil
	}
	s.freed = true
	w := s.stopW
	s.mu.Unlock()
	if s.onStop != nil {
		s.onStop()
	}
	C.s_free(s.kind, s.p)
	s.onFree()
	s.client.disown(s)
	if w != nil {
		w.finish(0) // its done ran, or never will
	}
	close(s.ended)
	return nil
}
