package spec_test

import (
	"fmt"

	"github.com/formica-run/formica/internal/spec"
)

func ExampleParse() {
	f, err := spec.Parse([]byte(`
name: lead
model: openai:gpt-4o
model_args: {temperature: 0.7}
tools: [agent, search]
helper:
  model_args: {temperature: 0}
  tools: {policy: restrict, only: [search]}
`), "agent.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	h := spec.HelperSpec(f.Agent, "researcher")
	fmt.Println(h.Name, h.Model, h.ModelArgs["temperature"], h.Tools)

	_, err = spec.Parse([]byte("name: lead\nharnes: {}\n"), "agent.yaml")
	fmt.Println(err)
	// Output:
	// researcher openai:gpt-4o 0 [search]
	// agent.yaml:2: unknown key "harnes"
}

func ExampleDefault() {
	f := spec.Default()
	fmt.Println(f.Name, f.Tools, f.Harness.Permissions.Decide("read_file", ""), f.Harness.Permissions.Decide("bash", "ls"))
	// Output: formica [agent] allow ask
}
