package wire

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProtocolLinksNoBehaviour: the protocol, the store and the API are
// data and their rules; none of them may link the agent loop, the tools,
// the transport or the sandbox (data at the bottom, behaviour above it).
func TestProtocolLinksNoBehaviour(t *testing.T) {
	const mod = "github.com/formica-run/formica/internal/"
	out, err := exec.Command("go", "list", "-deps", mod+"wire", mod+"store", mod+"api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"runner", "tools", "transport", "sandbox"} {
			if dep == mod+banned || strings.HasPrefix(dep, mod+banned+"/") {
				t.Errorf("wire, store or api depends on %s", dep)
			}
		}
	}
}
