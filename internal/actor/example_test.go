package actor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/actor"
)

// greeter answers requests and tells its lifecycle.
type greeter struct{ done chan struct{} }

func (g *greeter) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		fmt.Println("started", c.Self())
	case string:
		c.Respond("hello, " + m)
	case actor.Stopped:
		fmt.Println("stopped", c.Self())
	}
}

func ExampleEngine() {
	e := actor.NewEngine(actor.EngineConfig{Address: "worker-1"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	pid, err := e.Spawn("greeter", &greeter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reply, err := e.Request(ctx, pid, "ant")
	fmt.Println(reply, err)
	if err := e.StopWait(ctx, pid); err != nil {
		fmt.Println(err)
	}
	fmt.Println("actors:", e.Len())
	// Output:
	// started worker-1/greeter
	// hello, ant <nil>
	// stopped worker-1/greeter
	// actors: 0
}
