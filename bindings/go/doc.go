// Package simba is the Go binding of libsimba: distributed leases and leader
// election on Redis, PostgreSQL, ZooKeeper and memory://, with fencing tokens.
//
// One Client per process holds one session on the backend; through it the
// process takes locks (Lock, TryLock, WithLock), contends in elections (Elect
// with a Listener, Election.Await), runs work only while it leads (RunWhileLeader,
// LeaderTask, Schedule) and shares partitions with its peers (JoinGroup).
// Each period of ownership is a *Term: a name, a fencing token to pass with
// every write to the protected resource, and a validity computed from the
// local monotonic clock (Valid, Remaining, EnsureValid, Done). Operators'
// views: Observe (who holds a name, as a channel), Metrics (Prometheus
// text), Snapshot, Inspect.
//
//	c, err := simba.Open("redis://127.0.0.1:6379", nil)
//	...
//	defer c.Close()
//	term, err := c.Lock(ctx, "report")
//	...
//	defer term.Unlock()
//	if err := term.EnsureValid(2 * time.Second); err != nil { ... }
//	store.Write(batch, term.Token())
//
// Every call that waits takes a context.Context (Close has CloseContext): a
// cancelled context ends the wait (with an error matching both ErrCanceled and context.Canceled, or
// ErrTimeout and context.DeadlineExceeded), never the session. Errors are
// *Error values carrying the library's code and detail; compare them with
// errors.Is (ErrBusy, ErrTimeout, ErrClosed, ErrState, ErrTermExpired, ...).
// A string with a NUL byte (a name, a URL, a config value) is ErrInvalid,
// never cut short on its way into C. The names of reasons, statuses, events
// and codes (String) come from libsimba (1.3 or newer).
//
// Callbacks (Listener, leader work, Config.OnEvent, Config.Logger) run on
// library threads. A panic in one is recovered and passed to Config.OnError;
// it never crosses into C. Callback state is kept alive (runtime/cgo.Handle)
// exactly until the library's lifetime contract says nothing calls it again.
// Leader work gets a context cancelled the moment its term is revoked; the
// lease is released only after the work returned (handover order).
//
// Building: the package asks pkg-config for an installed libsimba (simba.pc).
// In libsimba's source tree, CMake builds it with -tags simba_intree and
// CGO_CFLAGS / CGO_LDFLAGS pointing at the build tree (see README.md).
package simba
