package broker_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/broker"
)

// The one-shot CLI's setup: an in-process server with JetStream on disk, no
// TCP port, and the shutdown order from docs/nats.md.
func ExampleStartServer() {
	dir, err := os.MkdirTemp("", "formica-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := broker.StartServer(ctx, broker.ServerConfig{JetStream: true, DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()

	nc, err := srv.Connect("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := nc.Subscribe("greet", func(m *nats.Msg) { _ = m.Respond([]byte("hello, " + string(m.Data))) }); err != nil {
		fmt.Println(err)
		return
	}
	_ = nc.Flush() // the subscription is live before anyone asks
	reply, err := nc.Request("greet", []byte("formica"), 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(reply.Data))
	fmt.Println("listening:", srv.ClientURL() != "")

	if err := broker.Drain(nc, 5*time.Second); err != nil {
		fmt.Println(err)
	}
	fmt.Println("closed:", nc.IsClosed())
	// Output:
	// hello, formica
	// listening: false
	// closed: true
}

// A worker connecting to an external cluster, every node listed.
func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := broker.Connect(ctx, broker.ClientConfig{
		URLs:  []string{"nats://n1:4222,nats://n2:4222"},
		Creds: "worker.creds",
		Token: "also-a-token",
	})
	fmt.Println(err != nil)
	// Output: true
}
