package simba

import (
	"fmt"
	"runtime/debug"
)

// Code is a Simba error code (SIMBA_E* in simba.h).
type Code int

// The codes of simba.h, pinned to their values.
const (
	CodeInvalid     Code = -1  // bad argument: lease name, URL, config rule
	CodeState       Code = -2  // not allowed now: already started, already stopped
	CodeExpired     Code = -3  // term not valid, or not valid for long enough
	CodeTimeout     Code = -4  // the timeout (context deadline) passed
	CodeBackend     Code = -5  // backend unreachable or answered an error
	CodeClosed      Code = -6  // the client is closed or closing
	CodeNoMemory    Code = -7  // out of memory
	CodeWouldBlock  Code = -8  // a blocking call from a callback
	CodeBusy        Code = -9  // try-lock: held by someone else
	CodeUnsupported Code = -10 // URL scheme or feature not built in
	CodeCanceled    Code = -11 // cancelled: by stop or close, or by the context
)

func (c Code) String() string {
	switch c {
	case CodeInvalid:
		return "invalid argument"
	case CodeState:
		return "not allowed in this state"
	case CodeExpired:
		return "term expired"
	case CodeTimeout:
		return "timed out"
	case CodeBackend:
		return "backend error"
	case CodeClosed:
		return "client closed"
	case CodeNoMemory:
		return "out of memory"
	case CodeWouldBlock:
		return "would block"
	case CodeBusy:
		return "lease held by someone else"
	case CodeUnsupported:
		return "unsupported"
	case CodeCanceled:
		return "canceled"
	}
	return fmt.Sprintf("simba error %d", int(c))
}

// Error is what every failing call returns: the Simba code, the operation and
// the library's detail (simba_last_error, read in the same C call as the
// failure). errors.Is(err, ErrTimeout) compares codes; a wait ended by its
// context also matches ctx.Err() (context.Canceled, context.DeadlineExceeded).
type Error struct {
	Code    Code
	Op      string
	Message string
	Err     error // the cause, when it was not the library: ctx.Err()
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("simba: %s: %s", e.Op, e.Code)
	}
	return fmt.Sprintf("simba: %s: %s: %s", e.Op, e.Code, e.Message)
}

// Is reports whether target is a *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the cause (ctx.Err()), if any.
func (e *Error) Unwrap() error { return e.Err }

// Sentinels for errors.Is.
var (
	ErrInvalid     = &Error{Code: CodeInvalid, Op: "sentinel"}
	ErrState       = &Error{Code: CodeState, Op: "sentinel"}
	ErrTermExpired = &Error{Code: CodeExpired, Op: "sentinel"}
	ErrTimeout     = &Error{Code: CodeTimeout, Op: "sentinel"}
	ErrBackend     = &Error{Code: CodeBackend, Op: "sentinel"}
	ErrClosed      = &Error{Code: CodeClosed, Op: "sentinel"}
	ErrNoMemory    = &Error{Code: CodeNoMemory, Op: "sentinel"}
	ErrWouldBlock  = &Error{Code: CodeWouldBlock, Op: "sentinel"}
	ErrBusy        = &Error{Code: CodeBusy, Op: "sentinel"}
	ErrUnsupported = &Error{Code: CodeUnsupported, Op: "sentinel"}
	ErrCanceled    = &Error{Code: CodeCanceled, Op: "sentinel"}
)

// PanicError is a panic of a user callback or of leader work, recovered by
// the binding (a panic never crosses into C) and passed to Config.OnError.
type PanicError struct {
	Where string      // "OnElected of NAME", "leader work of NAME", ...
	Value interface{} // what was passed to panic
	Stack []byte
}

func (p *PanicError) Error() string { return fmt.Sprintf("simba: %s panicked: %v", p.Where, p.Value) }

// WorkError is an error returned by leader work while its term was still
// valid, passed to Config.OnError.
type WorkError struct {
	Name  string // the lease (partition) name
	Token uint64
	Err   error
}

func (w *WorkError) Error() string {
	return fmt.Sprintf("simba: leader work of %s (token %d): %v", w.Name, w.Token, w.Err)
}

func (w *WorkError) Unwrap() error { return w.Err }

func newPanic(where string, v interface{}) *PanicError {
	return &PanicError{Where: where, Value: v, Stack: debug.Stack()}
}
