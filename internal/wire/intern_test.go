package wire

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/event"
)

// Strings of every length and encoding decode as they were written, from
// many goroutines at once, and a repeated short one allocates nothing.
func TestDecodeStringInterns(t *testing.T) {
	type msg struct {
		S      string       `msgpack:"s"`
		Status event.Status `msgpack:"status"`
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for _, n := range []int{0, 1, 31, 32, maxInterned, maxInterned + 1, 255, 256, 70000} {
				in := msg{S: strings.Repeat(fmt.Sprint(g%3), n), Status: event.Succeeded}
				data, err := msgpack.Marshal(in)
				if err != nil {
					t.Error(err)
					return
				}
				for range 50 {
					var out msg
					if err := msgpack.Unmarshal(data, &out); err != nil || out != in {
						t.Errorf("length %d: got %d bytes, %q (%v)", n, len(out.S), out.Status, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	data, _ := msgpack.Marshal(msg{S: "0b9e0c57-0d54-4a43-9d1c-1c2f3b7e6a10", Status: event.Failed})
	dec := msgpack.NewDecoder(nil)
	var rd bytes.Reader
	var out msg
	if n := testing.AllocsPerRun(100, func() {
		rd.Reset(data)
		dec.Reset(&rd)
		if err := dec.Decode(&out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 && !raceEnabled {
		t.Fatalf("%v allocations decoding strings seen before", n)
	}
}

// A string header that claims more than the message holds is an error,
// whatever its width, and never sizes a buffer by the claim.
func TestDecodeStringRefusesForgedLengths(t *testing.T) {
	for _, data := range [][]byte{
		{0xa5, 'a', 'b'},                         // fixstr of 5, 2 bytes
		{0xd9, 200, 'a'},                         // str8 of 200, 1 byte
		{0xda, 0xff, 0xff, 'a'},                  // str16 of 65535
		{0xdb, 0xff, 0xff, 0xff, 0xff, 'a', 'b'}, // str32 of 4 GiB
		{0xc4, 0x10, 'a'},                        // bin8 of 16
		{0xd4, 0x01, 0x02},                       // an extension, not a string
	} {
		var s string
		if err := msgpack.Unmarshal(data, &s); err == nil {
			t.Errorf("% x decoded as %q", data, s)
		}
	}
}
