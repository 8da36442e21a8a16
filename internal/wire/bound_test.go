package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
)

// rawEnvelope is an envelope of type t around a hand-made body.
func rawEnvelope(t Type, body []byte) []byte {
	var b bytes.Buffer
	b.WriteByte(0x83)
	b.WriteString("\xa1t")
	b.WriteByte(0xa0 | byte(len(t)))
	b.WriteString(string(t))
	b.WriteString("\xa1v\x01\xa1b")
	b.Write(body)
	return b.Bytes()
}

// execWithArgs is an ExecRequest body whose root agent's model_args is args.
func execWithArgs(args []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x81\xa6thread\x81\xa5agent\x81\xaamodel_args")
	b.Write(args)
	return b.Bytes()
}

// nested is n maps, each holding the next under key "k", around nil.
func nested(n int) []byte {
	return append(bytes.Repeat([]byte("\x81\xa1k"), n), 0xc0)
}

// manyNested is an array of n chains of maps nested depth deep, under "k".
func manyNested(n, depth int) []byte {
	b := []byte{0x81, 0xa1, 'k', 0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	for range n {
		b = append(b, nested(depth)...)
	}
	return b
}

// allocated is the heap a call allocates, in bytes: the fewest over a few
// rounds, as other goroutines only ever add to a round's count.
func allocated(f func()) uint64 {
	fewest := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.TotalAlloc-before.TotalAlloc)
	}
	return fewest
}

// fewestAllocs is the fewest allocations f makes per call over a few
// rounds: the process's other goroutines (the race runtime, finalizers)
// only ever add to a round's count, so the fewest is f's own.
func fewestAllocs(f func()) float64 {
	fewest := testing.AllocsPerRun(10, f)
	for range 4 {
		fewest = min(fewest, testing.AllocsPerRun(10, f))
	}
	return fewest
}

// bombs are hostile messages a peer may send: each is refused before the
// decoder allocates for it.
func bombs() map[string][]byte {
	return map[string][]byte{
		// 1 MB of maps nested 350,000 deep in an agent's model args (a
		// worker went from 25 MB to 280 MB decoding one of these).
		"depth": rawEnvelope(TypeExecRequest, execWithArgs(nested(350_000))),
		// Arrays nested past MaxDepth, one byte each.
		"array depth": rawEnvelope(TypeExecRequest, execWithArgs(append(bytes.Repeat([]byte{0x91}, MaxDepth+1), 0xc0))),
		// 5 bytes declaring 4 billion thread ids.
		"array length": rawEnvelope(TypeCancel, []byte("\x81\xaathread_ids\xdd\xff\xff\xff\xff")),
		// A map of 4 billion model args.
		"map length": rawEnvelope(TypeExecRequest, execWithArgs([]byte("\xdf\xff\xff\xff\xff"))),
		// A 4 GB string and a 4 GB binary.
		"string length": rawEnvelope(TypeSpawnRequest, []byte("\x81\xa4task\xdb\xff\xff\xff\xff")),
		"binary length": rawEnvelope(TypeExecRequest, execWithArgs([]byte("\x81\xa1k\xc6\xff\xff\xff\xff"))),
		// 65,535 thread ids declared, three present.
		"short array": rawEnvelope(TypeCancel, []byte("\x81\xaathread_ids\xdc\xff\xff\xa1a\xa1b\xa1c")),
		// 20,000 chains of maps, each as deep as allowed: 3 bytes a map.
		"nested maps": rawEnvelope(TypeExecRequest, execWithArgs(manyNested(20_000, MaxDepth-6))),
		// 100,000 nils for a slice of structs: the decoder makes room for
		// 100,000 structs.
		"nil elements": rawEnvelope(TypeCoordHeartbeat, append([]byte("\x81\xa6fenced\xdd\x00\x01\x86\xa0"), bytes.Repeat([]byte{0xc0}, 100_000)...)),
	}
}

