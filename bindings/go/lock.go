package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"errors"
	"time"
	"unsafe"
)

// ask says what an acquire asks for: a lock, or a permit (1.5) of kind
// TermSemaphore (arg: the size), TermRead or TermWrite. A value, so that the
// lock cycle allocates nothing for it.
type ask struct {
	kind TermKind
	arg  uint32
}

var lockAsk = ask{kind: TermLock}

// acquire makes one blocking simba_lock_acquire of at most wait (try: one
// simba_lock_try_acquire), or the permit call a asks for. The name goes to C
// as a Go string, checked there (simba_lease_name_check refuses a NUL byte)
// and copied to the C stack, and the token comes back with the term: one cgo
// call and no C allocation. The handle goes as an integer: cgo would box a C
// pointer argument (an allocation) to check that it is not a Go pointer.
func (c *Client) acquire(op string, name string, a ask, wait time.Duration, try bool) (*Term, error) {
	c.mu.RLock()
	if c.c == nil {
		c.mu.RUnlock()
		return nil, closedError(op)
	}
	h := C.uintptr_t(uintptr(unsafe.Pointer(c.c)))
	var r C.s_acquired
	switch {
	case a.kind != TermLock:
		var sem, t C.int
		if a.kind == TermSemaphore {
			sem = 1
		}
		if try {
			t = 1
		}
		r = C.s_permit_acquire(h, sem, name, C.uint32_t(a.arg), ms(wait.Milliseconds()), t)
	case try:
		r = C.s_lock_try_acquire(h, name)
	default:
		r = C.s_lock_acquire(h, name, ms(wait.Milliseconds()))
	}
	c.mu.RUnlock()
	if r.rc < 0 {
		return nil, errorFrom(op, int(r.rc), r.msg)
	}
	t := newTerm(r.term, true, name, uint64(r.token))
	t.kind = a.kind
	return t, nil
}

// lockLoop acquires in slices until it succeeds, the deadline passes, or
// abandoned() says the caller gave up.
func (c *Client) lockLoop(op, name string, a ask, deadline time.Time, abandoned func() bool) (*Term, error) {
	for {
		wait := slice
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, &Error{Code: CodeTimeout, Op: op, Message: context.DeadlineExceeded.Error(),
					Err: context.DeadlineExceeded}
			}
			if left < wait {
				wait = left
			}
		}
		t, err := c.acquire(op, name, a, wait, false)
		if err == nil || !errors.Is(err, ErrTimeout) || abandoned() {
			return t, err
		}
	}
}

// waitTerm runs get on a goroutine and waits for it or for ctx. gone is
// closed when the caller gave up; a term that arrives after that is unlocked.
func waitTerm(ctx context.Context, op string, get func(gone <-chan struct{}) (*Term, error)) (*Term, error) {
	type result struct {
		t   *Term
		err error
	}
	ch := make(chan result, 1)
	gone := make(chan struct{})
	go func() {
		t, err := get(gone)
		ch <- result{t, err}
	}()
	select {
	case r := <-ch:
		return r.t, r.err
	case <-ctx.Done():
		close(gone)
		go func() {
			if r := <-ch; r.t != nil {
				_ = r.t.Unlock()
				r.t.Release()
			}
		}()
		return nil, ctxError(op, ctx)
	}
}

// lockWaiter is one Lock call in its name's queue; turn is closed when it
// is at the head. A call that finds its queue empty is the head at once and
// stays first until it leaves: it is firstWaiter (one per queue at most), so
// the uncontended lock cycle allocates no waiter and no channel.
type lockWaiter struct{ turn chan struct{} }

var firstWaiter = &lockWaiter{turn: make(chan struct{})}

func init() { close(firstWaiter.turn) }

// lockQueue keeps the Lock calls of this client on one name in arrival
// order. Only its head is inside simba_lock_acquire (which the binding calls
// in slices, so that a cancel or a Close is seen soon): without the queue, a
// waiter whose slice ended would enter the library's queue again behind the
// waiters that came after it, and the library's first come, first served
// order would be lost.
//
// The last queue to empty stays in the map (c.idle, at most one), so that a
// name locked again and again is neither deleted nor inserted per cycle; the
// next name that needs a queue takes its place.
type lockQueue struct{ waiters []*lockWaiter }

// enqueue puts a Lock call of name in its queue, which it returns for leave.
func (c *Client) enqueue(name string) (*lockQueue, *lockWaiter) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.queues == nil {
		c.queues = map[string]*lockQueue{}
	}
	var q *lockQueue
	if c.idle != nil && c.idleName == name {
		q = c.idle // the name of the last cycle: no map lookup
	} else {
		q = c.queues[name]
	}
	if q == nil {
		q = c.idle
		if q != nil {
			delete(c.queues, c.idleName)
		} else {
			q = &lockQueue{waiters: make([]*lockWaiter, 0, 4)}
		}
		c.queues[name] = q
	}
	if q == c.idle {
		c.idle, c.idleName = nil, ""
	}
	w := firstWaiter
	if len(q.waiters) > 0 {
		w = &lockWaiter{turn: make(chan struct{})}
	}
	q.waiters = append(q.waiters, w)
	return q, w
}

