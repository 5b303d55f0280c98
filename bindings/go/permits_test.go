package simba

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// must(t, what)(call()) is call's term, or a fatal error naming what.
func must(t *testing.T, what string) func(*Term, error) *Term {
	return func(term *Term, err error) *Term {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return term
	}
}

func unlockAll(t *testing.T, terms ...*Term) {
	t.Helper()
	for _, x := range terms {
		if err := x.Unlock(); err != nil {
			t.Fatalf("Unlock %s: %v", x, err)
		}
	}
}

// Two permits of size 2 (one client twice): the size holds for everyone,
// tokens increase across permits, another size is refused by name, a lock of
// the name is another resource, a freed permit is the next holder's.
func TestSemaphore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		ctx := context.Background()
		name := uniq("sem")
		p1 := must(t, "permit 1")(a.AcquireSemaphore(ctx, name, 2))
		p2 := must(t, "permit 2")(a.AcquireSemaphore(ctx, name, 2))
		if p1.Kind() != TermSemaphore || p1.Kind().String() != "SEMAPHORE" || p1.Name() != name {
			t.Fatalf("permit: kind %v name %q", p1.Kind(), p1.Name())
		}
		if p1.Token() == 0 || p2.Token() <= p1.Token() || !p1.Valid() || !p2.Valid() {
			t.Fatalf("tokens %d %d, valid %v %v", p1.Token(), p2.Token(), p1.Valid(), p2.Valid())
		}
		for _, c := range []*Client{a, b} {
			if _, err := c.TryAcquireSemaphore(ctx, name, 2); !errors.Is(err, ErrBusy) {
				t.Fatalf("TryAcquireSemaphore when full: %v", err)
			}
		}
		_, err := b.AcquireSemaphore(ctx, name, 3)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "has 2 permits, not 3") {
			t.Fatalf("another size: %v", err)
		}
		l := must(t, "lock of the same name")(b.TryLock(ctx, name))
		if l.Kind() != TermLock {
			t.Fatalf("lock kind %v", l.Kind())
		}
		unlockAll(t, l)
		// A waiter gets the permit released under it, with a higher token.
		got := make(chan *Term, 1)
		go func() {
			p, err := b.AcquireSemaphore(ctx, name, 2)
			if err != nil {
				t.Errorf("waiting permit: %v", err)
			}
			got <- p
		}()
		time.Sleep(50 * time.Millisecond)
		unlockAll(t, p1)
		p3 := <-got
		if p3 == nil || p3.Token() <= p2.Token() {
			t.Fatalf("permit after the release: %v", p3)
		}
		if p1.Valid() || p1.Reason() != Stopped {
			t.Fatalf("released permit: valid %v reason %v", p1.Valid(), p1.Reason())
		}
		unlockAll(t, p2, p3)
		// No holder left: the next first holder fixes another size.
		unlockAll(t, must(t, "size 5")(b.TryAcquireSemaphore(ctx, name, 5)))
		// A wait bounded by its context ends with it.
		for i := 0; i < 2; i++ {
			must(t, "fill")(a.TryAcquireSemaphore(ctx, name, 2))
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if _, err := b.AcquireSemaphore(short, name, 2); !errors.Is(err, ErrTimeout) ||
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("bounded wait: %v", err)
		}
	})
}

// Readers share the name and carry the write epoch; a writer excludes
// everyone and moves the epoch to its own token; a waiting writer holds new
// readers back.
func TestRWLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, url string) {
		a, b := open(t, url), open(t, url)
		ctx := context.Background()
		name := uniq("rw")
		r1 := must(t, "read 1")(a.RLock(ctx, name))
		r2 := must(t, "read 2")(b.RLock(ctx, name))
		if r1.Kind() != TermRead || r1.Kind().String() != "READ" || r1.Token() != 0 || r2.Token() != 0 {
			t.Fatalf("reads: kind %v tokens %d %d", r1.Kind(), r1.Token(), r2.Token())
		}
		if _, err := b.TryWLock(ctx, name); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryWLock while read: %v", err)
		}
		unlockAll(t, r1, r2)
		w := must(t, "write")(a.TryWLock(ctx, name))
		if w.Kind() != TermWrite || w.Kind().String() != "WRITE" || w.Token() == 0 {
			t.Fatalf("write: kind %v token %d", w.Kind(), w.Token())
		}
		if _, err := b.TryRLock(ctx, name); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryRLock while written: %v", err)
		}
		if _, err := b.TryWLock(ctx, name); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryWLock while written: %v", err)
		}
		unlockAll(t, w)
		r := must(t, "read after the write")(b.TryRLock(ctx, name))
		if r.Token() != w.Token() {
			t.Fatalf("read epoch %d, last writer %d", r.Token(), w.Token())
		}
		// A writer waiting behind the read holds new readers back, and gets
		// the name when the read goes.
		got := make(chan *Term, 1)
		go func() {
			x, err := a.WLock(ctx, name)
			if err != nil {
				t.Errorf("waiting write: %v", err)
			}
			got <- x
		}()
		eventually(t, "the writer's intent", func() bool {
			x, err := b.TryRLock(ctx, name)
			if err == nil {
				unlockAll(t, x)
			}
			return errors.Is(err, ErrBusy)
		})
		unlockAll(t, r)
		w2 := <-got
		if w2 == nil || w2.Token() <= w.Token() {
			t.Fatalf("write after the read: %v", w2)
		}
		unlockAll(t, w2)
		// A cancelled wait ends at once, the session lives on.
		held := must(t, "write")(b.TryWLock(ctx, name))
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := a.RLock(cctx, name); !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v", err)
		}
		unlockAll(t, held)
		unlockAll(t, must(t, "read after the cancel")(a.RLock(ctx, name)))
	})
}

// Kinds and names from the library, arguments the library refuses, and a
// closed client's permits revoked.
func TestPermitKindsAndArguments(t *testing.T) {
	for k, want := range map[TermKind]string{TermElection: "ELECTION", TermLock: "LOCK",
		TermSemaphore: "SEMAPHORE", TermRead: "READ", TermWrite: "WRITE", 42: "UNKNOWN(42)"} {
		if k.String() != want {
			t.Errorf("TermKind(%d) = %q, want %q", int(k), k.String(), want)
		}
	}
	c := open(t, backends(t)["memory"])
	ctx := context.Background()
	if _, err := c.AcquireSemaphore(ctx, "pool", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("size 0: %v", err)
	}
	if _, err := c.TryAcquireSemaphore(ctx, "pool", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("try size 0: %v", err)
	}
	if _, err := c.RLock(ctx, "doc\x00x"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("NUL in a name: %v", err)
	}
	if _, err := c.TryWLock(ctx, "bad name"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	e, err := c.Elect(uniq("kind"), Listener{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Await(ctx)
	if err != nil || term.Kind() != TermElection {
		t.Fatalf("election term: %v %v", term, err)
	}
	e.Close()
	p := must(t, "permit")(c.TryAcquireSemaphore(ctx, "pool", 1))
	w := must(t, "write")(c.TryWLock(ctx, "pool")) // another namespace
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Term{p, w} {
		if x.Valid() || x.Reason() != Stopped {
			t.Fatalf("%v after Close: valid %v reason %v", x.Kind(), x.Valid(), x.Reason())
		}
	}
	if _, err := c.TryRLock(ctx, "pool"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
