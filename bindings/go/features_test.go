package simba

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A cancelled Lock returns at once with ErrCanceled (and context.Canceled),
// leaves the session alone, and does not keep a place in the queue: the next
// Lock of the same client gets the name as soon as it is free.
func TestLockCancelAndQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		name := uniq("cancel")
		ta, err := a.Lock(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := b.Lock(ctx, name)
			errc <- err
		}()
		time.Sleep(50 * time.Millisecond)
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Lock: %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a cancelled Lock did not return")
		}
		if b.Status() != SessionLive {
			t.Fatalf("session after a cancelled Lock: %v", b.Status())
		}
		// Two waiters of one client queue; each gets the lock once, one at a time.
		var holding, max, got int32
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				tb, err := b.Lock(ctx, name)
				if err != nil {
					t.Errorf("queued Lock: %v", err)
					return
				}
				if n := atomic.AddInt32(&holding, 1); n > atomic.LoadInt32(&max) {
					atomic.StoreInt32(&max, n)
				}
				time.Sleep(30 * time.Millisecond)
				atomic.AddInt32(&holding, -1)
				atomic.AddInt32(&got, 1)
				if err := tb.Unlock(); err != nil {
					t.Errorf("Unlock: %v", err)
				}
			}()
		}
		time.Sleep(100 * time.Millisecond)
		if err := ta.Unlock(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got != 2 || max != 1 {
			t.Fatalf("queued locks: %d acquired, %d at once", got, max)
		}
	})
}

// WithLock runs the function with a valid term and frees the name after it.
func TestWithLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		name := uniq("with")
		var token uint64
		err := a.WithLock(context.Background(), name, func(ctx context.Context, term *Term) error {
			if err := term.EnsureValid(100 * time.Millisecond); err != nil {
				return err
			}
			token = term.Token()
			if _, err := b.TryLock(ctx, name); !errors.Is(err, ErrBusy) {
				t.Errorf("TryLock inside WithLock: %v", err)
			}
			return errors.New("step failed")
		})
		if err == nil || err.Error() != "step failed" || token == 0 {
			t.Fatalf("WithLock returned %v (token %d)", err, token)
		}
		tb, err := b.TryLock(context.Background(), name)
		if err != nil {
			t.Fatalf("the name is not free after WithLock: %v", err)
		}
		if tb.Token() <= token {
			t.Fatalf("tokens %d then %d", token, tb.Token())
		}
		_ = tb.Unlock()
	})
}

