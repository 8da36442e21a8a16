package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "1048576": 1 << 20, "512M": 512 << 20, "2GiB": 2 << 30, "64k": 64 << 10, "3KB": 3 << 10, "1T": 1 << 40, "10B": 10} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-1", "1.5G", "1Q", "M", "99999999999T"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}
