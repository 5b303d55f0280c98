package simba_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	simba "github.com/simba-project/simba/bindings/go"
)

// Open a client, take a lock, pass its fencing token with each write, unlock.
func Example() {
	c, err := simba.Open("memory://example", &simba.Config{LeaseDuration: 3 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := c.Lock(ctx, "report")
	if err != nil {
		panic(err)
	}
	defer term.Unlock()
	fmt.Println(term.Name(), term.Token() > 0, term.Valid())
	// Output: report true true
}

// Lock returns an owned term; after Unlock it reads invalid, with its reason.
func ExampleClient_Lock() {
	c, err := simba.Open("memory://example-lock", nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := c.Lock(ctx, "report")
	if err != nil {
		panic(err)
	}
	fmt.Println(term.Name(), term.Valid())
	_ = term.Unlock()
	<-term.Done()
	fmt.Println(term.Valid(), term.Reason())
	// Output:
	// report true
	// false STOPPED
}

// TryLock fails with ErrBusy while someone else holds the lock.
func ExampleClient_TryLock() {
	a, _ := simba.Open("memory://example-try", nil)
	defer a.Close()
	b, _ := simba.Open("memory://example-try", nil)
	defer b.Close()
	ctx := context.Background()
	held, err := a.Lock(ctx, "daily-export")
	if err != nil {
		panic(err)
	}
	_, err = b.TryLock(ctx, "daily-export")
	fmt.Println(errors.Is(err, simba.ErrBusy))
	_ = held.Unlock()
	t, err := b.TryLock(ctx, "daily-export")
	fmt.Println(err == nil, t.Token() > held.Token())
	_ = t.Unlock()
	// Output:
	// true
	// true true
}

// An election reports each term with OnElected, then exactly one OnRevoked.
func ExampleClient_Elect() {
	c, _ := simba.Open("memory://example-elect", nil)
	defer c.Close()
	elected := make(chan *simba.Term, 1)
	revoked := make(chan simba.RevokeReason, 1)
	e, err := c.Elect("scheduler", simba.Listener{
		OnElected: func(t *simba.Term) { elected <- t },
		OnRevoked: func(t *simba.Term, why simba.RevokeReason) { revoked <- why },
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	t := <-elected
	fmt.Println("leading", t.Name())
	_ = e.StepDown(context.Background(), time.Minute) // drain this node for a minute
	fmt.Println(<-revoked)
	// Output:
	// leading scheduler
	// STEPPED_DOWN
}

// Run work only while leading; its context ends the moment the term is
// revoked, and the lease is released only after the work returned.
func ExampleClient_RunWhileLeader() {
	c, _ := simba.Open("memory://example-work", nil)
	defer c.Close()
	ctx, stop := context.WithCancel(context.Background())
	err := c.RunWhileLeader(ctx, "nightly", func(wctx context.Context, t *simba.Term) error {
		fmt.Println("leading with a token:", t.Token() > 0)
		stop() // e.g. a shutdown signal: RunWhileLeader stops in handover order
		<-wctx.Done()
		fmt.Println("revoked:", t.Reason())
		return nil
	})
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// leading with a token: true
	// revoked: STOPPED
	// true
}

// Check the term before each step of leader work.
func ExampleTerm_EnsureValid() {
	c, _ := simba.Open("memory://example-ensure", &simba.Config{LeaseDuration: 3 * time.Second})
	defer c.Close()
	t, _ := c.Lock(context.Background(), "ledger")
	defer t.Unlock()
	fmt.Println(t.EnsureValid(100 * time.Millisecond))
	err := t.EnsureValid(time.Hour) // the step would outlast the lease
	fmt.Println(errors.Is(err, simba.ErrTermExpired))
	// Output:
	// <nil>
	// true
}

// A partition group spreads "orders.0" .. "orders.3" over its members.
func ExampleClient_JoinGroup() {
	c, _ := simba.Open("memory://example-group", nil)
	defer c.Close()
	var mu sync.Mutex
	seen := map[string]bool{}
	all := make(chan struct{})
	g, err := c.JoinGroup("orders", 4, func(ctx context.Context, t *simba.Term) error {
		mu.Lock()
		seen[t.Name()] = true
		if len(seen) == 4 {
			close(all)
		}
		mu.Unlock()
		<-ctx.Done()
		return nil
	})
	if err != nil {
		panic(err)
	}
	<-all // the only member leads every partition
	_ = g.Close()
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println(names)
	// Output: [orders.0 orders.1 orders.2 orders.3]
}

// Await blocks until this process leads, without callbacks.
func ExampleElection_Await() {
	c, err := simba.Open("memory://example-await", nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	e, err := c.Elect("scheduler", simba.Listener{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := e.Await(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("leading", term.Name(), term.Token() > 0)
	// Output: leading scheduler true
}