// Closing the client revokes every term (STOPPED), waits for the work,
// delivers OnRevoked, and fails later calls with ErrClosed.
func TestClientCloseRevokesEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		c, err := Open(url, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitLive(context.Background()); err != nil {
			t.Fatal(err)
		}
		lock, err := c.Lock(context.Background(), uniq("close.lock"))
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		e, err := c.Elect(uniq("close.elect"), rec.listener())
		if err != nil {
			t.Fatal(err)
		}
		var workDone int32
		working := make(chan struct{})
		task, err := c.LeaderTask(uniq("close.task"), func(ctx context.Context, term *Term) error {
			close(working)
			<-ctx.Done()
			atomic.StoreInt32(&workDone, 1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the election to lead", rec.leading)
		<-working
		elected := rec.last()
		if e.Term() != elected || !e.Leader() {
			t.Fatalf("Election.Term() %v, Leader %v", e.Term(), e.Leader())
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lock.Done():
		default:
			t.Fatal("lock term's Done not closed by Close")
		}
		if lock.Reason() != Stopped || lock.Valid() {
			t.Fatalf("lock term after Close: %v valid=%v", lock.Reason(), lock.Valid())
		}
		if why, ok := rec.reason(elected); !ok || why != Stopped {
			t.Fatalf("election term after Close: %v %v", why, ok)
		}
		if atomic.LoadInt32(&workDone) != 1 {
			t.Fatal("Close returned before the work did")
		}
		if _, err := c.Elect(uniq("x"), Listener{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Elect after Close: %v", err)
		}
		if err := c.WaitLive(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("WaitLive after Close: %v", err)
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatalf("Stop of an election of a closed client: %v", err)
		}
		_ = e.Close()
		_ = task.Close()
		_ = lock.Unlock()
		lock.Release()
	})
}

// Leader work: an error it returns and a panic go to Config.OnError; the
// work's term checks, and Close from inside the work does not wait for itself.
func TestWorkErrorsPanicsAndSelfClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		var mu sync.Mutex
		var reported []error
		cfg := testConfig()
		cfg.OnError = func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
		c, err := Open(url, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		has := func(match func(error) bool) func() bool {
			return func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range reported {
					if match(e) {
						return true
					}
				}
				return false
			}
		}
		name := uniq("werr")
		var runs int32
		task, err := c.LeaderTask(name, func(ctx context.Context, term *Term) error {
			if err := term.EnsureValid(time.Hour); !errors.Is(err, ErrTermExpired) {
				t.Errorf("EnsureValid(1h) in work: %v", err)
			}
			if atomic.AddInt32(&runs, 1) == 1 {
				return errors.New("disk full")
			}
			panic("work exploded")
		})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the work's error", has(func(e error) bool {
			var we *WorkError
			return errors.As(e, &we) && we.Name == name && we.Token > 0 && we.Err.Error() == "disk full"
		}))
		eventually(t, "the work's panic", has(func(e error) bool {
			var pe *PanicError
			return errors.As(e, &pe) && pe.Value == "work exploded" && strings.Contains(pe.Where, name)
		}))
		_ = task.Close()

		// Close from inside the work: starts the stop, returns at once.
		closed := make(chan struct{})
		var self *Task
		var selfRuns int32
		ready := make(chan struct{})
		self, err = c.LeaderTask(uniq("wself"), func(ctx context.Context, term *Term) error {
			<-ready
			atomic.AddInt32(&selfRuns, 1)
			_ = self.Close()
			close(closed)
			<-ctx.Done() // the stop revokes the term
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		close(ready)
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatal("Task.Close inside the work blocked")
		}
		time.Sleep(testConfig().RenewInterval)
		if n := atomic.LoadInt32(&selfRuns); n != 1 {
			t.Fatalf("work ran %d times after closing itself", n)
		}
	})
}

// Term.Done of an election term closes on the revocation; StepDown and Stop
// of a task from outside; Stop twice is fine.
func TestTermDoneAndStopTwice(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		c := open(t, url)
		terms := make(chan *Term, 4)
		e, err := c.Elect(uniq("done"), Listener{OnElected: func(t *Term) { terms <- t }})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		term := <-terms
		done := term.Done()
		select {
		case <-done:
			t.Fatal("Done closed while leading")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after Stop")
		}
		if term.Reason() != Stopped || e.Term() != nil || e.Leader() {
			t.Fatalf("after Stop: reason %v, Term %v", term.Reason(), e.Term())
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		if err := e.StepDown(ctx, 0); !errors.Is(err, ErrState) {
			t.Fatalf("StepDown of a stopped election: %v", err)
		}
		task, err := c.Schedule(uniq("tstop"), 0, time.Hour, func(context.Context, *Term) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := task.Stop(ctx); err != nil {
			t.Fatalf("second task Stop: %v", err)
		}
		_ = task.Close()
		if err := task.StepDown(ctx, 0); !errors.Is(err, ErrState) {
			t.Fatalf("StepDown of a closed task: %v", err)
		}
	})
}

// Session events and the library's log lines reach Go.
func TestEventsAndLogger(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		var mu sync.Mutex
		var events []EventType
		var lines int
		cfg := testConfig()
		cfg.OnEvent = func(e Event) {
			mu.Lock()
			events = append(events, e.Type)
			mu.Unlock()
			if e.Type == EventSessionClosed {
				panic("a sink that panics is recovered too")
			}
		}
		cfg.Logger = func(level LogLevel, msg string) { mu.Lock(); lines++; mu.Unlock() }
		cfg.LogLevel = LogDebug
		cfg.OnError = func(error) {}
		c, err := Open(url, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitLive(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 || events[len(events)-1] != EventSessionClosed {
			t.Fatalf("events %v: want SESSION_CLOSED last", events)
		}
		if lines == 0 && !strings.HasPrefix(url, "memory:") { // memory:// logs nothing
			t.Fatal("no log line at DEBUG level")
		}
	})
}

