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
		c := open(t, url)
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
		c := open(t, url)
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
	if n := c.ownedCount(); n != 0 {
		t.Fatalf("%d elections or tasks left after Close", n)
	}
}

// ownedCount is how many elections, tasks and observers the client owns.
func (c *Client) ownedCount() int {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	return len(c.owned)
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

func openWith(t *testing.T, url string, cfg *Config) *Client {
	t.Helper()
	c, err := Open(url, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitLive(ctx); err != nil {
		t.Fatalf("WaitLive: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// wantNUL checks that err is the invalid-argument error of a string with a
// NUL byte, and names what the string was.
func wantNUL(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeInvalid || !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "NUL") {
		t.Fatalf("%s: %v, want ErrInvalid saying NUL", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %q does not say %q", what, err, w)
		}
	}
}

// A string with a NUL byte is refused on its way into C, never cut at it:
// "jobs\x00-tenant-1" and "jobs\x00-tenant-2" are not the lease "jobs".
func TestNULBytesAreRefused(t *testing.T) {
	ctx := context.Background()
	_, err := Open("memory://acc\x00 b", nil)
	wantNUL(t, "Open", err, "backend URL", "index 12")
	_, err = Open("memory://x", &Config{Options: map[string]string{"session.margin\x00x": "10ms"}})
	wantNUL(t, "config key", err, "config key")
	_, err = Open("memory://x", &Config{Options: map[string]string{"session.margin": "10ms\x00junk"}})
	wantNUL(t, "config value", err, "session.margin", "index 4")
	_, err = Open("memory://x", &Config{ClientName: "node\x00a"})
	wantNUL(t, "client name", err, "client.name")
	_, err = BackendSchema("postgresql://u@localhost/db?schema=a\x00b")
	wantNUL(t, "BackendSchema", err, "backend URL")
	wantNUL(t, "CheckLeaseName", CheckLeaseName("a\x00b"), "index 1")
	var cfg Config
	_, err = cfg.Duration("session.lease-duration\x00")
	wantNUL(t, "Config.Duration", err)

	c := open(t, "memory://"+uniq("nul"))
	other := open(t, "memory://"+uniq("nul-other"))
	_ = other
	_, err = c.TryLock(ctx, "jobs\x00-tenant-1")
	wantNUL(t, "TryLock", err, "index 4")
	_, err = c.Lock(ctx, "jobs\x00-tenant-2")
	wantNUL(t, "Lock", err)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = c.Lock(cctx, "jobs\x00-tenant-3")
	wantNUL(t, "Lock with a cancellable context", err)
	_, err = c.Elect("jobs\x00x", Listener{})
	wantNUL(t, "Elect", err)
	work := func(ctx context.Context, t *Term) error { <-ctx.Done(); return nil }
	_, err = c.LeaderTask("jobs\x00x", work)
	wantNUL(t, "LeaderTask", err)
	_, err = c.Schedule("jobs\x00x", 0, time.Second, work)
	wantNUL(t, "Schedule", err)
	_, err = c.JoinGroup("jobs\x00x", 2, work)
	wantNUL(t, "JoinGroup", err, "group name")
	_, err = c.Observe(ctx, "jobs\x00x", 0)
	wantNUL(t, "Observe", err)
	_, err = c.Inspect(ctx, "jobs", "jobs\x00x")
	wantNUL(t, "Inspect", err)
	err = c.RunWhileLeader(ctx, "jobs\x00x", work)
	wantNUL(t, "RunWhileLeader", err)
	// None of them took or started "jobs": it is free, and startable.
	tj, err := c.TryLock(ctx, "jobs")
	if err != nil {
		t.Fatalf("TryLock(jobs) after the refused names: %v", err)
	}
	snap, _ := c.Snapshot()
	if strings.Count(snap, `"jobs"`) != 1 {
		t.Fatalf("snapshot holds %d entries named jobs: %s", strings.Count(snap, `"jobs"`), snap)
	}
	if err := tj.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// An observer sees the holder of a name change hands: free, then client A
// with its token, then client B with a larger one.
func TestObserveSeesAHandover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		name := uniq("observe")
		watcher := open(t, url)
		cfgA, cfgB := testConfig(), testConfig()
		cfgA.ClientName, cfgB.ClientName = "go-observe-a", "go-observe-b"
		a, b := openWith(t, url, cfgA), openWith(t, url, cfgB)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ch, err := watcher.Observe(ctx, name, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		next := func(what string, ok func(Holder) bool) Holder {
			t.Helper()
			for {
				select {
				case h, open := <-ch:
					if !open {
						t.Fatalf("channel closed waiting for %s", what)
					}
					if h.Name != name {
						t.Fatalf("holder of %q, want %q", h.Name, name)
					}
					if ok(h) {
						return h
					}
				case <-ctx.Done():
					t.Fatalf("no %s seen", what)
				}
			}
		}
		first := next("the state at the start", func(Holder) bool { return true })
		if !first.Free() || first.Token != 0 {
			t.Fatalf("a new name's first state: %+v", first)
		}
		ta, err := a.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		// A Lock whose first short attempt timed out releases what that attempt
		// won late and acquires again: the observer may see that holder first.
		ha := next("holder A", func(h Holder) bool { return !h.Free() && h.Token == ta.Token() })
		if ha.Client != "go-observe-a" || ha.Session == "" {
			t.Fatalf("holder A: %+v (token %d)", ha, ta.Token())
		}
		if err := ta.Unlock(); err != nil {
			t.Fatal(err)
		}
		tb, err := b.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		hb := next("holder B", func(h Holder) bool { return !h.Free() && h.Token == tb.Token() })
		if hb.Client != "go-observe-b" || hb.Token <= ha.Token ||
			hb.Session == ha.Session {
			t.Fatalf("holder B: %+v after %+v", hb, ha)
		}
		_ = tb.Unlock()
		// The channel closes when ctx is done...
		cancel()
		eventually(t, "the channel to close with its context", func() bool {
			_, open := <-ch
			return !open
		})
		// ...and when the client closes.
		ch2, err := watcher.Observe(context.Background(), name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := <-ch2; !ok {
			t.Fatal("no first state")
		}
		if err := watcher.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := <-ch2; ok {
			t.Fatal("a value after the client's Close")
		}
		if _, err := watcher.Observe(context.Background(), name, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Observe after Close: %v", err)
		}
		if _, err := a.Observe(context.Background(), name, 5*time.Millisecond); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Observe with a 5 ms poll: %v", err)
		}
	})
}

// The metrics text counts what the client did: N lock cycles are N
// acquires, N terms, N releases and N revocations STOPPED.
func TestMetricsAfterKnownActivity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		cfg := testConfig()
		cfg.ClientName = "go-metrics"
		c := openWith(t, url, cfg)
		const n = 3
		for i := 0; i < n; i++ {
			term, err := c.Lock(context.Background(), uniq("metrics"))
			if err != nil {
				t.Fatal(err)
			}
			if err := term.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		text, err := c.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"# TYPE simba_acquires_total counter\n",
			fmt.Sprintf("simba_acquires_total{client=\"go-metrics\"} %d\n", n),
			fmt.Sprintf("simba_terms_total{client=\"go-metrics\"} %d\n", n),
			fmt.Sprintf("simba_releases_total{client=\"go-metrics\"} %d\n", n),
			fmt.Sprintf("simba_revocations_total{client=\"go-metrics\",reason=\"STOPPED\"} %d\n", n),
			"simba_leases_held{client=\"go-metrics\"} 0\n",
			"simba_session_state{client=\"go-metrics\",state=\"LIVE\"} 1\n",
		} {
			if !strings.Contains(text, want) {
				t.Fatalf("metrics lack %q:\n%s", want, text)
			}
		}
		_ = c.Close()
		if _, err := c.Metrics(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Metrics after Close: %v", err)
		}
	})
}

