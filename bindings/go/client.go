package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log"
	"runtime"
	"runtime/cgo"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// Config is the seed's SimbaConfig. Zero fields keep the library's defaults:
// lease 15 s, renew lease/3, drift 0.01, margin 50 ms, retry jitter renew/2,
// min backoff 100 ms. Open checks the seed's rules (renew × 2 ≤ lease, ...).
// A key whose wanted value is zero (a margin, drift or retry jitter of 0) is
// set through Options ("session.margin": "0"), which is applied last.
// Durations are passed in whole milliseconds.
type Config struct {
	LeaseDuration   time.Duration
	RenewInterval   time.Duration
	Drift           float64 // in [0, 0.5); 0 keeps the default 0.01
	Margin          time.Duration
	RetryJitter     time.Duration
	MinBackoff      time.Duration
	ClientName      string // shown in snapshots and in the backend's status
	CallbackThreads int    // size of the callback pool, 1..64 (default 2)
	// Options sets any other key of simba_config_set ("callback.executor":
	// "pool" or "direct", ...). "loop.mode" = "external" is refused: its host
	// thread model does not fit goroutines (README.md says why).
	Options map[string]string

	// OnEvent receives session events, one at a time, in order, on a library
	// thread, from the first SESSION_OPENED on (it is the config's sink,
	// simba_config_set_event_sink). It must not block for long.
	// Client.SetOnEvent replaces it later.
	OnEvent func(Event)
	// Executor, when set, runs the client's callbacks (listeners, event
	// sink, dones, observers) instead of the library's pool
	// (simba_config_set_executor): it is called on a library thread with each
	// callback to run and must arrange run() exactly once, later, on any
	// goroutine, without blocking: `func(run func()) error { go run(); return
	// nil }`, or a worker's queue. The library keeps the callbacks of one
	// election one at a time and in order. A non-nil error (or a panic)
	// rejects the task: run is not called (a rejected OnElected makes the
	// election step down for one lease duration).
	Executor func(run func()) error
	// Logger receives the library's log lines at or above LogLevel, on the
	// loop thread: it must not block.
	Logger   func(level LogLevel, msg string)
	LogLevel LogLevel
	// OnError receives what the binding cannot return to a caller: a
	// *PanicError recovered from a callback or leader work (a panic never
	// crosses into C), a *WorkError returned by leader work. Default: log it.
	OnError func(error)
}

// SessionStatus is the session's state.
type SessionStatus int

const (
	SessionOpening   SessionStatus = 0 // no session yet, or a new one after the last ended
	SessionLive      SessionStatus = 1 // the last keep-alive succeeded
	SessionSuspended SessionStatus = 2 // the last keep-alive failed; the deadline has not passed
	SessionClosed    SessionStatus = 3 // closed
)

// String is the status's name from the library (simba_session_status_name):
// "OPENING", "LIVE", "SUSPENDED", "CLOSED"; "UNKNOWN(7)" for one it does not
// know.
func (s SessionStatus) String() string {
	return libName(C.GoString(C.simba_session_status_name(C.simba_session_status_t(s))), int(s))
}

// EventType is the kind of a session event.
type EventType int

const (
	EventSessionOpened         EventType = 0 // a new session id was granted
	EventSessionLive           EventType = 1 // a keep-alive succeeded after a failure
	EventSessionSuspended      EventType = 2 // a keep-alive failed
	EventSessionExpired        EventType = 3 // the session ended (expired, or deadline passed)
	EventSessionClosed         EventType = 4 // the client closed its session
	EventSessionLeaseShortened EventType = 5 // the backend granted less than the lease: renewing faster
)

// String is the event's name from the library (simba_event_name):
// "SESSION_OPENED", "SESSION_LIVE", ...; "UNKNOWN(9)" for one it does not
// know (a newer library's event, which reaches OnEvent all the same).
func (t EventType) String() string {
	return libName(C.GoString(C.simba_event_name(C.simba_event_type_t(t))), int(t))
}

