package simba

/*
#include "simba_go.h"
*/
import "C"

import "context"

// TermKind says what a term is a term of (simba_term_kind, libsimba 1.5).
type TermKind int

const (
	TermElection  TermKind = 0 // an election's or a task's term
	TermLock      TermKind = 1 // a lock's term
	TermSemaphore TermKind = 2 // a permit of a semaphore
	TermRead      TermKind = 3 // a read lock of a read/write lock
	TermWrite     TermKind = 4 // a write lock of a read/write lock
)

// String is the kind's name from the library (simba_term_kind_name):
// "ELECTION", "LOCK", "SEMAPHORE", "READ", "WRITE"; one this library does not
// know prints as "UNKNOWN(9)".
func (k TermKind) String() string {
	return libName(C.GoString(C.simba_term_kind_name(C.simba_term_kind_t(k))), int(k))
}

// AcquireSemaphore acquires a permit of semaphore name of size permits (>= 1),
// waiting until one is free, ctx is done, or the client closes. The first
// holder fixes the size while the name has holders: another size fails at once
// with ErrState ("semaphore NAME has N permits, not M"). Permits are granted
// side by side, this client's own permits counting against the size; there is
// no queue and no FIFO order. Semaphores, read/write locks and locks are
// separate namespaces. The Term (Kind TermSemaphore) is owned by the caller:
// Unlock it when done.
func (c *Client) AcquireSemaphore(ctx context.Context, name string, permits uint32) (*Term, error) {
	return c.permit(ctx, "AcquireSemaphore", name, ask{kind: TermSemaphore, arg: permits})
}

// TryAcquireSemaphore makes one attempt at a permit: the Term, or an error for
// which errors.Is(err, ErrBusy) when every permit is held.
func (c *Client) TryAcquireSemaphore(ctx context.Context, name string, permits uint32) (*Term, error) {
	return c.tryAcquire(ctx, "TryAcquireSemaphore", name, ask{kind: TermSemaphore, arg: permits})
}

// RLock acquires read/write lock name for reading, shared with other readers,
// waiting while a writer holds it or a live writer's intent is there (writers
// are preferred). Its Term (Kind TermRead) carries the name's write epoch as
// its token. Unlock it when done.
func (c *Client) RLock(ctx context.Context, name string) (*Term, error) {
	return c.permit(ctx, "RLock", name, ask{kind: TermRead, arg: C.SIMBA_LOCK_READ})
}

// TryRLock makes one read attempt: ErrBusy while a writer holds the name or a
// live writer's intent is there.
func (c *Client) TryRLock(ctx context.Context, name string) (*Term, error) {
	return c.tryAcquire(ctx, "TryRLock", name, ask{kind: TermRead, arg: C.SIMBA_LOCK_READ})
}

// WLock acquires read/write lock name for writing, exclusive, waiting for every
// reader (this client's own included: there is no upgrade) and writer. While
// it waits, its intent holds new readers back. Unlock the Term (Kind
// TermWrite) when done.
func (c *Client) WLock(ctx context.Context, name string) (*Term, error) {
	return c.permit(ctx, "WLock", name, ask{kind: TermWrite, arg: C.SIMBA_LOCK_WRITE})
}

// TryWLock makes one write attempt: ErrBusy while anyone holds the name. It
// leaves no intent.
func (c *Client) TryWLock(ctx context.Context, name string) (*Term, error) {
	return c.tryAcquire(ctx, "TryWLock", name, ask{kind: TermWrite, arg: C.SIMBA_LOCK_WRITE})
}

// permit waits for a permit in slices (as Lock does, so that ctx and Close are
// seen), on the caller's goroutine when ctx cannot be cancelled. Permits need
// no per-name queue: the library grants them side by side, in no order.
func (c *Client) permit(ctx context.Context, op, name string, a ask) (*Term, error) {
	if ctx.Err() != nil {
		return nil, ctxError(op, ctx)
	}
	deadline, _ := ctx.Deadline()
	if ctx.Done() == nil {
		return c.lockLoop(op, name, a, deadline, func() bool { return false })
	}
	return waitTerm(ctx, op, func(gone <-chan struct{}) (*Term, error) {
		return c.lockLoop(op, name, a, deadline, abandonedWhen(gone))
	})
}
