package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/formica-run/formica/internal/broker/brokertest"
)

// A cluster command whose credentials the server refuses says so at once
// instead of retrying the refusal until --connect-timeout.
func TestClusterCommandRefusedAtOnce(t *testing.T) {
	s := brokertest.Start(t, brokertest.WithToken("s3cret"), brokertest.WithoutJetStream())
	var out, errOut bytes.Buffer
	code := Main([]string{"runs", "--nats", s.ClientURL(), "--nats-token", "wrong", "--connect-timeout", "60s"}, Stdio{Out: &out, Err: &errOut})
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, ExitFailed, errOut.String())
	}
	msg := strings.ToLower(errOut.String())
	if !strings.Contains(msg, "authorization violation") || strings.Contains(msg, "no connection within") {
		t.Fatalf("stderr %q: want the authorization violation, not a timeout", errOut.String())
	}
}