// Event is one session event; Detail is its JSON detail.
type Event struct {
	Type   EventType
	Detail string
}

// LogLevel is the level of a library log line.
type LogLevel int

const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
)

func (l LogLevel) String() string {
	switch l {
	case LogDebug:
		return "DEBUG"
	case LogInfo:
		return "INFO"
	case LogWarn:
		return "WARN"
	case LogError:
		return "ERROR"
	}
	return "UNKNOWN"
}

// sinkState is the Go state of a client's event sink, logger and executor.
type sinkState struct {
	mu       sync.Mutex
	onEvent  func(Event) // replaced by SetOnEvent
	logger   func(LogLevel, string)
	executor func(run func()) error
	report   func(error)
}

func (s *sinkState) event(e Event) {
	s.mu.Lock()
	f := s.onEvent
	s.mu.Unlock()
	if f != nil {
		defer guard(s.report, "OnEvent")
		f(e)
	}
}

// submit hands one library task to the Go executor: 0 accepted, else
// refused (an error or a panic, which goes to Config.OnError).
func (s *sinkState) submit(run, arg unsafe.Pointer) (rc C.int) {
	rc = 1
	defer guard(s.report, "Executor")
	if err := s.executor(func() { C.s_run(run, arg) }); err == nil {
		rc = 0
	}
	return rc
}

func (s *sinkState) log(l LogLevel, msg string) {
	defer guard(s.report, "Logger")
	s.logger(l, msg)
}

// Client is one session on one backend (one per process is the rule). It is
// safe for concurrent use. Close it when done; a Client that becomes
// unreachable without Close (and without open elections or tasks, which keep
// it reachable) is closed by a finalizer, without waiting.
type Client struct {
	// mu is held for reading across every C call that uses c, and for
	// writing by Close, so the handle is never freed under a call. Blocking
	// C calls are made in bounded slices so that Close never waits long.
	mu     sync.RWMutex
	c      *C.simba_client_t
	report func(error)
	sinks  cgo.Handle    // the event sink's, logger's and executor's state; deleted after Close
	closed chan struct{} // closed once a Close completed and freed what the client owned

	ownMu sync.Mutex
	owned map[interface{ Close() error }]struct{} // open elections, tasks, observers

	qmu      sync.Mutex
	queues   map[string]*lockQueue // Lock calls waiting, per name (lock.go)
	idle     *lockQueue            // the last queue to empty, still in queues
	idleName string                // its name
}

// own keeps an election, task or observer reachable until it is closed (by its own
// Close or the client's): the client owns what it started, so one the caller
// dropped keeps running and is freed at the client's Close.
func (c *Client) own(x interface{ Close() error }) {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	if c.owned == nil {
		c.owned = map[interface{ Close() error }]struct{}{}
	}
	c.owned[x] = struct{}{}
}

func (c *Client) disown(x interface{ Close() error }) {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	delete(c.owned, x)
}

// slice bounds each blocking C call, so that a cancelled context or a Close
// is noticed within it.
const slice = 200 * time.Millisecond

func defaultReport(err error) { log.Print(err) }

func setKey(cfg *C.simba_config_t, key, value string) error {
	op := "config " + key
	if err := noNUL(op, "config key "+strconv.Quote(key), key); err != nil {
		return err
	}
	if err := noNUL(op, "the value of config key "+key, value); err != nil {
		return err
	}
	k, fk := cstr(key)
	defer fk()
	v, fv := cstr(value)
	defer fv()
	return call(op, func(m **C.char) C.int { return C.s_config_set(cfg, k, v, m) })
}

