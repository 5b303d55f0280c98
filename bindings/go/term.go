package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// RevokeReason says why a term ended.
type RevokeReason int

const (
	NotRevoked     RevokeReason = 0 // not revoked (yet)
	Stopped        RevokeReason = 1 // election stopped, lock released, or client closed
	SteppedDown    RevokeReason = 2 // the election stepped down
	DeadlinePassed RevokeReason = 3 // the session's local deadline passed
	SessionExpired RevokeReason = 4 // the backend reported the session expired
	TakenOver      RevokeReason = 5 // a keep-alive no longer lists the lease as ours
)

// String is the reason's name from the library (simba_revoke_reason_name):
// "STOPPED", "TAKEN_OVER", ...; one this library does not know prints as
// "UNKNOWN(9)".
func (r RevokeReason) String() string {
	return libName(C.GoString(C.simba_revoke_reason_name(C.simba_revoke_reason_t(r))), int(r))
}

// Term is one period during which this process owns a lease: a name, a
// fencing token, and a validity computed from the local monotonic clock.
// Pass Token() with every write to the protected resource.
//
// Accessors never block and never wait for the library's loop. A Term holds a
// reference to the library's term until Release (a lock term: Unlock); a
// forgotten one is released by a finalizer, and a forgotten lock term then
// releases its lock (with its token).
type Term struct {
	name  string
	token uint64
	lock  bool
	kind  TermKind

	mu    sync.RWMutex
	t     *C.simba_term_t // nil once released (or unlocked)
	g     *termGuard      // holds t too while t is not nil
	final RevokeReason    // the reason read when the reference was dropped

	doneOnce  sync.Once // registers the on_revoked that closes done
	chOnce    sync.Once // makes done, on first use: most lock terms never need it
	closeOnce sync.Once
	done      chan struct{}
}

func (t *Term) doneChan() chan struct{} {
	t.chOnce.Do(func() { t.done = make(chan struct{}) })
	return t.done
}

func (t *Term) markDone() { t.closeOnce.Do(func() { close(t.doneChan()) }) }

