// Package packtest holds hand msgpack encoders (package pack) to the
// reflective encoder: every leaf field of a type is filled in turn, and
// each value must encode to the bytes the reflective encoder writes.
package packtest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/pack"
)

// Leaves fills every leaf field of a T found by reflection: each has one
// value per leaf with that leaf alone set, full has all of them set. A
// field added to T, at any depth, is then written by the hand encoder or
// fails MatchesReflective. Unexported fields are left zero.
func Leaves[T any](t testing.TB) (each []T, full T) {
	t.Helper()
	var fill func(v reflect.Value, name string, only int, n *int)
	fill = func(v reflect.Value, name string, only int, n *int) {
		leaf := func(set func()) {
			if only < 0 || only == *n {
				set()
			}
			*n++
		}
		switch v.Kind() {
		case reflect.String:
			leaf(func() { v.SetString(name + "-value") })
		case reflect.Int, reflect.Int64:
			leaf(func() { v.SetInt(int64(len(name)) + 1000) })
		case reflect.Bool:
			leaf(func() { v.SetBool(true) })
		case reflect.Pointer:
			leaf(func() {
				p := reflect.New(v.Type().Elem())
				var m int
				fill(p.Elem(), name, -1, &m)
				v.Set(p)
			})
		case reflect.Map:
			leaf(func() {
				m := reflect.MakeMap(v.Type())
				val := reflect.New(v.Type().Elem()).Elem()
				if val.Kind() == reflect.Interface {
					val.Set(reflect.ValueOf(any(1.5)))
				} else {
					var m int
					fill(val, name, -1, &m)
				}
				m.SetMapIndex(reflect.ValueOf(name+"-key").Convert(v.Type().Key()), val)
				v.Set(m)
			})
		case reflect.Slice:
			if v.Type() == reflect.TypeFor[json.RawMessage]() || v.Type().Elem().Kind() == reflect.Uint8 {
				leaf(func() { v.SetBytes([]byte(`{"type":"object"}`)) })
				return
			}
			leaf(func() {
				s := reflect.MakeSlice(v.Type(), 2, 2)
				for i := range 2 {
					var m int
					fill(s.Index(i), name, -1, &m)
				}
				v.Set(s)
			})
		case reflect.Struct:
			for i := range v.NumField() {
				if f := v.Type().Field(i); f.Tag.Get("msgpack") == "-" || !f.IsExported() {
					continue
				}
				fill(v.Field(i), v.Type().Field(i).Name, only, n)
			}
		default:
			t.Fatalf("field %s of kind %s: fill it here", name, v.Kind())
		}
	}
	var leaves int
	fill(reflect.ValueOf(&full).Elem(), "value", -1, &leaves)
	for i := range leaves {
		var a T
		var n int
		fill(reflect.ValueOf(&a).Elem(), "value", i, &n)
		each = append(each, a)
	}
	return each, full
}

// MatchesReflective checks that hand writes each case as the reflective
// encoder writes plain(case): the same value as a type with the same fields
// and none of T's methods, so that its own encoder is not the reference.
func MatchesReflective[T any](t *testing.T, cases []T, hand func(*T, *pack.Writer), plain func(*T) any) {
	t.Helper()
	for i := range cases {
		v := &cases[i]
		var want bytes.Buffer
		enc := msgpack.NewEncoder(&want)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(plain(v)); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc = msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		w := pack.Writer{Enc: enc}
		hand(v, &w)
		if w.Err != nil {
			t.Fatal(w.Err)
		}
		if got := buf.Bytes(); !bytes.Equal(want.Bytes(), got) {
			var back T
			err := msgpack.Unmarshal(got, &back)
			t.Errorf("case %d: hand encoding differs from the reflective one (decode err %v):\n%s", i, err, cmp.Diff(*v, back))
		}
	}
}