// buildConfig sets c on cfg; sinks is the handle of the client's sinkState
// (0 when only reading values: Config.Duration, Config.Number).
func buildConfig(cfg *C.simba_config_t, c *Config, sinks cgo.Handle) error {
	durations := []struct {
		key string
		d   time.Duration
	}{
		{"session.lease-duration", c.LeaseDuration},
		{"session.renew-interval", c.RenewInterval},
		{"session.margin", c.Margin},
		{"session.retry-jitter", c.RetryJitter},
		{"session.min-backoff", c.MinBackoff},
	}
	for _, kv := range durations {
		if kv.d < 0 {
			return &Error{Code: CodeInvalid, Op: "Open", Message: kv.key + " is negative"}
		}
		if kv.d != 0 {
			k, fk := cstr(kv.key)
			err := call("config "+kv.key, func(m **C.char) C.int {
				return C.s_config_set_ms(cfg, k, ms(kv.d.Milliseconds()), m)
			})
			fk()
			if err != nil {
				return err
			}
		}
	}
	if c.Drift != 0 {
		if err := setKey(cfg, "session.drift", strconv.FormatFloat(c.Drift, 'g', -1, 64)); err != nil {
			return err
		}
	}
	if c.ClientName != "" {
		if err := setKey(cfg, "client.name", c.ClientName); err != nil {
			return err
		}
	}
	if c.CallbackThreads != 0 {
		if err := setKey(cfg, "callback.threads", strconv.Itoa(c.CallbackThreads)); err != nil {
			return err
		}
	}
	for k, v := range c.Options {
		if k == "loop.mode" && v != "thread" {
			return &Error{Code: CodeUnsupported, Op: "Open",
				Message: "the Go binding runs clients in THREAD mode only"}
		}
		if err := setKey(cfg, k, v); err != nil {
			return err
		}
	}
	if sinks != 0 {
		h := C.uintptr_t(sinks)
		if c.Logger != nil {
			if err := call("config logger", func(m **C.char) C.int {
				return C.s_config_set_logger(cfg, h, C.int(c.LogLevel), m)
			}); err != nil {
				return err
			}
		}
		if c.OnEvent != nil {
			if err := call("config event sink", func(m **C.char) C.int {
				return C.s_config_set_event_sink(cfg, h, m)
			}); err != nil {
				return err
			}
		}
		if c.Executor != nil {
			if err := call("config executor", func(m **C.char) C.int {
				return C.s_config_set_executor(cfg, h, m)
			}); err != nil {
				return err
			}
		}
	}
	return call("config", func(m **C.char) C.int { return C.s_config_validate(cfg, m) })
}

// withConfig builds cfg into a library config for f.
func withConfig(op string, cfg *Config, sinks cgo.Handle, f func(*C.simba_config_t) error) error {
	var ccfg *C.simba_config_t
	if rc := C.simba_config_new(&ccfg); rc != 0 {
		return &Error{Code: Code(rc), Op: op}
	}
	defer C.simba_config_free(ccfg)
	if err := buildConfig(ccfg, cfg, sinks); err != nil {
		return err
	}
	return f(ccfg)
}

// Duration is the value the library gives the duration key (
// "session.renew-interval", ...) with this configuration, derived defaults
// included (simba_config_get_ms): renew-interval and retry-jitter follow the
// lease duration while they are not set. It fails as Open would on a
// configuration that breaks the seed's rules.
func (c *Config) Duration(key string) (time.Duration, error) {
	var out C.int64_t
	err := c.get("Config.Duration", key, func(cfg *C.simba_config_t, k *C.char, m **C.char) C.int {
		return C.s_config_get_ms(cfg, k, &out, m)
	})
	return time.Duration(out) * time.Millisecond, err
}

// Number is the value of a numeric key that is not a duration
// ("session.drift", "callback.threads") with this configuration
// (simba_config_get_double).
func (c *Config) Number(key string) (float64, error) {
	var out C.double
	err := c.get("Config.Number", key, func(cfg *C.simba_config_t, k *C.char, m **C.char) C.int {
		return C.s_config_get_double(cfg, k, &out, m)
	})
	return float64(out), err
}