// Names come from the library, and a value it does not know keeps its number.
func TestNamesFromTheLibrary(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{NotRevoked.String(), "NONE"},
		{Stopped.String(), "STOPPED"},
		{SteppedDown.String(), "STEPPED_DOWN"},
		{DeadlinePassed.String(), "DEADLINE_PASSED"},
		{SessionExpired.String(), "SESSION_EXPIRED"},
		{TakenOver.String(), "TAKEN_OVER"},
		{RevokeReason(9).String(), "UNKNOWN(9)"},
		{SessionOpening.String(), "OPENING"},
		{SessionLive.String(), "LIVE"},
		{SessionSuspended.String(), "SUSPENDED"},
		{SessionClosed.String(), "CLOSED"},
		{SessionStatus(7).String(), "UNKNOWN(7)"},
		{EventSessionOpened.String(), "SESSION_OPENED"},
		{EventSessionLeaseShortened.String(), "SESSION_LEASE_SHORTENED"},
		{EventType(42).String(), "UNKNOWN(42)"},
		{Code(0).String(), "OK"},
		{CodeInvalid.String(), "EINVAL"},
		{CodeBusy.String(), "EBUSY"},
		{CodeCanceled.String(), "ECANCELED"},
		{Code(-99).String(), "UNKNOWN(-99)"},
		{CodeTimeout.Text(), "timed out"},
		{(&Error{Code: -99, Op: "Op", Message: "m"}).Error(), "simba: Op: unknown error -99: m"},
		{(&Error{Code: CodeBusy, Op: "TryLock"}).Error(), "simba: TryLock: lease held by someone else"},
		{fmt.Sprint((&Term{name: "n", token: 7, final: RevokeReason(11)}).Reason()), "UNKNOWN(11)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	if err := CheckLeaseName("app.primary"); err != nil {
		t.Fatal(err)
	}
	if err := CheckLeaseName("bad name!"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "index 3") {
		t.Fatalf("CheckLeaseName(bad name!): %v", err)
	}
}

