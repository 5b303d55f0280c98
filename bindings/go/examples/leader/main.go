// Command leader is the program of README.md: it runs work while it leads
// "nightly-report" on Redis, until Ctrl-C (go vet ./... compiles it).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	simba "github.com/simba-project/simba/bindings/go"
)

func main() {
	c, err := simba.Open("redis://127.0.0.1:6379", nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = c.RunWhileLeader(ctx, "nightly-report", func(ctx context.Context, t *simba.Term) error {
		fmt.Println("leader, fencing token", t.Token()) // pass the token with every write
		<-ctx.Done()                                    // cancelled the moment the term is revoked
		return nil
	})
	fmt.Println("stopped:", err)
}
