package simba

// The C side of the binding (shim.c): one shim per ABI call that returns the
// code and, on failure, a copy of simba_last_error() taken in the same C call,
// and the trampolines that carry callbacks to Go (callbacks.go). Callback user
// data is a runtime/cgo.Handle passed as the ud pointer.
//
// Linking: by default the package asks pkg-config for an installed libsimba
// ("simba.pc"). Built with -tags simba_intree it asks for nothing and takes
// CGO_CFLAGS / CGO_LDFLAGS from the environment (CMake sets them to the build
// tree: -I<repo>/include, -L<libdir> -lsimba -Wl,-rpath,<libdir>).

/*
#cgo !simba_intree pkg-config: simba
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"errors"
	"unsafe"
)

// call runs one shim with a message slot and turns its result into an error.
func call(op string, f func(msg **C.char) C.int) error {
	var msg *C.char
	rc := f(&msg)
	return errorFrom(op, int(rc), msg)
}

func errorFrom(op string, rc int, msg *C.char) error {
	if rc >= 0 {
		return nil
	}
	text := ""
	if msg != nil {
		text = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return &Error{Code: Code(rc), Op: op, Message: text}
}

func cstr(s string) (*C.char, func()) {
	p := C.CString(s)
	return p, func() { C.free(unsafe.Pointer(p)) }
}

func ms(d int64) C.int64_t { return C.int64_t(d) }

// ctxError is the error of a wait that ended because ctx did: ErrTimeout for
// a deadline, ErrCanceled for a cancel; errors.Is also matches ctx.Err().
func ctxError(op string, ctx context.Context) error {
	err := ctx.Err()
	code := CodeCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		code = CodeTimeout
	}
	return &Error{Code: code, Op: op, Message: err.Error(), Err: err}
}
