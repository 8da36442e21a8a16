package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The report prints packages as go test does, a failed test's output, and
// ends with the skips grouped by package and reason.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	for _, line := range []string{
		`{"Action":"output","Package":"x/browser","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"x/browser","Test":"TestA","Output":"    main_test.go:61: chromium not found (apt-get install chromium)\n"}`,
		`{"Action":"output","Package":"x/browser","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
		`{"Action":"skip","Package":"x/browser","Test":"TestA"}`,
		`{"Action":"output","Package":"x/browser","Test":"TestB","Output":"    main_test.go:61: chromium not found (apt-get install chromium)\n"}`,
		`{"Action":"skip","Package":"x/browser","Test":"TestB"}`,
		`{"Action":"output","Package":"x/browser","Test":"TestB/sub","Output":"    main_test.go:61: chromium not found (apt-get install chromium)\n"}`,
		`{"Action":"skip","Package":"x/browser","Test":"TestB/sub"}`,
		`{"Action":"pass","Package":"x/browser","Elapsed":1.5}`,
		`{"Action":"output","Package":"x/core","Test":"TestC","Output":"    core_test.go:9: want 2, got 3\n"}`,
		`{"Action":"fail","Package":"x/core","Test":"TestC"}`,
		`{"Action":"output","Package":"x/core","Test":"TestD","Output":"quiet on success\n"}`,
		`{"Action":"pass","Package":"x/core","Test":"TestD"}`,
		`{"Action":"fail","Package":"x/core","Elapsed":2}`,
	} {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		r.add(e)
	}
	r.summary(90 * time.Second)
	want := `ok  	x/browser	1.5s
    core_test.go:9: want 2, got 3
FAIL	x/core	2.0s

FAILED: 1 package(s) in 1m30s
skipped (what each needs):
  x/browser: 2 tests: chromium not found (apt-get install chromium)
FAIL x/core
`
	if got := out.String(); got != want {
		t.Fatalf("report:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(out.String(), "quiet on success") {
		t.Fatal("a passing test's output was printed")
	}
}
