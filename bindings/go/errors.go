package simba

/*
#include <simba.h>
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
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

// String is the code's name from the library (simba_code_name): "EINVAL",
// "ETIMEDOUT", ...; a code this library does not know prints as
// "UNKNOWN(-42)".
func (c Code) String() string { return libName(C.GoString(C.simba_code_name(C.int(c))), int(c)) }

// Text is the library's description of the code (simba_strerror), with the
// number for a code it does not know.
func (c Code) Text() string {
	if C.GoString(C.simba_code_name(C.int(c))) == "UNKNOWN" {
		return "unknown error " + strconv.Itoa(int(c))
	}
	return C.GoString(C.simba_strerror(C.int(c)))
}

// libName keeps the number of a value the library has no name for (a newer
// library's, or a wrong one).
func libName(name string, v int) string {
	if name == "UNKNOWN" {
		return "UNKNOWN(" + strconv.Itoa(v) + ")"
	}
	return name
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
		return fmt.Sprintf("simba: %s: %s", e.Op, e.Code.Text())
	}
	return fmt.Sprintf("simba: %s: %s: %s", e.Op, e.Code.Text(), e.Message)
}

// Is reports whether target is a *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns the cause (ctx.Err()), if any.
func (e *Error) Unwrap() error { return e.Err }

// noNUL refuses a string that would be cut at a NUL byte on its way into C:
// an ErrInvalid that says which string and where.
func noNUL(op, what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return &Error{Code: CodeInvalid, Op: op, Message: fmt.Sprintf("%s contains a NUL byte at index %d", what, i)}
	}
	return nil
}

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
