package execsh

import (
	"bytes"
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{"coordinator healthcheck --ready", []string{"coordinator", "healthcheck", "--ready"}},
		// podman-compose 1.0's rendering of ["CMD", "worker", "healthcheck", "--ready"].
		{"worker' 'healthcheck' '--ready", []string{"worker healthcheck --ready"}},
		// Its rendering of a string test, nested once more by podman's CMD-SHELL.
		{"/bin/sh -c 'coordinator healthcheck --ready'", []string{"/bin/sh", "-c", "coordinator healthcheck --ready"}},
		{`a "b c" d\ e "x\"y" ''`, []string{"a", "b c", "d e", `x"y`, ""}},
		{"  ", nil},
		{"a#b", []string{"a#b"}},
	} {
		got, err := Split(c.line)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
	for _, bad := range []string{"a | b", "a; b", "a > f", "echo $HOME", `"$x"`, "a 'b", `a "b`, "ls *", "a && b", "# x", "x\\"} {
		if got, err := Split(bad); err == nil {
			t.Errorf("Split(%q) = %q, want an error", bad, got)
		}
	}
}

func TestMainRefuses(t *testing.T) {
	var stderr bytes.Buffer
	if got := Main([]string{"-c", "a | b"}, &stderr); got != 2 {
		t.Errorf("a pipe: status %d, want 2", got)
	}
	if got := Main([]string{"script.sh"}, &stderr); got != 2 {
		t.Errorf("a script: status %d, want 2", got)
	}
	if got := Main([]string{"-c", "formica-no-such-program x"}, &stderr); got != 127 {
		t.Errorf("a missing program: status %d, want 127", got)
	}
	if got := Main([]string{"-c", "  "}, &stderr); got != 0 {
		t.Errorf("an empty command: status %d, want 0", got)
	}
}
