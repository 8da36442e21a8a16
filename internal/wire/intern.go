package wire

import (
	"hash/maphash"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/formica-run/formica/internal/event"
)

// The short strings a process decodes repeat: a run's id, its coordinator,
// a worker, a thread's id and token, a status come back in every message
// about them, and where one process holds several roles (the embedded
// default) each role decodes the same id again. Strings of at most
// maxInterned bytes are read through internTable, a small direct-mapped
// table, so that a repeat costs no allocation. The table is bounded: a
// miss replaces its slot's string, and a longer string is copied as usual.
const (
	maxInterned = 64
	internSlots = 1 << 12
)

type internSlot struct {
	mu sync.Mutex
	s  string
}

var (
	internTable [internSlots]internSlot
	internSeed  = maphash.MakeSeed()
	// str8Bufs hold a string of up to 255 bytes while it is looked up.
	str8Bufs = sync.Pool{New: func() any { return new([255]byte) }}
)

// Every plain string field, and the statuses every result carries, are
// decoded by decodeString.
func init() {
	dec := func(d *msgpack.Decoder, v reflect.Value) error {
		s, err := decodeString(d)
		if err == nil {
			v.SetString(s)
		}
		return err
	}
	msgpack.Register("", nil, dec)
	msgpack.Register(event.Status(""), nil, dec)
}

// decodeString is Decoder.DecodeString, with strings of at most
// maxInterned bytes interned. Only lengths a str8 header can state are
// read here, so a forged length never sizes a buffer.
func decodeString(d *msgpack.Decoder) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsFixedString(c) && c != msgpcode.Str8 {
		return d.DecodeString()
	}
	n, err := d.DecodeBytesLen()
	if err != nil || n <= 0 {
		return "", err
	}
	buf := str8Bufs.Get().(*[255]byte)
	defer str8Bufs.Put(buf)
	b := buf[:n]
	if err := d.ReadFull(b); err != nil {
		return "", err
	}
	if n > maxInterned {
		return string(b), nil
	}
	return intern(b), nil
}

// intern returns b as a string, the one its slot holds when equal.
func intern(b []byte) string {
	sl := &internTable[maphash.Bytes(internSeed, b)%internSlots]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.s != string(b) {
		sl.s = string(b)
	}
	return sl.s
}
