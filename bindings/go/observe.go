package simba

/*
#include <stdlib.h>
#include "simba_go.h"
*/
import "C"

import (
	"context"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// Holder is who holds an observed name, as the backend said.
type Holder struct {
	Name    string
	Session string // the holding session's id; "" when the name is free
	Client  string // the holder's client.name; "" when free or unknown
	Token   uint64 // the holder's token; when free, the last one granted (0 if never)
}

// Free reports whether nobody holds the name.
func (h Holder) Free() bool { return h.Session == "" }

// observer is the Go state of one simba_observe_start: the library calls
// push (one call at a time, on its callback executor) and a goroutine
// forwards the queue to the caller's channel, so a slow reader never holds
// up the library's callback threads.
type observer struct {
	client *Client
	name   string
	o      *C.simba_observer_t
	h      cgo.Handle

	mu    sync.Mutex
	queue []Holder
	wake  chan struct{} // a value is queued (capacity 1)
	once  sync.Once
	ended chan struct{} // closed by Close: the forwarding stops
	freed chan struct{} // closed in the close's done: no call of the observer comes any more
}

func (o *observer) push(h Holder) {
	o.mu.Lock()
	o.queue = append(o.queue, h)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Close ends the forwarding and closes the library's observer without
// waiting (simba_observer_close_async): its done, the observer's last
// callback, frees the Go state and lets the channel close. Idempotent.
func (o *observer) Close() error {
	o.once.Do(func() {
		close(o.ended)
		_ = closeAsync("Observe", C.S_OBSERVER, unsafe.Pointer(o.o), func(error) {
			o.h.Delete()
			o.client.disown(o)
			close(o.freed)
		})
	})
	return nil
}

func (o *observer) forward(ctx context.Context, out chan<- Holder) {
	defer func() {
		<-o.freed // the channel closes once no call of the observer runs
		close(out)
	}()
	for {
		o.mu.Lock()
		batch := o.queue
		o.queue = nil
		o.mu.Unlock()
		for _, h := range batch {
			select {
			case out <- h:
			case <-ctx.Done():
				_ = o.Close()
				return
			case <-o.ended:
				return
			}
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			_ = o.Close()
			return
		case <-o.ended:
			return
		}
	}
}

// Observe follows who holds name without contending for it
// (simba_observe_start). The channel receives the state at the start, then
// every change (another holder, another token, the name freed), in order,
// until ctx is done or the client closes; then it is closed, once the
// observer's last call returned (values not yet received are dropped).
// Cancelling ctx never blocks, from any goroutine or callback
// (simba_observer_close_async). A change shows within one release broadcast (Redis,
// PostgreSQL, memory://) or one poll: poll is how often the backend is read
// (0: the client's renew interval; else at least 10 ms). Values wait in a
// queue for a slow reader, never holding up the library. What it says is
// history when it arrives: for dashboards and routing, never for deciding
// who may write (that is the term's and its token's job).
func (c *Client) Observe(ctx context.Context, name string, poll time.Duration) (<-chan Holder, error) {
	if poll < 0 || (poll > 0 && poll < 10*time.Millisecond) {
		return nil, &Error{Code: CodeInvalid, Op: "Observe", Message: "poll must be 0 or at least 10ms"}
	}
	if ctx.Err() != nil {
		return nil, ctxError("Observe", ctx)
	}
	o := &observer{client: c, name: name, wake: make(chan struct{}, 1), ended: make(chan struct{}),
		freed: make(chan struct{})}
	o.h = cgo.NewHandle(o)
	if err := c.with("Observe", func(h *C.simba_client_t) error {
		var out *C.simba_observer_t
		if err := call("Observe", func(m **C.char) C.int {
			return C.s_observe_start(&out, h, name, ms(poll.Milliseconds()), C.uintptr_t(o.h), m)
		}); err != nil {
			return err
		}
		o.o = out
		c.own(o) // under the client's read lock: its Close frees it
		return nil
	}); err != nil {
		o.h.Delete()
		return nil, err
	}
	ch := make(chan Holder)
	go o.forward(ctx, ch)
	return ch, nil
}
