package base_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/formica-run/formica/internal/tools"
	"github.com/formica-run/formica/internal/tools/base"
)

func Example() {
	dir, err := os.MkdirTemp("", "base-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ts, err := base.New(base.Config{Cwd: dir})
	if err != nil {
		panic(err)
	}
	fmt.Println(tools.Names(ts))

	ctx := context.Background()
	byName := map[string]tools.Tool{}
	for _, t := range ts {
		byName[t.Name()] = t
	}
	call := func(name, args string) {
		out, err := byName[name].Run(ctx, json.RawMessage(args))
		if err != nil {
			fmt.Printf("%s error: %v\n", name, err)
			return
		}
		fmt.Printf("%s: %q\n", name, out)
	}
	call("write_file", `{"path":"notes/hello.txt","content":"hello\nworld\n"}`)
	call("edit_file", `{"path":"notes/hello.txt","old":"world","new":"formica"}`)
	call("read_file", `{"path":"notes/hello.txt"}`)
	call("grep", `{"pattern":"^f"}`)
	call("glob", `{"pattern":"**/*.txt"}`)
	call("list_dir", `{"path":"."}`)
	call("bash", `{"command":"cat notes/hello.txt; exit 1"}`)
	_, err = byName["read_file"].Run(ctx, json.RawMessage(`{"path":"../elsewhere.txt"}`))
	fmt.Println("escape refused:", errors.Is(err, base.ErrOutsideCwd))
	// Output:
	// [read_file write_file edit_file list_dir glob grep bash]
	// write_file: "Wrote 12 bytes to notes/hello.txt"
	// edit_file: "Edited notes/hello.txt: replaced 1 occurrence (14 bytes written)"
	// read_file: "     1\thello\n     2\tformica"
	// grep: "notes/hello.txt:2:formica"
	// glob: "notes/hello.txt"
	// list_dir: "notes/"
	// bash: "hello\nformica\n[exit code: 1]"
	// escape refused: true
}

func ExampleConfine() {
	dir, err := os.MkdirTemp("", "base-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	_, err = base.Confine(dir, "../etc/passwd")
	fmt.Println(errors.Is(err, base.ErrOutsideCwd))
	p, err := base.Confine(dir, "src/../main.go")
	fmt.Println(err, p != "")
	// Output:
	// true
	// <nil> true
}
