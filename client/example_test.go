package client_test

import (
	"context"
	"fmt"
	"os"

	"github.com/formica-run/formica/client"
)

// A run submitted, its tree followed as it grows, and its output printed
// once it has ended. It needs a coordinator at $FORMICA_API.
func Example() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("FORMICA_API"), os.Getenv("FORMICA_TOKEN"))
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := c.Submit(ctx, client.SubmitRequest{Task: "Plan:\n- research\n- write"})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = c.Events(ctx, id, 0, func(_ uint64, e client.Event) error {
		if e.Type == "thread.started" {
			fmt.Println("started", e.Name)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := c.Wait(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.Status, run.Output)
}
