package client_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/apitest"
)

// externalMain is a program of another module that knows this one only
// through the client package.
const externalMain = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/formica-run/formica/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(os.Getenv("FORMICA_API"), os.Getenv("FORMICA_TOKEN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	id, err := c.Submit(ctx, client.SubmitRequest{Task: os.Args[1], Model: os.Args[2]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var run client.Run
	if run, err = c.Wait(ctx, id); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s\n", run.Status, run.Output)
}
`

// TestExternalModule builds a program of its own module, which requires
// this one (replaced by this checkout) and imports only the client, and
// runs it against a cluster: the client and its aliased types work from
// outside.
func TestExternalModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/formicauser\n\ngo 1.26.0\n\nrequire github.com/formica-run/formica v0.0.0\n\n" +
		"replace github.com/formica-run/formica => " + root + "\n"
	for name, data := range map[string]string{"go.mod": mod, "go.sum": string(sum), "main.go": externalMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "formicauser")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cl := apitest.Start(t)
	model := apitest.Script(t, "responses:\n  - text: done from outside\n")
	run := exec.CommandContext(ctx, bin, "say it", model)
	run.Env = append(os.Environ(), "FORMICA_API="+cl.URL, "FORMICA_TOKEN="+apitest.Token)
	out, err := run.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "succeeded: done from outside" {
		t.Fatalf("the program: %v\n%s", err, out)
	}
}
