package simba

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Every backend the suite has: memory:// always, and the real servers that
// scripts/test.sh starts (SIMBA_TEST_*_URL); an unset one is skipped.
func backends(t *testing.T) map[string]string {
	b := map[string]string{"memory": "memory://go-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	for name, env := range map[string]string{
		"redis": "SIMBA_TEST_REDIS_URL", "postgres": "SIMBA_TEST_POSTGRES_URL", "zookeeper": "SIMBA_TEST_ZOOKEEPER_URL",
	} {
		if u := os.Getenv(env); u != "" {
			b[name] = u
		} else {
			t.Logf("%s unset: %s skipped", env, name)
		}
	}
	return b
}

var seq int64

func uniq(prefix string) string {
	return fmt.Sprintf("go.%s.%d.%d", prefix, os.Getpid(), atomic.AddInt64(&seq, 1))
}

func testConfig() *Config {
	return &Config{LeaseDuration: 1500 * time.Millisecond, RenewInterval: 500 * time.Millisecond}
}

func open(t *testing.T, url string) *Client {
	t.Helper()
	return openWith(t, url, testConfig())
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func forEachBackend(t *testing.T, f func(t *testing.T, url string)) {
	for name, url := range backends(t) {
		url := url
		t.Run(name, func(t *testing.T) { f(t, url) })
	}
}

func TestErrors(t *testing.T) {
	_, err := Open("nosuch://x", nil)
	if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad scheme: %v", err)
	}
	_, err = Open("memory://x", &Config{LeaseDuration: time.Second, RenewInterval: 800 * time.Millisecond})
	var se *Error
	if !errors.As(err, &se) || se.Code != CodeInvalid || !strings.Contains(se.Message, "renew") {
		t.Fatalf("config rule: %v", err)
	}
	_, err = Open("memory://x", &Config{Options: map[string]string{"no.such.key": "1"}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no.such.key") {
		t.Fatalf("unknown key: %v", err)
	}
	_, err = Open("memory://x", &Config{Options: map[string]string{"loop.mode": "external"}})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("external mode: %v", err)
	}
	c, err := Open("memory://"+uniq("closed"), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Lock(context.Background(), "x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock after Close: %v", err)
	}
	if c.Status() != SessionClosed {
		t.Fatalf("status %v", c.Status())
	}
	cl := open(t, "memory://"+uniq("names"))
	if _, err := cl.Lock(context.Background(), "bad name!"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad lease name: %v", err)
	}
}

func TestLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		name := uniq("lock")
		ctx := context.Background()
		ta, err := a.Lock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if ta.Name() != name || ta.Token() == 0 || !ta.Valid() || ta.Remaining() <= 0 {
			t.Fatalf("term %s %d %v %v", ta.Name(), ta.Token(), ta.Valid(), ta.Remaining())
		}
		if err := ta.EnsureValid(0); err != nil {
			t.Fatal(err)
		}
		if err := ta.EnsureValid(time.Hour); !errors.Is(err, ErrTermExpired) {
			t.Fatalf("EnsureValid(1h): %v", err)
		}
		if _, err := b.TryLock(ctx, name); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock while held: %v", err)
		}
		// A cancelled context cancels the wait, not the session.
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = b.Lock(short, name)
		cancel()
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Lock with an expiring context: %v", err)
		}
		if b.Status() != SessionLive {
			t.Fatalf("session after a cancelled wait: %v", b.Status())
		}
		done := ta.Done()
		if err := a.Unlock(ta); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after Unlock")
		}
		if ta.Valid() || ta.Remaining() != 0 {
			t.Fatal("an unlocked term is still valid")
		}
		// An ended term stays readable; only EnsureValid refuses it.
		if ta.Name() != name || ta.Token() == 0 || ta.Reason() != Stopped || ta.Reason().String() != "STOPPED" {
			t.Fatalf("unlocked term: %s %d %v", ta.Name(), ta.Token(), ta.Reason())
		}
		if err := ta.EnsureValid(0); !errors.Is(err, ErrTermExpired) {
			t.Fatalf("EnsureValid of an unlocked term: %v", err)
		}
		if err := ta.Unlock(); err != nil {
			t.Fatalf("second Unlock: %v", err)
		}
		// Lock, not TryLock: the Lock cancelled above returned at its deadline,
		// but its call may still wait in the library for a moment, take the
		// lease at the release and give it back (waitTerm unlocks it). Lock
		// waits behind that call in this client's queue; TryLock would race
		// it and could read Busy.
		wait, cancelWait := context.WithTimeout(ctx, 5*time.Second)
		tb, err := b.Lock(wait, name)
		cancelWait()
		if err != nil {
			t.Fatal(err)
		}
		if tb.Token() <= ta.Token() {
			t.Fatalf("tokens %d then %d", ta.Token(), tb.Token())
		}
		if err := tb.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