func (c *Config) get(op, key string, f func(cfg *C.simba_config_t, k *C.char, m **C.char) C.int) error {
	if err := noNUL(op, "config key", key); err != nil {
		return err
	}
	return withConfig(op, c, 0, func(cfg *C.simba_config_t) error {
		k, fk := cstr(key)
		defer fk()
		return call(op, func(m **C.char) C.int { return f(cfg, k, m) })
	})
}

// Open opens a client on a backend URL: "memory://NAME" (in-process),
// "redis://[user:pass@]host:port[/db][?prefix=simba]", "postgresql://...",
// "zookeeper://host:port[,...]/chroot". It returns at once; the session opens
// in the background (WaitLive waits for it). cfg may be nil.
func Open(url string, cfg *Config) (*Client, error) {
	if err := noNUL("Open", "backend URL", url); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = &Config{}
	}
	cl := &Client{report: cfg.OnError, closed: make(chan struct{})}
	if cl.report == nil {
		cl.report = defaultReport
	}
	cl.sinks = cgo.NewHandle(&sinkState{onEvent: cfg.OnEvent, logger: cfg.Logger, executor: cfg.Executor,
		report: cl.report})
	u, fu := cstr(url)
	defer fu()
	err := withConfig("Open", cfg, cl.sinks, func(ccfg *C.simba_config_t) error {
		var out *C.simba_client_t
		err := call("Open", func(m **C.char) C.int { return C.s_client_open(&out, u, ccfg, m) })
		cl.c = out
		return err
	})
	if err != nil {
		cl.sinks.Delete()
		return nil, err
	}
	runtime.SetFinalizer(cl, (*Client).finalize)
	return cl, nil
}

// finalize closes a client nobody closed, without blocking the finalizer
// goroutine (simba_client_close_async); its sinks handle is left to leak,
// since the asynchronous close may still call it.
func (c *Client) finalize() {
	if c.c != nil {
		C.s_client_close_async(c.c, 0, nil)
		c.c = nil
	}
}

func closedError(op string) error {
	return &Error{Code: CodeClosed, Op: op, Message: "the client is closed"}
}

// with runs f with the live handle, or fails with ErrClosed.
func (c *Client) with(op string, f func(h *C.simba_client_t) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return closedError(op)
	}
	return f(c.c)
}

// Close stops every election, lock, task and observer (terms revoked with
// STOPPED, in handover order), closes the session (the backend frees every
// lease at once) and frees the client. After it returns no callback of the
// client runs. When the backend does not answer it sends the close again until
// the session's local deadline (ADR 0030), so it may wait up to that long
// (CloseContext bounds the wait). Called from a callback or leader work it
// starts the close and returns. Closing twice is a no-op (the second call does
// not wait for the first: CloseContext does).
func (c *Client) Close() error {
	h := c.detach()
	if h == nil {
		return nil
	}
	err := call("Close", func(m **C.char) C.int { return C.s_client_close(h, m) })
	c.afterClose()
	return err
}

// CloseContext is Close bounded by ctx: it starts the close on a library
// thread (simba_client_close_async) and returns nil once it completed, as
// Close does, or ctx's error (ErrCanceled / ErrTimeout) when ctx is done
// first: the close goes on, and frees what the client owns when it
// completes. A call while another close is under way waits for that one.
// With a context that is never done it is Close. From a callback or leader
// work of this client, do not wait for it (the close completes after the
// callback returned): use Close there, which starts the close and returns.
func (c *Client) CloseContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return c.Close()
	}
	if h := c.detach(); h != nil {
		w := newDoneWaiter()
		if err := w.start("CloseContext", 0, func(dh C.uintptr_t, m **C.char) C.int {
			return C.s_client_close_async(h, dh, m)
		}); err != nil {
			return err // EINVAL: only for an EXTERNAL client, which Open refuses
		}
		go func() {
			<-w.ch // the client's last callback ran and the handle is freed
			c.afterClose()
		}()
	}
	select {
	case <-c.closed:
		return nil
	case <-ctx.Done():
		e := ctxError("CloseContext", ctx).(*Error)
		e.Message += " (the close goes on)"
		return e
	}
}