func (c *Client) leave(name string, q *lockQueue, w *lockWaiter) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for i, x := range q.waiters {
		if x == w {
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[len(q.waiters)-1] = nil
			q.waiters = q.waiters[:len(q.waiters)-1]
			if i == 0 && len(q.waiters) > 0 {
				close(q.waiters[0].turn)
			}
			break
		}
	}
	if len(q.waiters) == 0 {
		if c.idle != nil {
			delete(c.queues, c.idleName)
		}
		c.idle, c.idleName = q, name
	}
}

// firstSlice bounds the first attempt of a cancellable Lock, made on the
// caller's goroutine: the longest a cancel can wait.
const firstSlice = 2 * time.Millisecond

// Lock acquires the lock name, waiting until it is free, ctx is done, or the
// client closes. Locks of one client on one name queue behind each other,
// first come, first served; a cancelled one leaves the queue at once (at most
// 2 ms after the cancel: the first attempt is made on the caller's goroutine).
// The returned Term is owned by the caller: Unlock it when done (a lost Term
// releases its lock when garbage collected). A name used by an election of
// this client fails with ErrState.
func (c *Client) Lock(ctx context.Context, name string) (*Term, error) {
	if ctx.Err() != nil {
		return nil, ctxError("Lock", ctx)
	}
	deadline, _ := ctx.Deadline()
	q, w := c.enqueue(name) // here, so that the order is that of the calls
	if ctx.Done() == nil {  // cannot be cancelled: wait on this goroutine
		defer c.leave(name, q, w)
		if w != firstWaiter { // firstWaiter's turn is closed already
			<-w.turn
		}
		return c.lockLoop("Lock", name, lockAsk, deadline, func() bool { return false })
	}
	if w == firstWaiter {
		// A first attempt on this goroutine, bounded by firstSlice: an
		// uncontended Lock then costs no goroutine hop. A cancel during it is
		// seen when it ends.
		wait := firstSlice
		if !deadline.IsZero() && time.Until(deadline) < wait {
			wait = time.Until(deadline)
		}
		if wait > 0 {
			t, err := c.acquire("Lock", name, lockAsk, wait, false)
			if err == nil || !errors.Is(err, ErrTimeout) || ctx.Err() != nil {
				c.leave(name, q, w)
				if err != nil && ctx.Err() != nil {
					err = ctxError("Lock", ctx)
				}
				return t, err
			}
		}
	}
	return waitTerm(ctx, "Lock", func(gone <-chan struct{}) (*Term, error) {
		defer c.leave(name, q, w)
		select {
		case <-w.turn:
		case <-gone:
			return nil, nil
		}
		return c.lockLoop("Lock", name, lockAsk, deadline, abandonedWhen(gone))
	})
}

// TryLock makes one attempt: the Term if nobody held the lock, or an error
// for which errors.Is(err, ErrBusy). It waits at most one renew period (for
// the session to be live and for the backend's answer), or until ctx is done.
func (c *Client) TryLock(ctx context.Context, name string) (*Term, error) {
	return c.tryAcquire(ctx, "TryLock", name, lockAsk)
}

// tryAcquire makes the one attempt of a try call, bounded by ctx too.
func (c *Client) tryAcquire(ctx context.Context, op, name string, a ask) (*Term, error) {
	if ctx.Err() != nil {
		return nil, ctxError(op, ctx)
	}
	get := func(<-chan struct{}) (*Term, error) { return c.acquire(op, name, a, 0, true) }
	if ctx.Done() == nil {
		return get(nil)
	}
	return waitTerm(ctx, op, get)
}

// abandonedWhen is lockLoop's abandoned for a waitTerm whose caller gives up
// by closing gone.
func abandonedWhen(gone <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-gone:
			return true
		default:
			return false
		}
	}
}

// Unlock releases a lock term (see Term.Unlock).
func (c *Client) Unlock(t *Term) error {
	if t == nil {
		return &Error{Code: CodeInvalid, Op: "Unlock", Message: "nil term"}
	}
	return t.Unlock()
}

// WithLock runs fn while holding the lock name and unlocks it afterwards.
// fn's context is cancelled when the term is revoked (session lost, client
// closed): check term.EnsureValid before each step and pass term.Token()
// with each write.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context, t *Term) error) error {
	t, err := c.Lock(ctx, name)
	if err != nil {
		return err
	}
	defer t.Release()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	ferr := fn(wctx, t)
	if uerr := t.Unlock(); ferr == nil {
		ferr = uerr
	}
	return ferr
}
