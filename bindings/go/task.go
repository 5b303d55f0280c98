package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"time"
	"unsafe"
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
// other node starts the same work while this one still runs. Stop, StepDown
// and Close are those of an Election (stopper, stop.go).
type Task struct {
	stopper
	name string
}

// taskStart makes a task's handle: s_run_while_leader, s_schedule, s_group_join.
type taskStart func(h *C.simba_client_t, ud C.uintptr_t, out **C.simba_task_t, m **C.char) C.int

func (c *Client) startTask(op, name string, work WorkFunc, startC taskStart) (*Task, error) {
	if work == nil {
		return nil, &Error{Code: CodeInvalid, Op: op, Message: "nil work"}
	}
	t := &Task{name: name}
	if err := t.start(c, op, "task", C.S_TASK, cgo.NewHandle(&workState{name: name, fn: work, report: c.report}), nil,
		func(h *C.simba_client_t, ud C.uintptr_t, out *unsafe.Pointer, m **C.char) C.int {
			return startC(h, ud, (**C.simba_task_t)(unsafe.Pointer(out)), m)
		}); err != nil {
		return nil, err
	}
	return t, nil
}

// LeaderTask contends for name and runs work for each term this process
// wins. Close the Task when done.
func (c *Client) LeaderTask(name string, work WorkFunc) (*Task, error) {
	return c.leaderTask("LeaderTask", name, work)
}

func (c *Client) leaderTask(op, name string, work WorkFunc) (*Task, error) {
	return c.startTask(op, name, work, func(h *C.simba_client_t, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
		return C.s_run_while_leader(out, h, name, wh, m)
	})
}

// RunWhileLeader runs work whenever this process leads name, until ctx is
// done; then it stops in handover order (the work's context is cancelled,
// the lease released once it returned) and returns ctx.Err(). If the client
// is closed meanwhile it returns ErrClosed once the close stopped the work.
// It fails at once, without waiting, if the election cannot start
// (ErrState: name is in use on this client; ErrClosed).
func (c *Client) RunWhileLeader(ctx context.Context, name string, work WorkFunc) error {
	t, err := c.leaderTask("RunWhileLeader", name, work)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		_ = t.Close()
		return ctx.Err()
	case <-t.ended: // the client's Close closed it
		return &Error{Code: CodeClosed, Op: "RunWhileLeader", Message: "the client was closed"}
	}
}

// Schedule runs work while this process leads name: after initialDelay, then
// with a fixed delay of period between the end of one run and the start of
// the next. A run that would start on a revoked term does not start; a new
// term starts again with initialDelay.
func (c *Client) Schedule(name string, initialDelay, period time.Duration, work WorkFunc) (*Task, error) {
	return c.startTask("Schedule", name, work, func(h *C.simba_client_t, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
		return C.s_schedule(out, h, name, ms(initialDelay.Milliseconds()), ms(period.Milliseconds()), wh, m)
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
	if err := noNUL("JoinGroup", "group name", group); err != nil {
		return nil, err
	}
	g, fg := cstr(group)
	defer fg()
	return c.startTask("JoinGroup", group, work, func(h *C.simba_client_t, wh C.uintptr_t, out **C.simba_task_t, m **C.char) C.int {
		return C.s_group_join(out, h, g, C.uint32_t(partitions), wh, m)
	})
}

// Name is the task's lease name (a group's name for JoinGroup).
func (t *Task) Name() string { return t.name }
