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
	"unsafe"
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

// Election contends for one name on behalf of a Listener, until Stop or
// Close (or the client's Close, which also frees it). Stop, StepDown and
// Close are those of every handle that contends (stopper, stop.go): after
// Stop returned nil, or Close returned, the Listener receives nothing more.
// From a callback of this election, Stop and StepDown with a context you
// wait on would wait for that callback: use a context you do not wait on.
type Election struct {
	stopper
	name  string
	state *listenerState
}

// Elect starts contending for name with l. It fails with ErrState if name is
// already started (or locked) on this client. Close the Election when done.
func (c *Client) Elect(name string, l Listener) (*Election, error) {
	st := &listenerState{name: name, l: l, report: c.report}
	el := &Election{name: name, state: st}
	if err := el.start(c, "Elect", "election", C.S_ELECTION, cgo.NewHandle(st), st.end,
		func(h *C.simba_client_t, ud C.uintptr_t, out *unsafe.Pointer, m **C.char) C.int {
			return C.s_election_start((**C.simba_election_t)(unsafe.Pointer(out)), h, name, ud, m)
		}); err != nil {
		return nil, err
	}
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
