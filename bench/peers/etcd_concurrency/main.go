// etcd_concurrency_peer: etcd's own Go `concurrency` package (Debian's
// golang-etcd-server-dev, etcd 3.4's clientv3/concurrency) measured with the
// definitions of bench/simba_lock_bench.c, Simba's side of the side-by-side
// (issue 38; scripts/bench.sh --backend etcd runs both in alternating rounds).
//
// Build offline, in GOPATH mode (no module proxy):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= go build -o etcd_concurrency_peer ./bench/peers/etcd_concurrency
//
// Usage: etcd_concurrency_peer cycle|handover|failover|hold --endpoint 127.0.0.1:PORT
// [--n N] [--warmup N] [--lease-ms MS] [--gap-ms MS] [--name NAME]
//
//	cycle     one session, N x Mutex.Lock + Mutex.Unlock of one free name
//	handover  two clients and sessions: A holds, B is blocked in Lock (gap ms
//	          after it started); the time from A's Unlock call to B's Lock
//	          returning; N times
//	failover  a holder process (this program, mode hold) locks; a waiter here
//	          is blocked in Lock; the holder is killed with SIGKILL 200 ms + a
//	          uniform random part of the lease after it locked; the time from
//	          the kill to the waiter's Lock returning; N times
//
// The session TTL is whole seconds: --lease-ms rounded up (2000 -> TTL 2, as
// Simba's etcd backend rounds its lease). One JSON line per run on stdout.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

var (
	endpoint = flag.String("endpoint", "127.0.0.1:2379", "etcd client endpoint host:port")
	n        = flag.Int("n", 0, "measured iterations (default: cycle 1000, handover 100, failover 3)")
	warmup   = flag.Int("warmup", 100, "unmeasured cycles first (handover: a tenth)")
	leaseMs  = flag.Int64("lease-ms", 2000, "session lease; the TTL is this rounded up to seconds")
	gapMs    = flag.Int("gap-ms", 25, "handover: how long the waiter is blocked before the release")
	name     = flag.String("name", "", "lock name (default: the mode)")
	mode     string
)

func fatal(what string, err error) {
	fmt.Fprintf(os.Stderr, "etcd_concurrency_peer: %s: %v\n", what, err)
	os.Exit(1)
}

func ttl() int { return int((*leaseMs + 999) / 1000) }

func open() (*clientv3.Client, *concurrency.Session) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fatal("clientv3.New", err)
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(ttl()))
	if err != nil {
		fatal("NewSession", err)
	}
	return c, s
}

func prefix() string { return "/simba-peer-bench/" + *name }

// Nearest rank, as bench_util.c's bench_summarize.
func rank(v []time.Duration, p float64) float64 {
	k := int(math.Ceil(p / 100 * float64(len(v))))
	if k < 1 {
		k = 1
	}
	if k > len(v) {
		k = len(v)
	}
	return float64(v[k-1].Nanoseconds()) / 1e3
}

func report(v []time.Duration) {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	var sum time.Duration
	for _, d := range v {
		sum += d
	}
	mean := 0.0
	if len(v) > 0 {
		mean = float64(sum.Nanoseconds()) / 1e3 / float64(len(v))
	}
	fmt.Printf("{\"library\":\"etcd-concurrency\",\"mode\":\"%s\",\"lease_ms\":%d,\"ttl_s\":%d,\"n\":%d,"+
		"\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"min_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f}\n",
		mode, *leaseMs, ttl(), len(v), rank(v, 50), rank(v, 90), rank(v, 99), rank(v, 0), rank(v, 100), mean)
}

func cycle() []time.Duration {
	c, s := open()
	defer c.Close()
	m := concurrency.NewMutex(s, prefix())
	ctx := context.Background()
	var out []time.Duration
	for i := 0; i < *warmup+*n; i++ {
		t0 := time.Now()
		if err := m.Lock(ctx); err != nil {
			fatal("Lock", err)
		}
		if err := m.Unlock(ctx); err != nil {
			fatal("Unlock", err)
		}
		if d := time.Since(t0); i >= *warmup {
			out = append(out, d)
		}
	}
	s.Close()
	return out
}

