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
	then    func(error) // runs once, before ch is closed (closeAsync's done)
}

func newDoneWaiter() *doneWaiter {
	w := &doneWaiter{ch: make(chan struct{})}
	w.h = cgo.NewHandle(w)
	return w
}

func (w *doneWaiter) release() { w.delOnce.Do(w.h.Delete) }

func (w *doneWaiter) finish(code int) {
	var err error
	if code < 0 {
		err = &Error{Code: Code(code), Op: "done"}
	}
	w.finishWith(err)
}

func (w *doneWaiter) finishWith(err error) {
	w.release()
	w.once.Do(func() {
		w.err = err
		if w.then != nil {
			w.then(err)
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
		w.finishWith(err)
	}
	return err
}

// closeAsync is every handle's X_close_async (SIMBA_1.4): then runs once,
// inside the close's done (the handle's last callback, on a library thread),
// or here with the error when the close could not start.
func closeAsync(op string, kind C.int, p unsafe.Pointer, then func(error)) error {
	w := newDoneWaiter()
	w.then = then
	return w.start(op, 0, func(h C.uintptr_t, m **C.char) C.int { return C.s_close_async(kind, p, h, m) })
}

// userDone calls a caller's done (nil: none), recovering a panic into report.
func userDone(done func(error), err error, report func(error), what string) {
	if done == nil {
		return
	}
	defer guard(report, "CloseAsync done of "+what)
	done(err)
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

// take marks it closed for the one close (Close or CloseAsync) that gets ok,
// returning the stop under way if any; ok is false for every later one.
func (s *stopper) take() (w *doneWaiter, ok bool) {
	s.mu.Lock()
	if s.freed {
		s.mu.Unlock()
		return nil, false
	}
	s.freed = true
	w = s.stopW
	s.mu.Unlock()
	if s.onStop != nil {
		s.onStop()
	}
	return w, true
}

// CloseAsync closes it without waiting, from anywhere: its own callbacks and
// leader work included (simba_election_close_async, simba_task_close_async).
// It stops it if no stop was asked for; no callback of it starts after the
// call returns (one running on another thread finishes first); then done
// (may be nil) runs exactly once on a library thread, as its last callback:
// after the stop completed (the name released), the dones of an earlier Stop
// or StepDown, and every run of a task's work returned. Nothing of it is
// called after done. On a handle already closed (Close, CloseAsync, the
// client's Close) done runs once that close completed. Always returns nil
// unless the library could not start the close (then done runs with that
// error too). Needs libsimba >= 1.4.
func (s *stopper) CloseAsync(done func(error)) error {
	w, ok := s.take()
	if !ok {
		go func() {
			<-s.ended
			userDone(done, nil, s.client.report, s.what)
		}()
		return nil
	}
	return closeAsync("CloseAsync", s.kind, s.p, func(err error) {
		s.onFree()
		s.client.disown(s)
		if w != nil {
			w.finish(0) // its done ran before this one
		}
		userDone(done, err, s.client.report, s.what)
		close(s.ended) // after done: a second CloseAsync's done follows it
	})
}

// Close stops it if needed, waits until the stop completed, every callback
// (and every run of a task's work) returned, and frees it: after it returns
// nothing of it is called again. Called from its own callback or work it
// starts the stop and returns at once. Idempotent; always returns nil.
// After CloseAsync it returns at once (CloseAsync's done says when it ended).
func (s *stopper) Close() error {
	w, ok := s.take()
	if !ok {
		return nil
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
