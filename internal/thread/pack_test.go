package thread

import (
	"testing"

	"github.com/formica-run/formica/internal/pack/packtest"
)

type (
	plainThread Thread
	plainResult Result
)

// TestPackMatchesTheTags: a thread and a result write themselves byte for
// byte as the reflective encoder writes them.
func TestPackMatchesTheTags(t *testing.T) {
	threads, full := packtest.Leaves[Thread](t)
	if len(threads) < 45 {
		t.Fatalf("found %d leaf fields of a thread; the filler misses some", len(threads))
	}
	packtest.MatchesReflective(t, append([]Thread{{}, full}, threads...), (*Thread).Pack,
		func(t *Thread) any { return (*plainThread)(t) })
	results, fullResult := packtest.Leaves[Result](t)
	packtest.MatchesReflective(t, append([]Result{{}, fullResult}, results...), (*Result).Pack,
		func(r *Result) any { return (*plainResult)(r) })
}