// A lock term dropped without Unlock releases its lock (the lifetime contract).
func TestReleasedLockTermFreesTheName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		free := func(name string) func() bool {
			return func() bool {
				tb, err := b.TryLock(context.Background(), name)
				if err != nil {
					return false
				}
				_ = tb.Unlock()
				return true
			}
		}
		// Release without Unlock.
		name := uniq("drop")
		ta, err := a.Lock(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		ta.Release()
		if ta.Valid() || ta.Remaining() != 0 {
			t.Fatal("a released lock term reads valid")
		}
		eventually(t, "the released name to be free", free(name))
		// A term nobody references: its finalizer releases the lock.
		lost := uniq("lost")
		func() {
			if _, err := a.Lock(context.Background(), lost); err != nil {
				t.Fatal(err)
			}
		}()
		if _, err := b.TryLock(context.Background(), lost); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock of a held name: %v", err)
		}
		eventually(t, "the lost term's name to be free", func() bool {
			runtime.GC()
			return free(lost)()
		})
		// Unlocked terms hand their guard to the next term: dropping them
		// and collecting them never releases a term that is still held.
		for i := 0; i < 20; i++ {
			old, err := a.Lock(context.Background(), uniq("reuse"))
			if err != nil {
				t.Fatal(err)
			}
			if err := old.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		kept := uniq("kept")
		held, err := a.Lock(context.Background(), kept)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // for the finalizers to run
		}
		if !held.Valid() || free(kept)() {
			t.Fatal("a held term was released by the collection of unlocked ones")
		}
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

type recorder struct {
	mu      sync.Mutex
	elected []*Term
	revoked map[*Term]RevokeReason
	events  []string
}

func newRecorder() *recorder { return &recorder{revoked: map[*Term]RevokeReason{}} }

func (r *recorder) listener() Listener {
	return Listener{
		OnElected: func(t *Term) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.elected = append(r.elected, t)
			r.events = append(r.events, "E")
		},
		OnRevoked: func(t *Term, why RevokeReason) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if _, dup := r.revoked[t]; dup {
				panic("two OnRevoked for one term")
			}
			r.revoked[t] = why
			r.events = append(r.events, "R")
		},
	}
}

func (r *recorder) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.elected) > len(r.revoked)
}

func (r *recorder) last() *Term {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.elected[len(r.elected)-1]
}

func (r *recorder) reason(t *Term) (RevokeReason, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	why, ok := r.revoked[t]
	return why, ok
}

