// Package client talks to a Formica coordinator's HTTP API: submit runs,
// read and list them, follow their events, wait for them to end, cancel and
// resume them, answer approvals, and read threads, transcripts, workers and
// the cluster's assets.
//
//	c, err := client.New("https://formica.example.com", os.Getenv("FORMICA_TOKEN"))
//	if err != nil { ... }
//	id, err := c.Submit(ctx, client.SubmitRequest{Task: "Plan:\n- research\n- write"})
//	if err != nil { ... }
//	run, err := c.Wait(ctx, id)
//	if err != nil { ... }
//	fmt.Println(run.Status, run.Output)
//
// Every method takes a context first and returns the API's errors as an
// *APIError holding the HTTP status and the server's code and message.
//
// The types are the server's own: Run, Event, SubmitRequest and the rest
// are aliases of the types the coordinator encodes (and its OpenAPI
// document is checked against), not copies of them. An alias of an
// internal type can be named, built and read from any module, so there is
// one set of wire types, and a field the server gains is a field the
// client has.
package client
