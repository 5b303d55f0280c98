package simba

import (
	"context"
	"os"
	"testing"
	"time"
)

func benchURL() string {
	if u := os.Getenv("SIMBA_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "memory://go-bench"
}

// BenchmarkLockCycle: one Lock + Unlock through the Go API.
func BenchmarkLockCycle(b *testing.B) {
	c, err := Open(benchURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.WaitLive(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := c.Lock(ctx, "go.bench.cycle")
		if err != nil {
			b.Fatal(err)
		}
		if err := t.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockCycleC: the same cycle as a C loop of simba_lock_acquire +
// simba_lock_release, in this process and run: the baseline of the ratio.
func BenchmarkLockCycleC(b *testing.B) {
	c, err := Open(benchURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLive(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if err := cLockCycles(c, "go.bench.cycle.c", b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLockCycleCtx: the Go cycle with a cancellable context (the wait
// runs on a helper goroutine so that a cancel returns at once).
func BenchmarkLockCycleCtx(b *testing.B) {
	c, err := Open(benchURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.WaitLive(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := c.Lock(ctx, "go.bench.cycle.ctx")
		if err != nil {
			b.Fatal(err)
		}
		if err := t.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockCycleRatio: the Go cycle and the C cycle on one client,
// interleaved in rounds of 100 so both see the same server, reported as
// go-ns/cycle, c-ns/cycle and their ratio (target: <= 1.05 on Redis); with
// context.Background() ("background") and with a cancellable context
// ("cancellable", whose wait runs on a helper goroutine).
func BenchmarkLockCycleRatio(b *testing.B) {
	for _, mode := range []string{"background", "cancellable"} {
		mode := mode
		b.Run(mode, func(b *testing.B) { lockCycleRatio(b, mode == "cancellable") })
	}
}

func lockCycleRatio(b *testing.B, cancellable bool) {
	c, err := Open(benchURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if cancellable {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	if err := c.WaitLive(ctx); err != nil {
		b.Fatal(err)
	}
	var goTime, cTime time.Duration
	goRound := func(n int) {
		start := time.Now()
		for i := 0; i < n; i++ {
			t, err := c.Lock(ctx, "go.bench.ratio")
			if err != nil {
				b.Fatal(err)
			}
			if err := t.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
		goTime += time.Since(start)
	}
	cRound := func(n int) {
		start := time.Now()
		if err := cLockCycles(c, "go.bench.ratio", n); err != nil {
			b.Fatal(err)
		}
		cTime += time.Since(start)
	}
	b.ResetTimer()
	for round, done := 0, 0; done < b.N; round++ {
		n := 100
		if b.N-done < n {
			n = b.N - done
		}
		if round%2 == 0 { // alternate which goes first
			goRound(n)
			cRound(n)
		} else {
			cRound(n)
			goRound(n)
		}
		done += n
	}
	b.ReportMetric(float64(goTime.Nanoseconds())/float64(b.N), "go-ns/cycle")
	b.ReportMetric(float64(cTime.Nanoseconds())/float64(b.N), "c-ns/cycle")
	b.ReportMetric(float64(goTime)/float64(cTime), "go/c")
}