// Inspect reports what the backend holds.
func TestInspect(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		c := open(t, url)
		name := uniq("inspect")
		term, err := c.Lock(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		defer term.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		js, err := c.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var report struct {
			Leases []struct {
				Name   string  `json:"name"`
				Token  uint64  `json:"token"`
				Holder *string `json:"holder"`
			} `json:"leases"`
		}
		if err := json.Unmarshal([]byte(js), &report); err != nil {
			t.Fatalf("%v in %s", err, js)
		}
		if len(report.Leases) != 1 || report.Leases[0].Name != name ||
			report.Leases[0].Token != term.Token() || report.Leases[0].Holder == nil {
			t.Fatalf("inspect: %s", js)
		}
		if _, err := c.Inspect(ctx, "bad name!"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Inspect of a bad name: %v", err)
		}
		// Without a deadline (the default bound) and with a cancelled context.
		if js, err := c.Inspect(context.Background(), name); err != nil || !strings.Contains(js, name) {
			t.Fatalf("Inspect(Background): %v %s", err, js)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if _, err := c.Inspect(cctx, name); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Inspect with a cancelled context: %v", err)
		}
	})
}

func TestBackendSchema(t *testing.T) {
	ddl, err := BackendSchema("postgresql://u@localhost/db?schema=simba_go")
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skip("postgresql not built in")
		}
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "simba_go") || !strings.Contains(strings.ToUpper(ddl), "CREATE") {
		t.Fatalf("schema: %s", ddl)
	}
	if _, err := BackendSchema("memory://x"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("memory schema: %v", err)
	}
}

