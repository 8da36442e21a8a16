package ring

import "testing"

func TestRingFIFOAcrossGrowthAndWrap(t *testing.T) {
	var r Ring[int]
	next, want := 0, 0
	// Interleave pushes and pops so the head wraps while the buffer grows.
	for round := range 50 {
		for range round%7 + 1 {
			r.Push(next)
			next++
		}
		for range round % 5 {
			v, ok := r.Pop()
			if !ok {
				break
			}
			if v != want {
				t.Fatalf("pop = %d, want %d", v, want)
			}
			want++
		}
	}
	for {
		v, ok := r.Pop()
		if !ok {
			break
		}
		if v != want {
			t.Fatalf("pop = %d, want %d", v, want)
		}
		want++
	}
	if want != next || r.Len() != 0 {
		t.Fatalf("drained %d of %d, len %d", want, next, r.Len())
	}
}

func TestRingReleasesLargeBufferWhenDrained(t *testing.T) {
	var r Ring[int]
	for i := range 100 {
		r.Push(i)
	}
	for range 100 {
		r.Pop()
	}
	if r.buf != nil {
		t.Fatalf("drained ring kept %d slots", len(r.buf))
	}
	r.Push(1)
	r.Pop()
	if len(r.buf) == 0 || len(r.buf) > keep {
		t.Fatalf("small ring should keep its buffer, has %d slots", len(r.buf))
	}
}