// waitLock runs m.Lock on a goroutine; the channel gets the time it returned.
func waitLock(m *concurrency.Mutex) chan time.Time {
	done := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Lock(ctx); err != nil {
			fatal("Lock (waiter)", err)
		}
		done <- time.Now()
	}()
	return done
}

func handover() []time.Duration {
	ca, sa := open()
	cb, sb := open()
	defer ca.Close()
	defer cb.Close()
	ma, mb := concurrency.NewMutex(sa, prefix()), concurrency.NewMutex(sb, prefix())
	ctx := context.Background()
	var out []time.Duration
	for i := 0; i < *warmup/10+*n; i++ {
		if err := ma.Lock(ctx); err != nil {
			fatal("Lock", err)
		}
		done := waitLock(mb)
		time.Sleep(time.Duration(*gapMs) * time.Millisecond) // B is blocked by then
		t0 := time.Now()
		if err := ma.Unlock(ctx); err != nil {
			fatal("Unlock", err)
		}
		t1 := <-done
		if err := mb.Unlock(ctx); err != nil {
			fatal("Unlock (waiter)", err)
		}
		if i >= *warmup/10 {
			out = append(out, t1.Sub(t0))
		}
	}
	sa.Close()
	sb.Close()
	return out
}

func spawnHolder() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "hold", "--endpoint", *endpoint, "--name", *name,
		"--lease-ms", fmt.Sprint(*leaseMs))
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fatal("StdoutPipe", err)
	}
	if err := cmd.Start(); err != nil {
		fatal("start the holder", err)
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "held") {
		fatal("the holder did not lock", err)
	}
	return cmd
}

func failover() []time.Duration {
	c, s := open()
	defer c.Close()
	m := concurrency.NewMutex(s, prefix())
	ctx := context.Background()
	rand.Seed(int64(os.Getpid()))
	var out []time.Duration
	for i := 0; i < *n; i++ {
		holder := spawnHolder()
		done := waitLock(m)
		// A random point of a lease's span, as simba_lock_bench: uniform
		// against the client's keep-alives (every TTL / 3 rounded up to its
		// 500 ms send loop: 1 s at TTL 2).
		time.Sleep(200*time.Millisecond + time.Duration(rand.Int63n(*leaseMs))*time.Millisecond)
		t0 := time.Now()
		if err := holder.Process.Kill(); err != nil { // SIGKILL, our own child
			fatal("kill", err)
		}
		holder.Wait()
		t1 := <-done
		if err := m.Unlock(ctx); err != nil {
			fatal("Unlock", err)
		}
		out = append(out, t1.Sub(t0))
	}
	s.Close()
	return out
}

func hold() {
	_, s := open()
	if err := concurrency.NewMutex(s, prefix()).Lock(context.Background()); err != nil {
		fatal("Lock", err)
	}
	fmt.Println("held")
	select {} // until killed
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: etcd_concurrency_peer cycle|handover|failover|hold [flags]")
		os.Exit(2)
	}
	mode = os.Args[1]
	flag.CommandLine.Parse(os.Args[2:])
	if *name == "" {
		*name = mode
	}
	if *n <= 0 {
		*n = map[string]int{"cycle": 1000, "failover": 3}[mode]
		if *n == 0 {
			*n = 100
		}
	}
	switch mode {
	case "cycle":
		report(cycle())
	case "handover":
		report(handover())
	case "failover":
		report(failover())
	case "hold":
		hold()
	default:
		fmt.Fprintln(os.Stderr, "etcd_concurrency_peer: mode: cycle, handover, failover or hold")
		os.Exit(2)
	}
}