// watchRevoked closes Done (and calls then) the moment the term is revoked or
// its deadline passed, from a goroutine blocked in simba_term_wait_revoked
// (in slices, until stop is closed), holding its own reference. Leader work
// needs this: a work term's on_revoked callbacks run only after the work
// returned (handover order), too late to cancel the work's context.
func (t *Term) watchRevoked(p *C.simba_term_t, stop <-chan struct{}, then func()) {
	C.simba_term_retain(p)
	go func() {
		defer C.simba_term_release(p)
		for {
			if C.simba_term_wait_revoked(p, 250) == C.SIMBA_OK {
				t.markDone()
				then()
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
}

// termGuard releases the library's term of a Term that was dropped without
// Release or Unlock: only that Term points to it, so both become unreachable
// together and the guard's finalizer drops p (a lock term's: releasing the
// lock). A released Term gives its guard back to guards, disarmed (p nil),
// with its finalizer still set: the lock cycle then calls SetFinalizer
// neither to arm nor to clear one (about 0.04 x the C cycle on memory://).
// A guard that sync.Pool lets go is finalized with p nil: nothing to do.
type termGuard struct{ p *C.simba_term_t }

var guards = sync.Pool{New: func() any {
	g := &termGuard{}
	runtime.SetFinalizer(g, (*termGuard).finalize)
	return g
}}

func (g *termGuard) finalize() {
	if g.p != nil {
		C.simba_term_release(g.p)
	}
}

// newTerm wraps a term the caller owns one reference of; name and token are
// the term's (a lock's are known without asking the library again).
func newTerm(t *C.simba_term_t, lock bool, name string, token uint64) *Term {
	g := guards.Get().(*termGuard)
	g.p = t
	kind := TermElection
	if lock {
		kind = TermLock
	}
	return &Term{t: t, g: g, lock: lock, kind: kind, name: name, token: token}
}

// disarm gives the guard back once t.t was taken out (t.mu held).
func (t *Term) disarm() {
	t.g.p = nil
	guards.Put(t.g)
	t.g = nil
}

// borrowedTerm wraps a term passed to a callback, taking its own reference.
func borrowedTerm(t *C.simba_term_t) *Term {
	C.simba_term_retain(t)
	r := newTerm(t, false, C.GoString(C.simba_term_name(t)), uint64(C.simba_term_token(t)))
	r.kind = TermKind(C.simba_term_kind(t))
	return r
}

// Kind says what the term is a term of: TermElection (an election's or a
// task's), TermLock, TermSemaphore, TermRead or TermWrite (libsimba 1.5).
func (t *Term) Kind() TermKind { return t.kind }

// Name is the lease name (for a partition group, "GROUP.K").
func (t *Term) Name() string { return t.name }

// Token is the fencing token, fixed within the term: > 0 and strictly
// increasing across terms of the name (a semaphore's across all its permits).
// A read lock's is the name's write epoch when it was granted, the token of
// the last writer (0 before any), shared by readers (docs/fencing.md).
func (t *Term) Token() uint64 { return t.token }

func (t *Term) String() string {
	return fmt.Sprintf("Term(%s, token %d, %s)", t.name, t.token, t.Reason())
}

// Valid reports whether the term is not revoked and the session's local
// deadline has not passed. Once false, never true again.
func (t *Term) Valid() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.t != nil && C.simba_term_is_valid(t.t) == 1
}

// Remaining is the time left before the local deadline; 0 once the term ended.
func (t *Term) Remaining() time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.t == nil {
		return 0
	}
	return time.Duration(C.simba_term_remaining_ms(t.t)) * time.Millisecond
}

// EnsureValid returns nil only if the term stays valid for more than min;
// otherwise an error for which errors.Is(err, ErrTermExpired). Call it before
// each step of work that should not start when the term is about to end.
func (t *Term) EnsureValid(min time.Duration) error {
	if min < 0 {
		return &Error{Code: CodeInvalid, Op: "EnsureValid", Message: "negative duration"}
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.t == nil {
		return &Error{Code: CodeExpired, Op: "EnsureValid", Message: "the term was released"}
	}
	// Whole milliseconds, rounded up: "valid for more than min" never
	// passes for a term that has less than min left.
	msMin := (min + time.Millisecond - 1) / time.Millisecond
	return call("EnsureValid", func(m **C.char) C.int {
		return C.s_term_ensure_valid(t.t, ms(int64(msMin)), m)
	})
}

// Reason is why the term ended; NotRevoked until then. A term whose deadline
// passed reads NotRevoked until the engine revokes it, which it does at once.
func (t *Term) Reason() RevokeReason {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.t == nil {
		return t.final
	}
	return RevokeReason(C.simba_term_revoke_reason(t.t))
}

// Done returns a channel that is closed when the term is revoked (for any
// reason); then Reason says why.
func (t *Term) Done() <-chan struct{} {
	ch := t.doneChan()
	t.doneOnce.Do(func() {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if t.t == nil {
			t.markDone()
			return
		}
		h := cgo.NewHandle(func(RevokeReason) { t.markDone() })
		if err := call("Done", func(m **C.char) C.int {
			return C.s_term_on_revoked(t.t, C.uintptr_t(h), m)
		}); err != nil {
			// Revoked already and its client closed: nothing will call it.
			h.Delete()
			t.markDone()
		}
	})
	return ch
}

// drop takes the reference out of t, recording the final reason.
func (t *Term) drop() *C.simba_term_t {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.t
	if p != nil {
		t.final = RevokeReason(C.simba_term_revoke_reason(p))
		t.t = nil
		t.disarm()
	}
	return p
}

// Release drops this Term's reference to the library's term. Releasing a
// lock term that was not unlocked releases the lock, without waiting.
// Idempotent. Accessors keep answering: Valid false, Remaining 0.
func (t *Term) Release() {
	if p := t.drop(); p != nil {
		C.simba_term_release(p)
	}
}

// CloseAsync drops this Term's reference without waiting, from anywhere
// (simba_term_close_async): a lock term not yet unlocked is released as
// Unlock does (revoked with STOPPED, the lease released with its token), and
// done (may be nil) runs once the backend answered and every on_revoked of
// the term ran (Done is closed by then); for an election's term, or one
// released already, done runs after the callbacks already queued for it.
// done runs exactly once, on a library thread; on a Term already released
// (Release, Unlock, CloseAsync) it runs at once on a goroutine. The accessors
// keep answering (Valid false). Needs libsimba >= 1.4.
func (t *Term) CloseAsync(done func(error)) error {
	p := t.drop()
	if p == nil {
		go userDone(done, nil, nil, "term")
		return nil
	}
	if t.lock {
		t.mu.Lock()
		if t.final == NotRevoked {
			t.final = Stopped // what the release leaves
		}
		t.mu.Unlock()
	}
	return closeAsync("CloseAsync", C.S_TERM, unsafe.Pointer(p), func(err error) {
		userDone(done, err, nil, "term")
	})
}

// Unlock releases a lock term: revoke it (STOPPED), release the lease with
// its token, and wait for the backend's answer (at most one renew period), so
// the lease is free on return. Done is closed by then. Unlocking twice is a
// no-op; the accessors keep answering (Valid false, Reason why it ended).
func (t *Term) Unlock() error {
	if !t.lock {
		return &Error{Code: CodeInvalid, Op: "Unlock", Message: "not a lock term"}
	}
	t.mu.Lock()
	p := t.t
	if p == nil {
		t.mu.Unlock()
		return nil
	}
	// The release drops the library's term: no reference is kept (keeping
	// one would make its last drop, later on another thread, wake the loop).
	// Until it returns, Reason reads what the release will leave: the reason
	// of a term revoked before, else STOPPED. (A revocation racing this read
	// is corrected from the release's answer below.)
	ip := C.uintptr_t(uintptr(unsafe.Pointer(p))) // as in acquire: no boxing
	t.final = RevokeReason(C.s_term_reason(ip))
	if t.final == NotRevoked {
		t.final = Stopped
	}
	t.t = nil
	t.disarm()
	t.mu.Unlock()
	// Outside t.mu: the release waits for the term's on_revoked callbacks.
	r := C.s_lock_release(ip)
	if r.yield != 0 {
		runtime.Gosched() // every 2 ms at most (simba_go.h says why)
	}
	if r.reason != C.SIMBA_REVOKE_NONE {
		t.mu.Lock()
		t.final = RevokeReason(r.reason)
		t.mu.Unlock()
	}
	return errorFrom("Unlock", int(r.rc), r.msg)
}
