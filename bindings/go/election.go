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
)

// Listener receives an election's terms. Callbacks of one election run one at
// a time, in order, on a library thread; every OnElected is followed by
// exactly one OnRevoked with the same *Term. Either may be nil. A callback
// must not block for long; it may call the non-blocking methods (Term
// accessors, StepDown and Stop with a context it does not wait on, Close).
// A panic in a callback is recovered and passed to Config.OnError.
type Listener struct {
	OnElected func(t *Term)
	OnRevoked func(t *Term, reason RevokeReason)
}

type listenerState struct {
	name   string
	l      Listener
	report func(error)

	mu      sync.Mutex
	current *Term         // elected, not yet revoked (callbacks are serial)
	changed chan struct{} // closed (and replaced) when current changes
	ended   bool          // stopped or closed: no term comes any more
}

// notify wakes the Await calls; s.mu is held.
func (s *listenerState) notify() {
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

func (s *listenerState) elected(t *C.simba_term_t) {
	w := borrowedTerm(t)
	s.mu.Lock()
	s.current = w
	s.notify()
	s.mu.Unlock()
	if s.l.OnElected != nil {
		defer guard(s.report, "OnElected of "+s.name)
		s.l.OnElected(w)
	}
}

func (s *listenerState) revoked(t *C.simba_term_t, r RevokeReason) {
	s.mu.Lock()
	w := s.current
	s.current = nil
	s.notify()
	s.mu.Unlock()
	if w == nil || w.token != uint64(C.simba_term_token(t)) {
		w = borrowedTerm(t)
	}
	defer w.Release()
	if s.l.OnRevoked != nil {
		defer guard(s.report, "OnRevoked of "+s.name)
		s.l.OnRevoked(w, r)
	}
}

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

// Election contends for one name on behalf of a Listener, until Stop or
// Close (or the client's Close, which also frees it).
type Election struct {
	client   *Client
	name     string
	e        *C.simba_election_t
	state    *listenerState
	listener cgo.Handle

	mu    sync.Mutex
	stop  *doneWaiter // the stop, once asked for
	freed bool
}

// Elect starts contending for name with l. It fails with ErrState if name is
// already started (or locked) on this client. Close the Election when done.
func (c *Client) Elect(name string, l Listener) (*Election, error) {
	st := &listenerState{name: name, l: l, report: c.report}
	lh := cgo.NewHandle(st)
	n, fn := cstr(name)
	defer fn()
	var out *C.simba_election_t
	if err := c.with("Elect", func(h *C.simba_client_t) error {
		return call("Elect", func(m **C.char) C.int {
			return C.s_election_start(&out, h, n, C.uintptr_t(lh), m)
		})
	}); err != nil {
		lh.Delete()
		return nil, err
	}
	el := &Election{client: c, name: name, e: out, state: st, listener: lh}
	c.own(el)
	return el, nil
}

// Name is the election's lease name.
func (e *Election) Name() string { return e.name }

// Term is the current term (between OnElected and OnRevoked), or nil.
func (e *Election) Term() *Term {
	e.state.mu.Lock()
	defer e.state.mu.Unlock()
	return e.state.current
}

// Leader reports whether this process holds a valid term of the election.
func (e *Election) Leader() bool {
	t := e.Term()
	return t != nil && t.Valid()
}

// Await waits until this process leads the election and returns its term
// (the one OnElected received), or fails when ctx is done (ErrCanceled /
// ErrTimeout), or with ErrState once the election is stopped or closed. The
// term may be revoked at any time after: watch t.Done(), check
// t.EnsureValid before each step. Not from a callback of this election
// (OnElected would wait for the callback to return): ErrWouldBlock there is
// not detected, it waits until ctx is done.
func (e *Election) Await(ctx context.Context) (*Term, error) {
	for {
		s := e.state
		s.mu.Lock()
		t, ended := s.current, s.ended
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if t != nil && t.Valid() {
			return t, nil
		}
		if ended {
			return nil, &Error{Code: CodeState, Op: "Await", Message: "the election is stopped"}
		}
		if ctx.Err() != nil {
			return nil, ctxError("Await", ctx)
		}
		if t != nil { // elected but no longer valid: its OnRevoked comes soon
			select {
			case <-ch:
			case <-ctx.Done():
			case <-t.Done():
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (s *listenerState) end() {
	s.mu.Lock()
	s.ended = true
	s.notify()
	s.mu.Unlock()
}

// Stop revokes the term (STOPPED), releases the lease with its token, and
// returns once the last OnRevoked ran; or when ctx is done (the stop goes
// on). After it returned nil, the Listener receives nothing more. Stopping a
// stopped election returns nil.
func (e *Election) Stop(ctx context.Context) error {
	e.mu.Lock()
	if e.freed {
		e.mu.Unlock()
		return nil
	}
	w := e.stop
	if w == nil {
		w = newDoneWaiter()
		e.stop = w
		// ErrState: already stopped (by the client's Close): w is finished.
		if err := w.start("Stop", CodeState, func(h C.uintptr_t, m **C.char) C.int {
			return C.s_election_stop(e.e, h, m)
		}); err != nil {
			e.mu.Unlock()
			return err
		}
	}
	e.mu.Unlock()
	e.state.end() // no term comes after a stop: Await returns ErrState
	return w.wait(ctx, "Stop")
}

// StepDown revokes the term (STEPPED_DOWN), releases it, and does not contend
// for cooldown counted from now; the election stays started. It returns once
// the last OnRevoked of the step-down ran, or when ctx is done.
func (e *Election) StepDown(ctx context.Context, cooldown time.Duration) error {
	e.mu.Lock()
	if e.freed {
		e.mu.Unlock()
		return &Error{Code: CodeState, Op: "StepDown", Message: "the election is closed"}
	}
	w := newDoneWaiter()
	err := w.start("StepDown", 0, func(h C.uintptr_t, m **C.char) C.int {
		return C.s_election_step_down(e.e, ms(cooldown.Milliseconds()), h, m)
	})
	e.mu.Unlock()
	if err != nil {
		return err
	}
	return w.wait(ctx, "StepDown")
}

// Close stops the election if needed, waits until the stop completed and no
// callback of it runs, and frees it: after it returns, the Listener is never
// called again. Called from one of the election's own callbacks it starts the
// stop and returns at once (the running callback finishes, none starts
// afterwards). Idempotent; always returns nil.
func (e *Election) Close() error {
	e.mu.Lock()
	if e.freed {
		e.mu.Unlock()
		return nil
	}
	e.freed = true
	w := e.stop
	e.mu.Unlock()
	e.state.end()
	C.simba_election_free(e.e)
	e.client.disown(e)
	e.listener.Delete()
	if w != nil {
		w.finish(0) // its done ran, or never will
	}
	return nil
}
