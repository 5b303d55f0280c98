package simba

// The one close shape of libsimba 1.4 (CloseAsync, simba_*_close_async) on
// memory://: from outside and from the handle's own callback or work, done
// runs exactly once, after the handle's last callback, and nothing of the
// handle runs after it.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// closeProbe is one CloseAsync's done: it counts its runs and seals the
// handle's callbacks (a callback after done fails the test).
type closeProbe struct {
	runs, inside, sealed, late int32
	err                        atomic.Value
	insideAtDone               int32
	before                     *int32 // a counter read at done (may be nil)
	beforeAtDone               int32
}

func (p *closeProbe) done(err error) {
	if err != nil {
		p.err.Store(err)
	}
	atomic.StoreInt32(&p.insideAtDone, atomic.LoadInt32(&p.inside))
	if p.before != nil {
		atomic.StoreInt32(&p.beforeAtDone, atomic.LoadInt32(p.before))
	}
	atomic.StoreInt32(&p.sealed, 1)
	atomic.AddInt32(&p.runs, 1)
}

// callback wraps a callback of the handle: it counts calls running and after done.
func (p *closeProbe) callback(f func()) {
	atomic.AddInt32(&p.inside, 1)
	defer atomic.AddInt32(&p.inside, -1)
	if atomic.LoadInt32(&p.sealed) != 0 {
		atomic.AddInt32(&p.late, 1)
	}
	f()
}

// expectOnce waits for done, then checks it stays at one run over a quiet
// period, ran with no error while no callback ran, and none came after.
func (p *closeProbe) expectOnce(t *testing.T) {
	t.Helper()
	eventually(t, "CloseAsync's done", func() bool { return atomic.LoadInt32(&p.runs) >= 1 })
	time.Sleep(200 * time.Millisecond)
	if n := atomic.LoadInt32(&p.runs); n != 1 {
		t.Fatalf("done ran %d times", n)
	}
	if err, _ := p.err.Load().(error); err != nil {
		t.Fatalf("done: %v", err)
	}
	if n := atomic.LoadInt32(&p.insideAtDone); n != 0 {
		t.Fatalf("done ran while %d callbacks of the handle ran", n)
	}
	if n := atomic.LoadInt32(&p.late); n != 0 {
		t.Fatalf("%d callbacks after done", n)
	}
}

func freeName(t *testing.T, c *Client, name string) {
	t.Helper()
	lt, err := c.TryLock(context.Background(), name)
	if err != nil {
		t.Fatalf("the name is still held after done: %v", err)
	}
	if err := lt.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func memURL() string { return "memory://" + uniq("close") }

func TestElectionCloseAsync(t *testing.T) {
	for _, fromCallback := range []bool{false, true} {
		fromCallback := fromCallback
		name := map[bool]string{false: "outside", true: "own-callback"}[fromCallback]
		t.Run(name, func(t *testing.T) {
			url := memURL()
			c, other := open(t, url), open(t, url)
			lease := uniq("el")
			p := &closeProbe{}
			var e atomic.Value
			var elected, revoked int32
			ready := make(chan struct{})
			el, err := c.Elect(lease, Listener{
				OnElected: func(*Term) {
					p.callback(func() {
						atomic.AddInt32(&elected, 1)
						<-ready
						if fromCallback {
							if err := e.Load().(*Election).CloseAsync(p.done); err != nil {
								t.Errorf("CloseAsync: %v", err)
							}
							time.Sleep(50 * time.Millisecond) // done waits for this return
						}
					})
				},
				OnRevoked: func(*Term, RevokeReason) { p.callback(func() { atomic.AddInt32(&revoked, 1) }) },
			})
			if err != nil {
				t.Fatal(err)
			}
			e.Store(el)
			close(ready)
			eventually(t, "elected", func() bool { return atomic.LoadInt32(&elected) == 1 })
			if !fromCallback {
				if err := el.CloseAsync(p.done); err != nil {
					t.Fatal(err)
				}
			}
			p.expectOnce(t)
			if n := atomic.LoadInt32(&revoked); n != 0 {
				t.Fatalf("the detached listener heard %d OnRevoked", n)
			}
			freeName(t, other, lease)
			if _, err := el.Await(context.Background()); !errors.Is(err, ErrState) {
				t.Fatalf("Await after CloseAsync: %v", err)
			}
			if left := c.ownedCount(); left != 0 {
				t.Fatalf("%d handles still owned by the client after done", left)
			}
			_ = el.Close() // after CloseAsync: nothing to do
		})
	}
}

// The done of a Stop asked for before runs before CloseAsync's; closing again
// runs the second done once, after the first.
func TestElectionCloseAsyncAfterStopAndTwice(t *testing.T) {
	c := open(t, memURL())
	r := newRecorder()
	el, err := c.Elect(uniq("el2"), r.listener())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "elected", r.leading)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := el.Stop(ctx); err != nil && !errors.Is(err, ErrCanceled) {
		t.Fatalf("Stop with a cancelled context: %v", err)
	}
	var first, second int32
	p := &closeProbe{}
	if err := el.CloseAsync(func(err error) { p.done(err); atomic.AddInt32(&first, 1) }); err != nil {
		t.Fatal(err)
	}
	if err := el.CloseAsync(func(error) {
		if atomic.LoadInt32(&first) != 1 {
			t.Error("the second CloseAsync's done ran before the first's")
		}
		atomic.AddInt32(&second, 1)
	}); err != nil {
		t.Fatal(err)
	}
	p.expectOnce(t)
	eventually(t, "the second done", func() bool { return atomic.LoadInt32(&second) == 1 })
	time.Sleep(100 * time.Millisecond)
	if n := atomic.LoadInt32(&second); n != 1 {
		t.Fatalf("the second done ran %d times", n)
	}
	if err := el.stopW.wait(context.Background(), "Stop"); err != nil {
		t.Fatalf("the earlier Stop: %v", err)
	}
}

