package natstransport_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/transport"
	"github.com/formica-run/formica/internal/transport/natstransport"
	"github.com/formica-run/formica/internal/wire"
)

// A worker answers an exec request with a progress heartbeat, then the
// result; the caller reads both from one Call, with an idle window after
// which it would presume the worker lost.
func Example() {
	ns, err := server.NewServer(&server.Options{DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	ns.Start()
	defer ns.WaitForShutdown()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(5 * time.Second) {
		fmt.Println("server not ready")
		return
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	tr, err := natstransport.New(nc, natstransport.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = tr.Serve("worker.w1.exec", "", 4, func(ctx context.Context, m wire.Msg, r transport.Replier) {
		_ = r.Reply(wire.Msg{Type: string(wire.TypeProgress)})
		_ = r.Reply(wire.Msg{Type: "result", Data: append([]byte("did "), m.Data...)})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tr.Flush(ctx); err != nil { // the server knows the subject before anyone asks
		fmt.Println(err)
		return
	}

	call, err := transport.Request(ctx, tr, "worker.w1.exec", wire.Msg{Type: "exec", Data: []byte("the task")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer call.Close()
	for {
		m, err := call.Next(ctx, 3*time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %q\n", m.Type, m.Data)
		if m.Type != string(wire.TypeProgress) {
			break
		}
	}

	// Nobody serves worker.w2: the caller learns at once.
	call2, err := transport.Request(ctx, tr, "worker.w2.exec", wire.Msg{Type: "exec"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer call2.Close()
	_, err = call2.Next(ctx, 3*time.Second)
	fmt.Println(err)
	// Output:
	// progress ""
	// result "did the task"
	// natstransport: request worker.w2.exec: no responders
}
