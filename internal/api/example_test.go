package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/formica-run/formica/internal/api"
)

// stub is a Backend that is ready and knows nothing else (its other methods
// would panic, and the API would answer 500).
type stub struct{ api.Backend }

func (stub) Ready(context.Context) error { return nil }

func ExampleNew() {
	s, err := api.New(api.Config{Addr: "127.0.0.1:0"}, stub{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown(context.Background())

	resp, err := http.Get("http://" + s.Addr() + "/readyz")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(body))

	// Beyond loopback a token is required.
	_, err = api.New(api.Config{Addr: ":8080"}, stub{})
	fmt.Println(errors.Is(err, api.ErrInsecure))
	// Output:
	// 200 {"status":"ready"}
	// true
}