// A task closed from outside and from its own work: done waits for every run
// of the work, which returns late after its revocation.
func TestTaskCloseAsync(t *testing.T) {
	for _, group := range []bool{false, true} {
		for _, fromWork := range []bool{false, true} {
			group, fromWork := group, fromWork
			name := map[bool]string{false: "task", true: "group"}[group] + "-" +
				map[bool]string{false: "outside", true: "own-work"}[fromWork]
			t.Run(name, func(t *testing.T) {
				url := memURL()
				c, other := open(t, url), open(t, url)
				lease := uniq("task")
				var returned, started int32
				p := &closeProbe{before: &returned}
				var task atomic.Value
				ready := make(chan struct{})
				work := func(ctx context.Context, _ *Term) error {
					p.callback(func() {
						if atomic.AddInt32(&started, 1) == 1 && fromWork {
							<-ready
							if err := task.Load().(*Task).CloseAsync(p.done); err != nil {
								t.Errorf("CloseAsync: %v", err)
							}
						}
						<-ctx.Done()
						time.Sleep(100 * time.Millisecond) // returns late: done waits
						atomic.AddInt32(&returned, 1)
					})
					return nil
				}
				var tk *Task
				var err error
				if group {
					tk, err = c.JoinGroup(lease, 1, work)
				} else {
					tk, err = c.LeaderTask(lease, work)
				}
				if err != nil {
					t.Fatal(err)
				}
				task.Store(tk)
				close(ready)
				eventually(t, "the work", func() bool { return atomic.LoadInt32(&started) == 1 })
				if !fromWork {
					if err := tk.CloseAsync(p.done); err != nil {
						t.Fatal(err)
					}
				}
				p.expectOnce(t)
				if n := atomic.LoadInt32(&p.beforeAtDone); n != 1 {
					t.Fatalf("done ran with %d runs of the work returned, want 1", n)
				}
				if group {
					freeName(t, other, lease+".0")
				} else {
					freeName(t, other, lease)
				}
			})
		}
	}
}

// An observer is closed by its context, from any goroutine (here the one
// reading the channel); the channel closes once the observer's last call
// returned, and its state is freed then.
func TestObserverClosesWithoutWaiting(t *testing.T) {
	url := memURL()
	c, holder := open(t, url), open(t, url)
	name := uniq("obs")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Observe(ctx, name, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var o *observer
	c.ownMu.Lock()
	for x := range c.owned {
		o = x.(*observer)
	}
	c.ownMu.Unlock()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no first state")
	}
	lt, err := holder.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lt.Unlock() }()
	for h := range ch {
		if !h.Free() {
			cancel() // from the reader, while values may still come
		}
	}
	select {
	case <-o.freed:
	default:
		t.Fatal("the channel closed before the observer's close completed")
	}
	if func() (live bool) {
		defer func() { _ = recover() }()
		_ = o.h.Value() // panics once deleted
		return true
	}() {
		t.Fatal("the observer's state outlived its close")
	}
	if left := c.ownedCount(); left != 0 {
		t.Fatalf("%d handles still owned after the observer's close", left)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// A lock term's CloseAsync releases the lock without waiting: done runs once,
// after Done closed, and the name is free then. An election's term closed in
// its OnElected only drops that reference.
func TestTermCloseAsync(t *testing.T) {
	url := memURL()
	c, other := open(t, url), open(t, url)
	name := uniq("lock")
	lt, err := c.Lock(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	doneCh := lt.Done()
	var sawDone int32
	p := &closeProbe{before: &sawDone}
	if err := lt.CloseAsync(func(err error) {
		select {
		case <-doneCh:
			atomic.StoreInt32(&sawDone, 1)
		default:
		}
		p.done(err)
	}); err != nil {
		t.Fatal(err)
	}
	p.expectOnce(t)
	if atomic.LoadInt32(&p.beforeAtDone) != 1 {
		t.Fatal("done ran before the term's Done closed")
	}
	if lt.Valid() || lt.Reason() != Stopped {
		t.Fatalf("after CloseAsync: valid %v, reason %v", lt.Valid(), lt.Reason())
	}
	freeName(t, other, name)
	if err := lt.Unlock(); err != nil {
		t.Fatalf("Unlock after CloseAsync: %v", err)
	}
	again := &closeProbe{}
	if err := lt.CloseAsync(again.done); err != nil {
		t.Fatal(err)
	}
	again.expectOnce(t)

	q := &closeProbe{}
	elName := uniq("term-el")
	el, err := c.Elect(elName, Listener{OnElected: func(tm *Term) {
		q.callback(func() {
			if err := tm.CloseAsync(q.done); err != nil {
				t.Errorf("CloseAsync: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	q.expectOnce(t)
	if _, err := other.TryLock(context.Background(), elName); !errors.Is(err, ErrBusy) {
		t.Fatalf("closing a reference to the election's term released it: %v", err)
	}
	if err := el.Close(); err != nil {
		t.Fatal(err)
	}
}