func TestBombsAreRefusedCheaply(t *testing.T) {
	for name, msg := range bombs() {
		t.Run(name, func(t *testing.T) {
			targets := []struct {
				typ Type
				v   func() any
			}{{TypeExecRequest, func() any { return &ExecRequest{} }}, {TypeCancel, func() any { return &Cancel{} }},
				{TypeSpawnRequest, func() any { return &SpawnRequest{} }}, {TypeRunSubmit, func() any { return &RunSubmit{} }}}
			for _, tg := range targets {
				var err error
				n := allocated(func() { err = DecodeAs(msg, tg.typ, tg.v()) })
				if !errors.Is(err, ErrBadMessage) {
					t.Fatalf("%s as %s: %v, want a bad message", name, tg.typ, err)
				}
				if n > 16<<10 {
					t.Errorf("%s as %s: refusing a %d-byte message allocated %d bytes", name, tg.typ, len(msg), n)
				}
			}
			if _, err := Decode(msg); !errors.Is(err, ErrBadMessage) {
				t.Errorf("Decode: %v", err)
			}
			if n := fewestAllocs(func() { Check(msg) }); n > 8 {
				t.Errorf("Check allocated %.0f times to refuse", n)
			}
		})
	}
}

// TestLargeMessagesCostAMultipleOfTheirSize decodes the largest messages
// Check lets through, as deep and as wide as it allows: what the decoder
// allocates stays within a small multiple of the message's size.
func TestLargeMessagesCostAMultipleOfTheirSize(t *testing.T) {
	wide := []byte{0xde, 0xff, 0xff} // 65,535 model args
	for i := range 0xffff {
		wide = append(wide, 0xa5)
		wide = append(wide, fmt.Sprintf("%05d", i)...)
		wide = append(wide, 0xc3)
	}
	// Maps nested as deep as allowed (the envelope and the ExecRequest take
	// four levels), each with a little data beside the next.
	deep := []byte{0xc0}
	for range MaxDepth - 4 {
		deep = append(append([]byte("\x82\xa1k"), deep...), "\xa1p\xb4pppppppppppppppppppp"...)
	}
	// Maps of one entry, each just long enough to fit the estimate.
	dense := []byte{0x81, 0xa1, 'k', 0xdd, 0, 0, 0x4e, 0x20}
	for range 20_000 {
		dense = append(dense, "\x81\xa1k\xb2pppppppppppppppppp"...)
	}
	// Elements of a slice of structs, each just long enough to pass.
	elems := []byte("\x81\xa6fenced\xdd\x00\x01\x86\xa0")
	for range 100_000 {
		elems = append(elems, "\xa7abcdefg"...)
	}
	for name, msg := range map[string][]byte{
		"wide":     rawEnvelope(TypeExecRequest, execWithArgs(wide)),
		"deep":     rawEnvelope(TypeExecRequest, execWithArgs(deep)),
		"dense":    rawEnvelope(TypeExecRequest, execWithArgs(dense)),
		"elements": rawEnvelope(TypeCoordHeartbeat, elems),
	} {
		if err := Check(msg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := allocated(func() {
			var ex ExecRequest
			var hb CoordHeartbeat
			DecodeAs(msg, TypeExecRequest, &ex) // "elements" fails, after making room
			DecodeAs(msg, TypeCoordHeartbeat, &hb)
		})
		ratio := float64(n) / float64(len(msg))
		t.Logf("%s: %d bytes allocated for %d bytes (%.1f×)", name, n, len(msg), ratio)
		if ratio > 2*CostPerByte {
			t.Errorf("%s: %.1f× its size", name, ratio)
		}
	}
}

func TestCheckAcceptsWhatEncodeWrites(t *testing.T) {
	for _, m := range [][]byte{MustEncode(TypeExecRequest, sampleExec()), MustEncode(TypeRunSubmit, RunSubmit{RunID: "r", Task: "t"}),
		MustEncode(TypeCoordHeartbeat, CoordHeartbeat{ID: "c", Fenced: []Fenced{{Worker: "w"}}}), ErrorBody(errors.New("x"))} {
		if err := Check(m); err != nil {
			t.Fatalf("%v", err)
		}
	}
	good := MustEncode(TypeProgress, Progress{ThreadID: "t"})
	for _, bad := range [][]byte{good[:len(good)-1], append(bytes.Clone(good), 0), {0xc1}} {
		if err := Check(bad); !errors.Is(err, ErrBadMessage) {
			t.Fatalf("% x: %v", bad, err)
		}
	}
}
