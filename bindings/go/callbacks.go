package simba

// The Go ends of the C trampolines in shim.c. Each runs on a library thread
// (the callback pool, the loop thread, or a leader-work thread), recovers any
// panic so that none crosses into C, and finds its Go state through a
// cgo.Handle. A handle is deleted only when the ABI says nothing calls it
// again (docs/bindings-contract.md); lookup still tolerates a deleted one, so
// a callback that races a Close inside a callback is dropped, not a crash.
// (A file with //export may only declare in its preamble.)

/*
#include <simba.h>
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

func lookup(h C.uintptr_t) (v interface{}, ok bool) {
	if h == 0 {
		return nil, false
	}
	defer func() {
		if recover() != nil {
			v, ok = nil, false
		}
	}()
	return cgo.Handle(h).Value(), true
}

// guard is deferred by every trampoline: it turns a panic into a *PanicError
// for report (which may itself panic: that is swallowed too).
func guard(report func(error), where string) {
	if v := recover(); v != nil {
		safeReport(report, newPanic(where, v))
	}
}

func safeReport(report func(error), err error) {
	defer func() { _ = recover() }()
	if report != nil {
		report(err)
	}
}

//export goElected
func goElected(h C.uintptr_t, t *C.simba_term_t) {
	defer guard(nil, "OnElected")
	if v, ok := lookup(h); ok {
		v.(*listenerState).elected(t)
	}
}

//export goRevoked
func goRevoked(h C.uintptr_t, t *C.simba_term_t, reason C.int) {
	defer guard(nil, "OnRevoked")
	if v, ok := lookup(h); ok {
		v.(*listenerState).revoked(t, RevokeReason(reason))
	}
}

//export goDone
func goDone(h C.uintptr_t, err C.int) {
	defer guard(nil, "done")
	if v, ok := lookup(h); ok {
		v.(*doneWaiter).finish(int(err)) // runs once; deletes the handle
	}
}

//export goWork
func goWork(h C.uintptr_t, t *C.simba_term_t) {
	defer guard(nil, "leader work")
	if v, ok := lookup(h); ok {
		v.(*workState).run(t)
	}
}

//export goTermRevoked
func goTermRevoked(h C.uintptr_t, t *C.simba_term_t, reason C.int) {
	defer guard(nil, "Term.Done")
	if v, ok := lookup(h); ok {
		cgo.Handle(h).Delete() // a term's on_revoked runs exactly once
		v.(func(RevokeReason))(RevokeReason(reason))
	}
}

//export goEvent
func goEvent(h C.uintptr_t, typ C.int, detail *C.char) {
	defer guard(nil, "OnEvent")
	if v, ok := lookup(h); ok {
		v.(*sinkState).event(Event{Type: EventType(typ), Detail: C.GoString(detail)})
	}
}

//export goObserve
func goObserve(h C.uintptr_t, name, session, client *C.char, token C.uint64_t) {
	defer guard(nil, "Observe")
	if v, ok := lookup(h); ok {
		o := v.(*observer)
		hd := Holder{Name: o.name, Token: uint64(token)}
		if session != nil {
			hd.Session = C.GoString(session)
		}
		if client != nil {
			hd.Client = C.GoString(client)
		}
		o.push(hd)
	}
}

// goSubmit is a host executor's submit (Config.Executor): it returns
// nonzero, so that the library knows run will not be called, when the
// executor refuses the task or panics.
//
//export goSubmit
func goSubmit(h C.uintptr_t, run, arg unsafe.Pointer) (rc C.int) {
	rc = 1
	defer guard(nil, "Executor")
	if v, ok := lookup(h); ok {
		rc = v.(*sinkState).submit(run, arg)
	}
	return rc
}

//export goLog
func goLog(h C.uintptr_t, level C.int, msg *C.char) {
	defer guard(nil, "Logger")
	if v, ok := lookup(h); ok {
		v.(*sinkState).log(LogLevel(level), C.GoString(msg))
	}
}
