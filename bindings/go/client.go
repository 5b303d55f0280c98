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
	// thread model does not fit goroutines.
	Options map[string]string

	// OnEvent receives session events, one at a time, in order, on a library
	// thread. It must not block for long.
	OnEvent func(Event)
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

func (s SessionStatus) String() string {
	switch s {
	case SessionOpening:
		return "OPENING"
	case SessionLive:
		return "LIVE"
	case SessionSuspended:
		return "SUSPENDED"
	case SessionClosed:
		return "CLOSED"
	}
	return "UNKNOWN"
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

func (t EventType) String() string {
	switch t {
	case EventSessionOpened:
		return "SESSION_OPENED"
	case EventSessionLive:
		return "SESSION_LIVE"
	case EventSessionSuspended:
		return "SESSION_SUSPENDED"
	case EventSessionExpired:
		return "SESSION_EXPIRED"
	case EventSessionClosed:
		return "SESSION_CLOSED"
	case EventSessionLeaseShortened:
		return "SESSION_LEASE_SHORTENED"
	}
	return "UNKNOWN"
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

// sinkState is the Go state of a client's event sink and logger.
type sinkState struct {
	onEvent func(Event)
	logger  func(LogLevel, string)
	report  func(error)
}

func (s *sinkState) event(e Event) {
	defer guard(s.report, "OnEvent")
	s.onEvent(e)
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
	sinks  cgo.Handle // 0 without OnEvent/Logger; deleted after Close

	ownMu sync.Mutex
	owned map[interface{ Close() error }]struct{} // open elections and tasks

	qmu    sync.Mutex
	queues map[string]*lockQueue // Lock calls waiting, per name (lock.go)
}

// own keeps an election or task reachable until it is closed (by its own
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
	k, fk := cstr(key)
	defer fk()
	v, fv := cstr(value)
	defer fv()
	return call("config "+key, func(m **C.char) C.int { return C.s_config_set(cfg, k, v, m) })
}

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
			if err := setKey(cfg, kv.key, strconv.FormatInt(kv.d.Milliseconds(), 10)+"ms"); err != nil {
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
	if c.Logger != nil {
		if err := call("config logger", func(m **C.char) C.int {
			return C.s_config_set_logger(cfg, C.uintptr_t(sinks), C.int(c.LogLevel), m)
		}); err != nil {
			return err
		}
	}
	return call("config", func(m **C.char) C.int { return C.s_config_validate(cfg, m) })
}

// Open opens a client on a backend URL: "memory://NAME" (in-process),
// "redis://[user:pass@]host:port[/db][?prefix=simba]", "postgresql://...",
// "zookeeper://host:port[,...]/chroot". It returns at once; the session opens
// in the background (WaitLive waits for it). cfg may be nil.
func Open(url string, cfg *Config) (*Client, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	cl := &Client{report: cfg.OnError}
	if cl.report == nil {
		cl.report = defaultReport
	}
	if cfg.OnEvent != nil || cfg.Logger != nil {
		cl.sinks = cgo.NewHandle(&sinkState{onEvent: cfg.OnEvent, logger: cfg.Logger, report: cl.report})
	}
	fail := func(err error) (*Client, error) {
		if cl.sinks != 0 {
			cl.sinks.Delete()
		}
		return nil, err
	}
	var ccfg *C.simba_config_t
	if rc := C.simba_config_new(&ccfg); rc != 0 {
		return fail(&Error{Code: Code(rc), Op: "Open"})
	}
	defer C.simba_config_free(ccfg)
	if err := buildConfig(ccfg, cfg, cl.sinks); err != nil {
		return fail(err)
	}
	u, fu := cstr(url)
	defer fu()
	var out *C.simba_client_t
	if err := call("Open", func(m **C.char) C.int { return C.s_client_open(&out, u, ccfg, m) }); err != nil {
		return fail(err)
	}
	cl.c = out
	if cfg.OnEvent != nil {
		if err := call("Open", func(m **C.char) C.int {
			return C.s_client_on_event(cl.c, C.uintptr_t(cl.sinks), m)
		}); err != nil {
			C.simba_client_close(cl.c)
			return fail(err)
		}
	}
	runtime.SetFinalizer(cl, (*Client).finalize)
	return cl, nil
}

// finalize closes a client nobody closed, without blocking the finalizer
// goroutine (simba_client_close_async); its sinks handle is left to leak,
// since the asynchronous close may still call it.
func (c *Client) finalize() {
	if c.c != nil {
		C.s_client_close_async(c.c, nil)
		c.c = nil
	}
}

// with runs f with the live handle, or fails with ErrClosed.
func (c *Client) with(op string, f func(h *C.simba_client_t) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.c == nil {
		return &Error{Code: CodeClosed, Op: op, Message: "the client is closed"}
	}
	return f(c.c)
}

// Close stops every election, lock and task (terms revoked with STOPPED, in
// handover order), closes the session (the backend frees every lease at once)
// and frees the client. After it returns no callback of the client runs; when
// the backend does not answer it sends the close again until the session's
// local deadline (ADR 0030), so it may wait up to that long.
// Called from a callback or leader work it starts the close and returns.
// Closing twice is a no-op.
func (c *Client) Close() error {
	c.mu.Lock()
	h := c.c
	c.c = nil
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	runtime.SetFinalizer(c, nil)
	err := call("Close", func(m **C.char) C.int { return C.s_client_close(h, m) })
	// Everything is stopped now: free the elections and tasks left open.
	c.ownMu.Lock()
	left := make([]interface{ Close() error }, 0, len(c.owned))
	for x := range c.owned {
		left = append(left, x)
	}
	c.ownMu.Unlock()
	for _, x := range left {
		_ = x.Close()
	}
	if c.sinks != 0 {
		c.sinks.Delete()
	}
	return err
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
	var out string
	err := c.with("Snapshot", func(h *C.simba_client_t) error {
		var msg *C.char
		s := C.s_client_snapshot(h, &msg)
		if s == nil {
			return errorFrom("Snapshot", int(CodeClosed), msg)
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
	u, fu := cstr(url)
	defer fu()
	var out *C.char
	if err := call("BackendSchema", func(m **C.char) C.int { return C.s_backend_schema(u, &out, m) }); err != nil {
		return "", err
	}
	defer C.simba_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// Version is the loaded library's version ("1.2.0").
func Version() string { return C.GoString(C.simba_version_string()) }

func init() {
	// The lifetime contract this binding relies on is that of 1.2.
	if v := uint(C.simba_version()); v < 0x010200 || v>>16 != 1 {
		panic(fmt.Sprintf("simba: libsimba %s is too old or incompatible: this binding needs 1.x, x >= 2", Version()))
	}
}
