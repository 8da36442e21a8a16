package limits

import "testing"

// BenchmarkAdmitRefused is a spawn storm past the thread limit: every
// admission is refused.
func BenchmarkAdmitRefused(b *testing.B) {
	l, _ := New(Config{MaxThreads: 1})
	if _, err := l.Admit(1); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Admit(1); err == nil {
				b.Error("admitted past the limit")
				return
			}
		}
	})
}
