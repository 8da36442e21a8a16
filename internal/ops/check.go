package ops

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ErrUnhealthy is returned by Check for an answer other than 200.
var ErrUnhealthy = errors.New("unhealthy")

// Check GETs url and reports an error unless it answers 200.
func Check(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s %s", ErrUnhealthy, url, resp.Status, body)
	}
	return nil
}

// ProbeURL is the URL of path on a process listening on addr, as seen from
// the same machine: a wildcard host (":8080", "0.0.0.0:8080", "[::]:8080")
// is probed on loopback.
func ProbeURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("ops: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// Healthcheck is the `healthcheck` command of a program whose listener is
// addr (the program's --http, read from its environment as at start-up):
// it probes /healthz, or /readyz with --ready, and returns the exit code,
// 0 when healthy. An image without a shell or curl runs it as its
// healthcheck.
func Healthcheck(program, addr string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(program+" healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ready := fs.Bool("ready", false, "probe /readyz (can it work?) instead of /healthz (is it up?)")
	url := fs.String("url", "", "probe this `URL` instead of the program's --http address")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s healthcheck [--ready] [--url URL] [--timeout D]\n"+
			"Exits 0 when the %s on this machine (its --http, from $FORMICA_HTTP) answers 200.\n", program, program)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	target := *url
	if target == "" {
		if addr == "" || addr == "off" {
			fmt.Fprintf(stderr, "%s healthcheck: no HTTP listener configured (set --http or $FORMICA_HTTP)\n", program)
			return 2
		}
		var err error
		if target, err = ProbeURL(addr, path); err != nil {
			fmt.Fprintf(stderr, "%s healthcheck: %v\n", program, err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := Check(ctx, target); err != nil {
		fmt.Fprintf(stderr, "%s healthcheck: %v\n", program, err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}