// After Close, RunWhileLeader fails as RunWhileLeader (not as LeaderTask).
func TestRunWhileLeaderAfterCloseNamesItself(t *testing.T) {
	c, err := Open("memory://"+uniq("rwl-closed"), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	err = c.RunWhileLeader(context.Background(), "x", func(context.Context, *Term) error { return nil })
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, ErrClosed) || se.Op != "RunWhileLeader" ||
		!strings.HasPrefix(err.Error(), "simba: RunWhileLeader: client closed") {
		t.Fatalf("RunWhileLeader after Close: %v", err)
	}
}

// CloseContext bounds the wait of a close; the close goes on, and a later
// call waits for it.
func TestCloseContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		c := open(t, url)
		// Work that returns 300 ms after its context is cancelled: the close
		// waits for it (handover order).
		name := uniq("closectx")
		started := make(chan *Term, 1)
		var returned int32
		task, err := c.LeaderTask(name, func(ctx context.Context, term *Term) error {
			started <- term
			<-ctx.Done()
			time.Sleep(300 * time.Millisecond)
			atomic.StoreInt32(&returned, 1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var term *Term
		select {
		case term = <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("never elected")
		}
		lock, err := c.Lock(context.Background(), uniq("closectx-lock"))
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = c.CloseContext(short)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), "goes on") {
			t.Fatalf("CloseContext with 50 ms: %v", err)
		}
		if _, err := c.Lock(context.Background(), "x"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Lock while closing: %v", err)
		}
		long, cancelLong := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancelLong()
		if err := c.CloseContext(long); err != nil {
			t.Fatalf("second CloseContext: %v", err)
		}
		if atomic.LoadInt32(&returned) != 1 {
			t.Fatal("the close completed before the work returned")
		}
		if term.Valid() || lock.Valid() || lock.Reason() != Stopped || c.Status() != SessionClosed {
			t.Fatalf("after the close: work term %v, lock %v %v, status %v", term.Valid(), lock.Valid(),
				lock.Reason(), c.Status())
		}
		select {
		case <-task.ended:
		default:
			t.Fatal("the task was not freed by the close")
		}
		if err := c.CloseContext(long); err != nil {
			t.Fatalf("CloseContext of a closed client: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close after CloseContext: %v", err)
		}
		// Without a deadline, CloseContext is Close.
		d, err := Open(url, testConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := d.CloseContext(context.Background()); err != nil || d.Status() != SessionClosed {
			t.Fatalf("CloseContext(Background): %v %v", err, d.Status())
		}
	})
}

// The config's event sink sees the first SESSION_OPENED, which a sink set
// after open can miss; SetOnEvent replaces it.
func TestEventSinkFromTheConfig(t *testing.T) {
	for i := 0; i < 5; i++ {
		var mu sync.Mutex
		var first, second []EventType
		cfg := testConfig()
		cfg.OnEvent = func(e Event) { mu.Lock(); first = append(first, e.Type); mu.Unlock() }
		c := openWith(t, "memory://"+uniq("sink"), cfg)
		eventually(t, "SESSION_OPENED", func() bool { mu.Lock(); defer mu.Unlock(); return len(first) > 0 })
		if err := c.SetOnEvent(func(e Event) { mu.Lock(); second = append(second, e.Type); mu.Unlock() }); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if first[0] != EventSessionOpened || first[0].String() != "SESSION_OPENED" {
			t.Fatalf("first event %v of %v", first[0], first)
		}
		if len(second) == 0 || second[len(second)-1] != EventSessionClosed {
			t.Fatalf("the replaced sink saw %v (the first %v)", second, first)
		}
		for _, e := range first {
			if e == EventSessionClosed {
				t.Fatalf("the replaced sink saw SESSION_CLOSED: %v", first)
			}
		}
		mu.Unlock()
	}
}

// A Go executor runs the client's callbacks; one that refuses a task does
// not get it.
func TestExecutor(t *testing.T) {
	var submitted int32
	cfg := testConfig()
	cfg.Executor = func(run func()) error {
		atomic.AddInt32(&submitted, 1)
		go run()
		return nil
	}
	c := openWith(t, "memory://"+uniq("executor"), cfg)
	elected := make(chan *Term, 1)
	e, err := c.Elect(uniq("executor"), Listener{OnElected: func(t *Term) { elected <- t }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-elected:
	case <-time.After(20 * time.Second):
		t.Fatal("OnElected never ran on the executor")
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if atomic.LoadInt32(&submitted) < 2 { // OnElected, OnRevoked and the stop's done
		t.Fatalf("%d tasks submitted", submitted)
	}
	_ = e.Close()
}

// Config.Duration and Config.Number read what the library makes of a
// configuration, derived defaults included.
func TestConfigValues(t *testing.T) {
	cfg := &Config{LeaseDuration: 1200 * time.Millisecond}
	if d, err := cfg.Duration("session.renew-interval"); err != nil || d != 400*time.Millisecond {
		t.Fatalf("renew interval %v %v", d, err)
	}
	if v, err := cfg.Number("session.drift"); err != nil || v != 0.01 {
		t.Fatalf("drift %v %v", v, err)
	}
	if _, err := cfg.Duration("session.drift"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Duration of a number: %v", err)
	}
}