func TestElectionFailoverAndStop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		name := uniq("elect")
		ra, rb := newRecorder(), newRecorder()
		ea, err := a.Elect(name, ra.listener())
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "a to lead", ra.leading)
		if _, err := a.Elect(name, Listener{}); !errors.Is(err, ErrState) {
			t.Fatalf("second Elect of one name: %v", err)
		}
		eb, err := b.Elect(name, rb.listener())
		if err != nil {
			t.Fatal(err)
		}
		first := ra.last()
		// Stop returns after the last OnRevoked; the release lets b in.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if got, err := ea.Await(ctx); err != nil || got != first {
			t.Fatalf("Await of the leader: %v %v, want %v", got, err, first)
		}
		awaited := make(chan *Term, 1)
		go func() { // b waits for its term while a leads
			got, err := eb.Await(ctx)
			if err != nil {
				t.Errorf("Await of b: %v", err)
			}
			awaited <- got
		}()
		if err := ea.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if why, ok := ra.reason(first); !ok || why != Stopped {
			t.Fatalf("a's term revoked %v %v", why, ok)
		}
		if first.Valid() || first.Reason() != Stopped {
			t.Fatal("a stopped term reads valid")
		}
		eventually(t, "b to lead", rb.leading)
		if second := rb.last(); second.Token() <= first.Token() {
			t.Fatalf("tokens %d then %d", first.Token(), second.Token())
		}
		if got := <-awaited; got != rb.last() || got.Token() <= first.Token() {
			t.Fatalf("b's Await returned %v, b was elected with %v", got, rb.last())
		}
		if _, err := ea.Await(ctx); !errors.Is(err, ErrState) {
			t.Fatalf("Await of a stopped election: %v", err)
		}
		ea.Close()
		// Step down: b gives the lease up and does not contend for the cooldown.
		held := rb.last()
		if err := eb.StepDown(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if why, _ := rb.reason(held); why != SteppedDown {
			t.Fatalf("step-down reason %v", why)
		}
		time.Sleep(200 * time.Millisecond)
		if rb.leading() {
			t.Fatal("re-elected during the cooldown")
		}
		short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancelShort()
		if _, err := eb.Await(short); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await during the cooldown: %v", err)
		}
		eb.Close()
		eb.Close() // idempotent
		if _, err := eb.Await(ctx); !errors.Is(err, ErrState) {
			t.Fatalf("Await of a closed election: %v", err)
		}
	})
}

