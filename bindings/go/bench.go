package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

// cLockCycles runs n lock cycles (simba_lock_acquire + simba_lock_release)
// as one C loop on c: the baseline of BenchmarkLockCycle (bench_test.go).
func cLockCycles(c *Client, name string, n int) error {
	nm, fn := cstr(name)
	defer fn()
	return c.with("cLockCycles", func(h *C.simba_client_t) error {
		return call("cLockCycles", func(m **C.char) C.int { return C.s_c_lock_cycles(h, nm, C.int(n), m) })
	})
}
