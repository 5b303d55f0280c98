package simba

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"
)

func benchURL() string {
	if u := os.Getenv("SIMBA_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "memory://go-bench"
}

// benchClient opens a live client on benchURL, closed when b ends.
func benchClient(b *testing.B) *Client {
	c, err := Open(benchURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if err := c.WaitLive(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

// lockCycles runs n Lock + Unlock cycles of the Go API.
func lockCycles(b *testing.B, c *Client, ctx context.Context, name string, n int) {
	for i := 0; i < n; i++ {
		t, err := c.Lock(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if err := t.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockCycle: one Lock + Unlock through the Go API. Its ns/op is the
// statistic simba_cycle_bench gives for C (the figure scripts/bench-bindings.sh
// divides it by), as the other bindings' benches do: after b.N/10 cycles of
// warmup, the median of the means of five rounds of b.N/5 cycles. mean-ns/op
// is the mean of all b.N cycles.
func BenchmarkLockCycle(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	const name = "go.bench.cycle"
	lockCycles(b, c, ctx, name, b.N/10)
	rounds := 5
	if b.N < rounds {
		rounds = 1
	}
	means := make([]float64, 0, rounds)
	var total time.Duration
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		start := time.Now()
		lockCycles(b, c, ctx, name, n)
		took := time.Since(start)
		total += took
		means = append(means, float64(took.Nanoseconds())/float64(n))
	}
	b.StopTimer()
	sort.Float64s(means)
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "mean-ns/op")
	b.ReportMetric(means[rounds/2], "ns/op")
}

// BenchmarkLockCycleC: the same cycle as a C loop of simba_lock_acquire +
// simba_lock_release, in this process and run: the baseline of the ratio.
func BenchmarkLockCycleC(b *testing.B) {
	c := benchClient(b)
	b.ResetTimer()
	if err := cLockCycles(c, "go.bench.cycle.c", b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLockCycleCtx: the Go cycle with a cancellable context (a first
// attempt of 2 ms on the caller's goroutine, then the wait on a helper
// goroutine so that a cancel returns at once).
func BenchmarkLockCycleCtx(b *testing.B) {
	c := benchClient(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	lockCycles(b, c, ctx, "go.bench.cycle.ctx", b.N)
}

// BenchmarkLockCycleRatio: the Go cycle and the C cycle on one client,
// interleaved in rounds of 100 so both see the same server, reported as
// go-ns/cycle, c-ns/cycle and their ratio (target: <= 1.05 on Redis); with
// context.Background() ("background") and with a cancellable context
// ("cancellable": a first attempt on the caller's goroutine, then the wait
// on a helper goroutine).
func BenchmarkLockCycleRatio(b *testing.B) {
	for _, mode := range []string{"background", "cancellable"} {
		mode := mode
		b.Run(mode, func(b *testing.B) { lockCycleRatio(b, mode == "cancellable") })
	}
}

func lockCycleRatio(b *testing.B, cancellable bool) {
	c := benchClient(b)
	ctx := context.Background()
	if cancellable {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	var goTime, cTime time.Duration
	goRound := func(n int) {
		start := time.Now()
		lockCycles(b, c, ctx, "go.bench.ratio", n)
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