func TestRunWhileLeaderCancelsWorkOnRevocation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a := open(t, url)
		name := uniq("work")
		var runs, cancelled int32
		tokens := make(chan uint64, 4)
		task, err := a.LeaderTask(name, func(ctx context.Context, term *Term) error {
			atomic.AddInt32(&runs, 1)
			tokens <- term.Token()
			<-ctx.Done() // revoked: the context is cancelled at once
			if term.Valid() {
				t.Errorf("context cancelled while the term is valid (reason %v)", term.Reason())
				return nil
			}
			atomic.AddInt32(&cancelled, 1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		first := <-tokens
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		began := time.Now()
		if err := task.StepDown(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// The work's context is cancelled at the revocation, not at the
		// term's deadline: the step-down does not wait out the lease.
		if took := time.Since(began); took > testConfig().LeaseDuration/2 {
			t.Fatalf("StepDown took %v: the work was not cancelled at the revocation", took)
		}
		// The handover order: the step-down completes after the work returned.
		if atomic.LoadInt32(&cancelled) != 1 {
			t.Fatalf("work not finished when StepDown returned (%d)", atomic.LoadInt32(&cancelled))
		}
		select {
		case second := <-tokens:
			if second <= first {
				t.Fatalf("tokens %d then %d", first, second)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("not re-elected after the step-down")
		}
		task.Close()
		if atomic.LoadInt32(&runs) != atomic.LoadInt32(&cancelled) {
			t.Fatalf("runs %d, returned %d after Close", atomic.LoadInt32(&runs), atomic.LoadInt32(&cancelled))
		}
	})
}

func TestRunWhileLeaderReturnsWithTheContext(t *testing.T) {
	forEachBackend(t, testRunWhileLeaderReturns)
}

func testRunWhileLeaderReturns(t *testing.T, url string) {
	a := open(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	go func() { <-started; cancel() }()
	err := a.RunWhileLeader(ctx, uniq("rwl"), func(wctx context.Context, term *Term) error {
		once.Do(func() { close(started) })
		<-wctx.Done()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunWhileLeader: %v", err)
	}

	// A client closed under a RunWhileLeader with a context never done: it
	// returns ErrClosed, after its work returned.
	b, err := Open(url, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{})
	var workDone int32
	errc := make(chan error, 1)
	go func() {
		var once sync.Once
		errc <- b.RunWhileLeader(context.Background(), uniq("rwlc"), func(wctx context.Context, term *Term) error {
			once.Do(func() { close(leading) })
			<-wctx.Done()
			atomic.StoreInt32(&workDone, 1)
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("never elected")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("RunWhileLeader after the client's Close: %v", err)
		}
		if atomic.LoadInt32(&workDone) != 1 {
			t.Fatal("RunWhileLeader returned before its work")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunWhileLeader did not return after the client's Close")
	}
}

func TestSchedule(t *testing.T) {
	forEachBackend(t, testSchedule)
}

func testSchedule(t *testing.T, url string) {
	a := open(t, url)
	var runs int32
	task, err := a.Schedule(uniq("sched"), 0, 20*time.Millisecond, func(ctx context.Context, term *Term) error {
		if err := term.EnsureValid(0); err != nil {
			return err
		}
		atomic.AddInt32(&runs, 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "three runs", func() bool { return atomic.LoadInt32(&runs) >= 3 })
	task.Close()
	n := atomic.LoadInt32(&runs)
	time.Sleep(100 * time.Millisecond)
	if atomic.LoadInt32(&runs) != n {
		t.Fatal("a run after Close")
	}
	if _, err := a.Schedule(uniq("sched"), 0, 0, func(context.Context, *Term) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("period 0: %v", err)
	}
}

func TestGroupSpreadsPartitions(t *testing.T) {
	forEachBackend(t, testGroup)
}

func testGroup(t *testing.T, url string) {
	group := uniq("group")
	var mu sync.Mutex
	held := map[string]int{} // partition -> member
	work := func(member int) WorkFunc {
		return func(ctx context.Context, term *Term) error {
			mu.Lock()
			held[term.Name()] = member
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			if held[term.Name()] == member {
				delete(held, term.Name())
			}
			mu.Unlock()
			return nil
		}
	}
	count := func(member int) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, m := range held {
			if m == member {
				n++
			}
		}
		return n
	}
	t1, err := open(t, url).JoinGroup(group, 4, work(1))
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	eventually(t, "member 1 to hold all 4", func() bool { return count(1) == 4 })
	t2, err := open(t, url).JoinGroup(group, 4, work(2))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 partitions each", func() bool { return count(1) == 2 && count(2) == 2 })
	t2.Close()
	eventually(t, "member 1 to take the orphans", func() bool { return count(1) == 4 })
}

func TestPanicInACallbackIsRecovered(t *testing.T) {
	var panics int32
	cfg := testConfig()
	cfg.OnError = func(err error) {
		var p *PanicError
		if errors.As(err, &p) && p.Value == "boom" && strings.Contains(p.Where, "OnElected") {
			atomic.AddInt32(&panics, 1)
		}
	}
	forEachBackend(t, func(t *testing.T, url string) { testPanic(t, url, cfg, &panics) })
}

func testPanic(t *testing.T, url string, cfg *Config, panics *int32) {
	atomic.StoreInt32(panics, 0)
	c, err := Open(url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	revoked := make(chan RevokeReason, 1)
	e, err := c.Elect(uniq("panic"), Listener{
		OnElected: func(*Term) { panic("boom") },
		OnRevoked: func(_ *Term, why RevokeReason) { revoked <- why },
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the panic to be reported", func() bool { return atomic.LoadInt32(panics) == 1 })
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if why := <-revoked; why != Stopped {
		t.Fatalf("reason %v", why)
	}
	e.Close()
}

// Close from inside a callback does not wait for itself, and the election is
// freed once its stop completed.
func TestElectionCloseFromItsOwnCallback(t *testing.T) {
	forEachBackend(t, testCloseFromCallback)
}

func testCloseFromCallback(t *testing.T, url string) {
	c := open(t, url)
	var e *Election
	ready := make(chan struct{})
	closed := make(chan struct{})
	var err error
	e, err = c.Elect(uniq("selfclose"), Listener{
		OnElected: func(*Term) { <-ready; e.Close(); close(closed) },
	})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close inside OnElected blocked")
	}
}

func TestSnapshotAndVersion(t *testing.T) {
	c := open(t, "memory://"+uniq("snap"))
	s, err := c.Snapshot()
	if err != nil || !strings.Contains(s, `"session"`) {
		t.Fatalf("snapshot %q %v", s, err)
	}
	if !strings.HasPrefix(Version(), "1.") {
		t.Fatalf("version %s", Version())
	}
}

// realBackends are the servers of the suite (no memory://: it does not cross
// processes).
func realBackends(t *testing.T) map[string]string {
	b := backends(t)
	delete(b, "memory")
	if len(b) == 0 {
		t.Skip("no SIMBA_TEST_*_URL set: the two-process tests need a real backend")
	}
	return b
}

// startChild re-executes this test binary as a second process running mode
// (see TestMain), and returns its first line of output.
func startChild(t *testing.T, mode, url, name string) (*exec.Cmd, io.WriteCloser, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SIMBA_GO_CHILD="+mode, "SIMBA_GO_CHILD_URL="+url, "SIMBA_GO_CHILD_NAME="+name)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child %s said %q (%v)", mode, line, err)
	}
	return cmd, in, strings.TrimSpace(line)
}

func childToken(t *testing.T, line, prefix string) uint64 {
	t.Helper()
	if !strings.HasPrefix(line, prefix+" ") {
		t.Fatalf("child said %q, want %s TOKEN", line, prefix)
	}
	tok, err := strconv.ParseUint(strings.TrimPrefix(line, prefix+" "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Two processes on each real backend. Crash: the child holds a lock and is
// killed with SIGKILL; the parent gets the lock once the child's session
// expired, with a greater token. Clean handover: the child leads with
// RunWhileLeader; told to stop, it cancels its context, its work returns, the
// lease is released, and the parent's election is elected with a greater
// token, well before a lease duration would have passed.
func TestTwoProcessHandover(t *testing.T) {
	for bname, url := range realBackends(t) {
		url := url
		t.Run(bname+"/crash", func(t *testing.T) {
			name := uniq("handover.crash")
			cmd, _, line := startChild(t, "lock", url, name)
			tok := childToken(t, line, "LOCKED")
			c := open(t, url)
			if _, err := c.TryLock(context.Background(), name); !errors.Is(err, ErrBusy) {
				t.Fatalf("TryLock while the child holds it: %v", err)
			}
			_ = cmd.Process.Kill()
			killed := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			term, err := c.Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer term.Unlock()
			if term.Token() <= tok {
				t.Fatalf("child token %d, then %d", tok, term.Token())
			}
			t.Logf("failover after SIGKILL: %v", time.Since(killed))
		})
		t.Run(bname+"/paused", func(t *testing.T) {
			// The holder is paused (SIGSTOP) past its lease: the parent takes
			// the lock over; resumed, the holder sees its term revoked, and its
			// late Unlock does not free the parent's lease (the token fences it).
			name := uniq("handover.paused")
			cmd, stdin, line := startChild(t, "pause", url, name)
			tok := childToken(t, line, "LOCKED")
			c := open(t, url)
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			term, err := c.Lock(ctx, name)
			_ = cmd.Process.Signal(syscall.SIGCONT)
			if err != nil {
				t.Fatal(err)
			}
			defer term.Unlock()
			if term.Token() <= tok {
				t.Fatalf("child token %d, then %d", tok, term.Token())
			}
			if _, err := io.WriteString(stdin, "resumed\n"); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
			if !term.Valid() {
				t.Fatal("the new holder's term was revoked by the old holder's Unlock")
			}
			d := open(t, url)
			if _, err := d.TryLock(context.Background(), name); !errors.Is(err, ErrBusy) {
				t.Fatalf("TryLock after the old holder's Unlock: %v (the lease was freed)", err)
			}
		})
		t.Run(bname+"/clean", func(t *testing.T) {
			name := uniq("handover.clean")
			cmd, stdin, line := startChild(t, "leader", url, name)
			tok := childToken(t, line, "LEADING")
			c := open(t, url)
			terms := make(chan *Term, 1)
			e, err := c.Elect(name, Listener{OnElected: func(t *Term) { terms <- t }})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			time.Sleep(testConfig().RenewInterval) // the parent is a candidate now
			select {
			case <-terms:
				t.Fatal("elected while the child leads")
			default:
			}
			asked := time.Now()
			if _, err := io.WriteString(stdin, "stop\n"); err != nil {
				t.Fatal(err)
			}
			select {
			case term := <-terms:
				if term.Token() <= tok {
					t.Fatalf("child token %d, then %d", tok, term.Token())
				}
				if took := time.Since(asked); took >= testConfig().LeaseDuration {
					t.Fatalf("clean handover took %v: the lease was not released", took)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("not elected after the child stopped")
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
		})
	}
}

// TestMain runs the child modes of TestTwoProcessHandover.
func TestMain(m *testing.M) {
	switch os.Getenv("SIMBA_GO_CHILD") {
	case "":
		os.Exit(m.Run())
	case "lock":
		childHoldsLock()
	case "leader":
		childLeads()
	case "pause":
		childPaused()
	}
}

func childFail(err error) {
	fmt.Println("ERR", err)
	os.Exit(1)
}

func childHoldsLock() {
	c, err := Open(os.Getenv("SIMBA_GO_CHILD_URL"), testConfig())
	if err != nil {
		childFail(err)
	}
	t, err := c.Lock(context.Background(), os.Getenv("SIMBA_GO_CHILD_NAME"))
	if err != nil {
		childFail(err)
	}
	fmt.Printf("LOCKED %d\n", t.Token())
	time.Sleep(time.Minute) // killed by the parent
	os.Exit(2)
}

func childLeads() {
	c, err := Open(os.Getenv("SIMBA_GO_CHILD_URL"), testConfig())
	if err != nil {
		childFail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the parent writes a line: stop
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		cancel()
	}()
	err = c.RunWhileLeader(ctx, os.Getenv("SIMBA_GO_CHILD_NAME"), func(wctx context.Context, t *Term) error {
		fmt.Printf("LEADING %d\n", t.Token())
		<-wctx.Done()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		childFail(err)
	}
	if err := c.Close(); err != nil {
		childFail(err)
	}
	os.Exit(0)
}

// childPaused holds a lock, is paused by the parent past its lease and then
// resumed: its term must read revoked (deadline, expiry or take-over), and
// Unlock of the revoked term must succeed without touching the new holder.
func childPaused() {
	c, err := Open(os.Getenv("SIMBA_GO_CHILD_URL"), testConfig())
	if err != nil {
		childFail(err)
	}
	t, err := c.Lock(context.Background(), os.Getenv("SIMBA_GO_CHILD_NAME"))
	if err != nil {
		childFail(err)
	}
	done := t.Done()
	fmt.Printf("LOCKED %d\n", t.Token())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // resumed
	if t.Valid() {
		childFail(fmt.Errorf("term valid after a pause past the lease"))
	}
	if err := t.EnsureValid(0); !errors.Is(err, ErrTermExpired) {
		childFail(fmt.Errorf("EnsureValid after the pause: %v", err))
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		childFail(fmt.Errorf("Done not closed after the pause"))
	}
	switch r := t.Reason(); r {
	case DeadlinePassed, SessionExpired, TakenOver:
	default:
		childFail(fmt.Errorf("reason %v after the pause", r))
	}
	if err := t.Unlock(); err != nil {
		childFail(fmt.Errorf("Unlock of the revoked term: %v", err))
	}
	if err := c.Close(); err != nil {
		childFail(err)
	}
	os.Exit(0)
}