// detach takes the handle out of c (calls in flight end first: they hold
// c.mu), or returns nil when a close already did.
func (c *Client) detach() *C.simba_client_t {
	c.mu.Lock()
	h := c.c
	c.c = nil
	c.mu.Unlock()
	if h != nil {
		runtime.SetFinalizer(c, nil)
	}
	return h
}

// afterClose frees what the client owned, once the library's close stopped
// it all, and marks the client closed.
func (c *Client) afterClose() {
	c.ownMu.Lock()
	left := make([]interface{ Close() error }, 0, len(c.owned))
	for x := range c.owned {
		left = append(left, x)
	}
	c.ownMu.Unlock()
	for _, x := range left {
		_ = x.Close()
	}
	c.sinks.Delete()
	close(c.closed)
}

// SetOnEvent replaces the event sink (Config.OnEvent) with fn
// (simba_client_on_event); nil stops the delivery. Events already on their
// way may still reach the former sink.
func (c *Client) SetOnEvent(fn func(Event)) error {
	return c.with("SetOnEvent", func(h *C.simba_client_t) error {
		s := c.sinks.Value().(*sinkState)
		s.mu.Lock()
		s.onEvent = fn
		s.mu.Unlock()
		sh := C.uintptr_t(c.sinks)
		if fn == nil {
			sh = 0
		}
		return call("SetOnEvent", func(m **C.char) C.int { return C.s_client_on_event(h, sh, m) })
	})
}

// Status is the session's status; SessionClosed once closed. Never blocks.
func (c *Client) Status() SessionStatus {
	st := SessionClosed
	_ = c.with("Status", func(h *C.simba_client_t) error {
		st = SessionStatus(C.simba_client_status(h))
		return nil
	})
	return st
}

// WaitLive waits until the session is LIVE, ctx is done or the client closes.
func (c *Client) WaitLive(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctxError("WaitLive", ctx)
	}
	deadline, _ := ctx.Deadline()
	gone := make(chan struct{})
	loop := func() error {
		for {
			wait := slice
			if !deadline.IsZero() {
				if left := time.Until(deadline); left < wait {
					wait = left
				}
				if wait < 0 {
					wait = 0
				}
			}
			err := c.with("WaitLive", func(h *C.simba_client_t) error {
				return call("WaitLive", func(m **C.char) C.int {
					return C.s_client_wait_live(h, ms(wait.Milliseconds()), m)
				})
			})
			if err == nil || !errors.Is(err, ErrTimeout) {
				return err
			}
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return &Error{Code: CodeTimeout, Op: "WaitLive", Message: context.DeadlineExceeded.Error(),
					Err: context.DeadlineExceeded}
			}
			select {
			case <-gone:
				return nil
			default:
			}
		}
	}
	if ctx.Done() == nil {
		return loop()
	}
	errc := make(chan error, 1)
	go func() { errc <- loop() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		close(gone)
		return ctxError("WaitLive", ctx)
	}
}

// Snapshot returns the client's JSON snapshot: session (id, status,
// remaining_ms, ...), every election and lock, and counters. Never blocks on
// the backend.
func (c *Client) Snapshot() (string, error) {
	return c.text("Snapshot", func(h *C.simba_client_t, m **C.char) *C.char { return C.s_client_snapshot(h, m) })
}

// Metrics returns the client's metrics in the Prometheus text exposition
// format (0.0.4), for a scrape endpoint: counters (simba_acquires_total,
// simba_terms_total, simba_revocations_total{reason}, ...), histograms and
// gauges, each with the label client (Config.ClientName); the list is in
// docs/observability.md. Never blocks on the backend.
func (c *Client) Metrics() (string, error) {
	return c.text("Metrics", func(h *C.simba_client_t, m **C.char) *C.char { return C.s_client_metrics(h, m) })
}

