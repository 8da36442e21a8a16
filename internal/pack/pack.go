// Package pack writes msgpack by hand, byte for byte as the reflective
// encoder of github.com/vmihailenco/msgpack/v5 writes the same value from
// its tags (omitempty, field order, nil against empty slices, int widths).
// The reflective encoder checks and boxes every field of every struct it
// writes, and allocates for each struct with an omitempty field; the types
// on the spawn path and in every journal entry write themselves with a
// Writer instead. packtest holds them to the reflective bytes.
package pack

import "github.com/vmihailenco/msgpack/v5"

// Writer writes to Enc and keeps the first error of a run of writes.
type Writer struct {
	Enc *msgpack.Encoder
	Err error
}

// Check keeps err if it is the first.
func (w *Writer) Check(err error) {
	if w.Err == nil {
		w.Err = err
	}
}

// Map starts a map of n keys.
func (w *Writer) Map(n int) { w.Check(w.Enc.EncodeMapLen(n)) }

// Key writes a map key.
func (w *Writer) Key(k string) { w.Check(w.Enc.EncodeString(k)) }

// Str writes a string field.
func (w *Writer) Str(k, v string) {
	w.Key(k)
	w.Check(w.Enc.EncodeString(v))
}

// OptStr writes an omitempty string field.
func (w *Writer) OptStr(k, v string) {
	if v != "" {
		w.Str(k, v)
	}
}

// Int writes an int field as the reflective encoder does: compact.
func (w *Writer) Int(k string, v int) {
	w.Key(k)
	w.Check(w.Enc.EncodeInt(int64(v)))
}

// OptInt writes an omitempty int field.
func (w *Writer) OptInt(k string, v int) {
	if v != 0 {
		w.Int(k, v)
	}
}

// Int64 writes an int64 field (time.Duration too) as the reflective
// encoder does: 9 bytes.
func (w *Writer) Int64(k string, v int64) {
	w.Key(k)
	w.Check(w.Enc.EncodeInt64(v))
}

// OptInt64 writes an omitempty int64 field.
func (w *Writer) OptInt64(k string, v int64) {
	if v != 0 {
		w.Int64(k, v)
	}
}

// OptBool writes an omitempty bool field.
func (w *Writer) OptBool(k string, v bool) {
	if v {
		w.Key(k)
		w.Check(w.Enc.EncodeBool(true))
	}
}

// OptBytes writes an omitempty byte slice field.
func (w *Writer) OptBytes(k string, v []byte) {
	if len(v) > 0 {
		w.Key(k)
		w.Check(w.Enc.EncodeBytes(v))
	}
}

// OptStrs writes an omitempty string slice field.
func (w *Writer) OptStrs(k string, v []string) {
	if len(v) > 0 {
		w.Key(k)
		w.Strs(v)
	}
}

// Strs writes a string slice; nil as nil, as the reflective encoder does.
func (w *Writer) Strs(v []string) {
	if v == nil {
		w.Check(w.Enc.EncodeNil())
		return
	}
	w.Check(w.Enc.EncodeArrayLen(len(v)))
	for _, s := range v {
		w.Check(w.Enc.EncodeString(s))
	}
}

// Value writes v with the reflective encoder: for the fields not worth
// writing by hand.
func (w *Writer) Value(v any) { w.Check(w.Enc.Encode(v)) }

// Count is how many of set are true: the length of a map of optional keys.
func Count(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}