// Configuration values reach the library: the snapshot shows the renew period.
func TestConfigReachesTheLibrary(t *testing.T) {
	c, err := Open("memory://"+uniq("cfg"), &Config{LeaseDuration: 1200 * time.Millisecond,
		ClientName: "go-test", CallbackThreads: 3, Options: map[string]string{"callback.executor": "direct"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLive(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ := c.Snapshot()
	var snap struct {
		Session struct {
			RenewPeriodMs int64 `json:"renew_period_ms"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(s), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Session.RenewPeriodMs != 400 {
		t.Fatalf("renew period %d, want lease/3 = 400 (%s)", snap.Session.RenewPeriodMs, s)
	}
	if _, err := Open("memory://x", &Config{LeaseDuration: -time.Second}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative lease: %v", err)
	}
	if _, err := Open("memory://x", &Config{Drift: 0.7}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("drift 0.7: %v", err)
	}
}

// Many goroutines use one client while another closes it: every call ends
// with success, ErrClosed or ErrCanceled, and nothing crashes (under -race).
func TestConcurrentUseAndClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		c, err := Open(url, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitLive(context.Background()); err != nil {
			t.Fatal(err)
		}
		name := uniq("race")
		var wg sync.WaitGroup
		var cycles int32
		ok := func(err error) bool { return err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrCanceled) }
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					term, err := c.Lock(ctx, name)
					cancel()
					if err != nil {
						if !ok(err) {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					_ = term.Valid()
					_ = term.Remaining()
					if _, err := c.Snapshot(); !ok(err) {
						t.Errorf("Snapshot: %v", err)
					}
					if err := term.Unlock(); err != nil {
						t.Errorf("Unlock: %v", err)
					}
					atomic.AddInt32(&cycles, 1)
				}
			}(i)
		}
		eventually(t, "some lock cycles", func() bool { return atomic.LoadInt32(&cycles) >= 10 })
		waitErr := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			waitErr <- c.WaitLive(ctx)
		}()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := <-waitErr; !ok(err) {
			t.Fatalf("WaitLive during Close: %v", err)
		}
		if c.Status() != SessionClosed {
			t.Fatalf("status after Close: %v", c.Status())
		}
	})
}

// WaitLive on a backend that does not answer ends with its context: a cancel
// at once (ErrCanceled), a deadline with ErrTimeout; the client stays usable.
func TestWaitLiveEndsWithItsContext(t *testing.T) {
	c, err := Open("redis://127.0.0.1:1", testConfig()) // nothing listens on port 1
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skip("redis not built in")
		}
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	began := time.Now()
	err = c.WaitLive(ctx)
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled WaitLive: %v", err)
	}
	if took := time.Since(began); took > slice {
		t.Fatalf("a cancel took %v to end WaitLive", took)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer dcancel()
	if err := c.WaitLive(dctx); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLive past its deadline: %v", err)
	}
	if st := c.Status(); st == SessionLive || st == SessionClosed {
		t.Fatalf("status %v with no server", st)
	}
	if _, err := c.TryLock(context.Background(), "x"); err == nil {
		t.Fatal("TryLock without a server succeeded")
	}
}

// The client owns what it started: an election the caller dropped keeps
// leading through garbage collections, and the client's Close stops it.
func TestDroppedElectionLivesUntilClientClose(t *testing.T) {
	c, err := Open("memory://"+uniq("owned"), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	revoked := make(chan RevokeReason, 1)
	elected := make(chan struct{}, 1)
	func() {
		_, err := c.Elect(uniq("owned"), Listener{
			OnElected: func(*Term) { elected <- struct{}{} },
			OnRevoked: func(_ *Term, why RevokeReason) { revoked <- why },
		})
		if err != nil {
			t.Fatal(err)
		}
	}()
	<-elected
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case why := <-revoked:
		t.Fatalf("a dropped election was revoked (%v) before the client closed", why)
	default:
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-revoked:
		if why != Stopped {
			t.Fatalf("reason %v", why)
		}
	default:
		t.Fatal("OnRevoked had not run when Close returned")
	}
	c.ownMu.Lock()
	n := len(c.owned)
	c.ownMu.Unlock()
	if n != 0 {
		t.Fatalf("%d elections or tasks left after Close", n)
	}
}

func (c *Client) queued(name string) int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if q := c.queues[name]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// Lock calls of one client on one name are served first come, first served,
// although each waits in slices of simba_lock_acquire; a cancelled waiter
// leaves the queue at once and the next keeps its place.
func TestLockQueueIsFirstComeFirstServed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		name := uniq("fifo")
		held, err := a.Lock(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		const n = 4
		order := make(chan int, n)
		cancelled := make(chan error, 1)
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			i := i
			ctx := context.Background()
			if i == 1 {
				ctx = ctx1
			} else if i == 2 {
				var cancel context.CancelFunc // a deadline: the other waiting path
				ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				tb, err := b.Lock(ctx, name)
				if i == 1 {
					cancelled <- err
					return
				}
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				order <- i
				if err := tb.Unlock(); err != nil {
					t.Errorf("waiter %d: Unlock: %v", i, err)
				}
			}()
			eventually(t, fmt.Sprintf("waiter %d queued", i), func() bool { return b.queued(name) == i+1 })
			time.Sleep(70 * time.Millisecond) // spread the waiters over the slices
		}
		cancel1()
		select {
		case err := <-cancelled:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled waiter did not return")
		}
		eventually(t, "the cancelled waiter left the queue", func() bool { return b.queued(name) == n-1 })
		time.Sleep(2 * slice) // every waiter in the library has been through a slice again
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(order)
		var got []int
		for i := range order {
			got = append(got, i)
		}
		if fmt.Sprint(got) != "[0 2 3]" {
			t.Fatalf("order of acquisition %v, want [0 2 3]", got)
		}
		if q := b.queued(name); q != 0 {
			t.Fatalf("%d waiters left in the queue", q)
		}
	})
}
