// Package ring is the FIFO behind serve queues.
//
// It grows by doubling and hands its buffer back once drained, so an idle
// owner (an actor waiting for mail, a quiet subscription) keeps at most a
// few slots instead of its high-water mark.
package ring

// keep is the largest buffer (in slots) a drained ring holds on to.
const keep = 8

// Ring is a first-in first-out queue. The zero value is empty and ready.
// It is not safe for concurrent use: owners guard it with their own lock.
type Ring[T any] struct {
	buf  []T
	head int
	n    int
}

// Len reports how many values are queued.
func (r *Ring[T]) Len() int { return r.n }

// Push appends v.
func (r *Ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

// Pop removes and returns the oldest value; ok is false when empty.
func (r *Ring[T]) Pop() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	var zero T
	v = r.buf[r.head]
	r.buf[r.head] = zero // let the GC have what the value points to
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
		if len(r.buf) > keep {
			r.buf = nil
		}
	}
	return v, true
}

func (r *Ring[T]) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = 2
	}
	buf := make([]T, size)
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}