// text returns the string a shim makes (NULL: its message, as ErrClosed).
func (c *Client) text(op string, get func(h *C.simba_client_t, m **C.char) *C.char) (string, error) {
	var out string
	err := c.with(op, func(h *C.simba_client_t) error {
		var msg *C.char
		s := get(h, &msg)
		if s == nil {
			return errorFrom(op, int(CodeClosed), msg)
		}
		defer C.simba_free(unsafe.Pointer(s))
		out = C.GoString(s)
		return nil
	})
	return out, err
}

// Inspect reads what the backend holds (sessions and leases) for operators:
// one read outside the session that decides nothing. names limits the
// report to those leases (none: every lease the backend knows). It waits
// until ctx's deadline (10 s without one) for the backend; a cancelled ctx
// returns at once (the read goes on in the background and is dropped).
func (c *Client) Inspect(ctx context.Context, names ...string) (string, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if timeout <= 0 || ctx.Err() != nil {
		return "", ctxError("Inspect", ctx)
	}
	if timeout < time.Millisecond {
		timeout = time.Millisecond
	}
	if ctx.Done() == nil {
		return c.inspect(names, timeout)
	}
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.inspect(names, timeout)
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if errors.Is(r.err, ErrTimeout) && ctx.Err() != nil {
			return "", ctxError("Inspect", ctx)
		}
		return r.s, r.err
	case <-ctx.Done():
		return "", ctxError("Inspect", ctx)
	}
}

func (c *Client) inspect(names []string, timeout time.Duration) (string, error) {
	for _, n := range names {
		if err := checkName("Inspect", n); err != nil {
			return "", err
		}
	}
	var out string
	err := c.with("Inspect", func(h *C.simba_client_t) error {
		var arr **C.char
		if len(names) > 0 {
			arr = (**C.char)(C.malloc(C.size_t(len(names)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
			defer C.free(unsafe.Pointer(arr))
			view := unsafe.Slice(arr, len(names))
			for i, n := range names {
				view[i] = C.CString(n)
				defer C.free(unsafe.Pointer(view[i]))
			}
		}
		var js *C.char
		if err := call("Inspect", func(m **C.char) C.int {
			return C.s_client_inspect(h, arr, C.size_t(len(names)), ms(timeout.Milliseconds()), &js, m)
		}); err != nil {
			return err
		}
		defer C.simba_free(unsafe.Pointer(js))
		out = C.GoString(js)
		return nil
	})
	return out, err
}

// BackendSchema returns the DDL the backend of url installs (PostgreSQL),
// for a DBA to review; nothing connects. Other backends: ErrUnsupported.
func BackendSchema(url string) (string, error) {
	if err := noNUL("BackendSchema", "backend URL", url); err != nil {
		return "", err
	}
	u, fu := cstr(url)
	defer fu()
	var out *C.char
	if err := call("BackendSchema", func(m **C.char) C.int { return C.s_backend_schema(u, &out, m) }); err != nil {
		return "", err
	}
	defer C.simba_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// Version is the loaded library's version ("1.5.0").
func Version() string { return C.GoString(C.simba_version_string()) }

// CheckLeaseName checks name against the rule every name-taking call
// applies (simba_lease_name_check): 1-128 characters of [A-Za-z0-9._:-],
// other than "." and "..", and no NUL byte. It returns nil, or an ErrInvalid
// whose message names the rule and the first offending character.
func CheckLeaseName(name string) error { return checkName("CheckLeaseName", name) }

func checkName(op, name string) error {
	return call(op, func(m **C.char) C.int { return C.s_lease_name_check(name, m) })
}

func init() {
	// The names of codes, reasons, statuses and events come from 1.3, every
	// CloseAsync and the observer's close from 1.4 (SIMBA_1.4).
	// The shim links the permit calls of 1.5 (SIMBA_1.5): the loader already
	// refuses an older library.
	if v := uint(C.simba_version()); v < 0x010500 || v>>16 != 1 {
		panic(fmt.Sprintf("simba: libsimba %s is too old or incompatible: this binding needs 1.x, x >= 5", Version()))
	}
}
