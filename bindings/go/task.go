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

// WorkFunc is leader work. It runs while this process holds t, on a thread of
// its own; ctx is cancelled the moment t is revoked (stop, step-down, lost
// session, client closed): return soon after. Check t.EnsureValid before each
// step and pass t.Token() with each write. An error returned while t was
// still valid goes to Config.OnError; either way, when work returns on a
// valid term the lease is released and the election contends again.
type WorkFunc func(ctx context.Context, t *Term) error

type workState struct {
	name   string
	fn     WorkFunc
	report func(error)
}

func (w *workState) run(ct *C.simba_term_t) {
	t := borrowedTerm(ct)
	defer t.Release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	t.watchRevoked(ct, stop, cancel)
	defer guard(w.report, "leader work of "+t.Name())
	if err := w.fn(ctx, t); err != nil && t.Valid() {
		safeReport(w.report, &WorkError{Name: t.Name(), Token: t.Token(), Err: err})
	}
}

// Task is an election (or a partition group membership) whose terms run
// leader work, in the seed's handover order: on Stop, StepDown or Close the
// term is revoked and the work's context cancelled, and the lease is released
// only after the work returned (or the term's local deadline passed), so no
// other node starts the same work while this one still runs.
type Task struct {
	client *Client
	name   string
	t      *C.simba_task_t
	work   cgo.Handle
	mu     sync.Mutex
	done   bool
	closed chan struct{} // closed by Close (the task's or the client's)
}

func (c *Client) startTask(op, name string, work WorkFunc,
	start func(h *C.simba_client_t, n *C.char, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int) (*Task, error) {
	if work == nil {
		return nil, &Error{Code: CodeInvalid, Op: op, Message: "nil work"}
	}
	n, fn := cstr(name)
	defer fn()
	wh := cgo.NewHandle(&workState{name: name, fn: work, report: c.report})
	var out *C.simba_task_t // a C out-parameter may not point into a Go struct with Go pointers
	if err := c.with(op, func(h *C.simba_client_t) error {
		return call(op, func(m **C.char) C.int { return start(h, n, C.uintptr_t(wh), &out, m) })
	}); err != nil {
		wh.Delete()
		return nil, err
	}
	t := &Task{client: c, name: name, t: out, work: wh, closed: make(chan struct{})}
	c.own(t)
	return t, nil
}

// LeaderTask contends for name and runs work for each term this process
// wins. Close the Task when done.
func (c *Client) LeaderTask(name string, work WorkFunc) (*Task, error) {
	return c.startTask("LeaderTask", name, work,
		func(h *C.simba_client_t, n *C.char, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
			return C.s_run_while_leader(out, h, n, wh, m)
		})
}

// RunWhileLeader runs work whenever this process leads name, until ctx is
// done; then it stops in handover order (the work's context is cancelled,
// the lease released once it returned) and returns ctx.Err(). If the client
// is closed meanwhile it returns ErrClosed once the close stopped the work.
// It fails at once, without waiting, if the election cannot start
// (ErrState: name is in use on this client; ErrClosed).
func (c *Client) RunWhileLeader(ctx context.Context, name string, work WorkFunc) error {
	t, err := c.LeaderTask(name, work)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		_ = t.Close()
		return ctx.Err()
	case <-t.closed: // the client's Close closed it
		return &Error{Code: CodeClosed, Op: "RunWhileLeader", Message: "the client was closed"}
	}
}

// Schedule runs work while this process leads name: after initialDelay, then
// with a fixed delay of period between the end of one run and the start of
// the next. A run that would start on a revoked term does not start; a new
// term starts again with initialDelay.
func (c *Client) Schedule(name string, initialDelay, period time.Duration, work WorkFunc) (*Task, error) {
	return c.startTask("Schedule", name, work,
		func(h *C.simba_client_t, n *C.char, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
			return C.s_schedule(out, h, n, ms(initialDelay.Milliseconds()), ms(period.Milliseconds()), wh, m)
		})
}

// JoinGroup joins the partition group group: partitions "group.0" ..
// "group.N-1" are spread fairly over the members that joined, and work runs
// for each partition this member leads (t.Name() is the partition). Moves
// between members follow the handover order. Close the Task to leave.
func (c *Client) JoinGroup(group string, partitions int, work WorkFunc) (*Task, error) {
	if partitions <= 0 || partitions > 10000 {
		return nil, &Error{Code: CodeInvalid, Op: "JoinGroup", Message: "partitions must be in 1..10000"}
	}
	return c.startTask("JoinGroup", group, work,
		func(h *C.simba_client_t, n *C.char, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
			return C.s_group_join(out, h, n, C.uint32_t(partitions), wh, m)
		})
}

// Name is the task's lease name (a group's name for JoinGroup).
func (t *Task) Name() string { return t.name }

// begin starts a stop or step-down under t.mu, so that Close cannot free
// the handle meanwhile.
func (t *Task) begin(op string, ok Code, f func(h C.uintptr_t, m **C.char) C.int) (*doneWaiter, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil, &Error{Code: CodeState, Op: op, Message: "the task is closed"}
	}
	w := newDoneWaiter()
	return w, w.start(op, ok, f)
}

// Stop revokes the term, waits for the work, releases the lease; it returns
// when that completed, or when ctx is done (the stop goes on). Stopping a
// stopped or closed task returns nil. The Task stays to be closed.
func (t *Task) Stop(ctx context.Context) error {
	w, err := t.begin("Stop", CodeState, func(h C.uintptr_t, m **C.char) C.int { return C.s_task_stop(t.t, h, m) })
	if err != nil {
		if err.(*Error).Code == CodeState {
			return nil
		}
		return err
	}
	return w.wait(ctx, "Stop")
}

// StepDown hands the lease over in handover order and does not contend for
// cooldown counted from now (a group member leaves the group for cooldown).
func (t *Task) StepDown(ctx context.Context, cooldown time.Duration) error {
	w, err := t.begin("StepDown", 0, func(h C.uintptr_t, m **C.char) C.int {
		return C.s_task_step_down(t.t, ms(cooldown.Milliseconds()), h, m)
	})
	if err != nil {
		return err
	}
	return w.wait(ctx, "StepDown")
}

// Close stops the task, waits until the stop completed and every run of its
// work returned, and frees it. From inside the work or a callback it starts
// the stop and returns at once. Idempotent; always returns nil.
func (t *Task) Close() error {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return nil
	}
	t.done = true
	t.mu.Unlock()
	C.simba_task_close(t.t)
	t.work.Delete()
	t.client.disown(t)
	close(t.closed)
	return nil
}
