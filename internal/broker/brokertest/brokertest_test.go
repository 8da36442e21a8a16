package brokertest_test

import (
	"testing"

	"github.com/formica-run/formica/internal/broker/brokertest"
)

func TestStartAndURLs(t *testing.T) {
	a := brokertest.Start(t, brokertest.WithoutJetStream())
	b := brokertest.Start(t, brokertest.WithoutJetStream(), brokertest.WithoutListener())
	c := brokertest.Start(t)
	if got := brokertest.URLs(a, b, c); len(got) != 2 {
		t.Fatalf("URLs = %v, want two (b has no listener)", got)
	}
	c.Shutdown()
	if got := brokertest.URLs(a, b, c); len(got) != 1 || got[0] != a.ClientURL() {
		t.Fatalf("URLs after shutdown = %v, want only %s", got, a.ClientURL())
	}
}
