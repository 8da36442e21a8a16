package journal

import (
	"strings"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/event"
)

// TestProofChecksOnlyWhereItWasSigned: a proof checks with its signer's
// key for its own run and thread, and for nothing else: another thread or
// run (a proof replayed), another key (a proof forged), a changed field.
func TestProofChecksOnlyWhereItWasSigned(t *testing.T) {
	coord, err := NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSigner()
	good := coord.Sign("run-1", "thread-1", "w1", 2, "tok")
	if strings.Contains(good, "tok") {
		t.Fatalf("the token shows in its proof: %q", good)
	}
	p, err := ParseProof(good)
	if err != nil {
		t.Fatal(err)
	}
	if p.Worker != "w1" || p.Attempt != 2 || p.Digest != Digest("tok") || p.Key != coord.KeyID() {
		t.Fatalf("parsed %+v", p)
	}
	if !p.Check(coord.PublicKey(), "run-1", "thread-1") {
		t.Fatal("a proof does not check where it was signed")
	}
	tamper := func(i int, v string) string {
		parts := strings.Split(good, ".")
		parts[i] = v
		return strings.Join(parts, ".")
	}
	refused := []struct {
		what, proof, run, thread string
		key                      *Signer
	}{
		{"another thread", good, "run-1", "thread-2", coord},
		{"another run", good, "run-2", "thread-1", coord},
		{"another coordinator's key", good, "run-1", "thread-1", other},
		{"signed by another key", other.Sign("run-1", "thread-1", "w1", 2, "tok"), "run-1", "thread-1", coord},
		{"another key under this key's id", strings.Replace(other.Sign("run-1", "thread-1", "w1", 2, "tok"), other.KeyID(), coord.KeyID(), 1), "run-1", "thread-1", coord},
		{"another worker", tamper(2, "mallory"), "run-1", "thread-1", coord},
		{"another attempt", tamper(3, "3"), "run-1", "thread-1", coord},
		{"another token", tamper(4, Digest("tok-2")), "run-1", "thread-1", coord},
	}
	for _, r := range refused {
		p, err := ParseProof(r.proof)
		if err != nil {
			t.Errorf("%s: %v", r.what, err)
			continue
		}
		if p.Check(r.key.PublicKey(), r.run, r.thread) {
			t.Errorf("%s: the proof checks", r.what)
		}
	}
	for _, bad := range []string{"", Digest("tok"), "p1", "p1.k.w.1.d", "p1.k.w.x.d.sig", "p2" + good[2:], tamper(5, "short"), good + ".x"} {
		if _, err := ParseProof(bad); err == nil {
			t.Errorf("ParseProof(%q) parsed", bad)
		}
	}
}

// TestTrustedByProof: entries under a checked proof count, as do the
// coordinator's, and (in journals written before proofs) entries under a
// placement the coordinator journaled; the rest is dropped. A transcript
// shows each placement where its first entry is.
func TestTrustedByProof(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	p1 := &Proof{Worker: "w1", Attempt: 1, Digest: "d1"}
	p2 := &Proof{Worker: "w2", Attempt: 2, Digest: "d2"}
	entries := []Entry{
		{Kind: KindStart, Time: at, Thread: &ThreadInfo{ID: "t", Name: "h", Path: "root/h", Depth: 1}, Proof: p1, Placement: "d1", Seq: 1},
		{Kind: KindModel, Time: at, Proof: p1, Placement: "d1", Seq: 1},
		{Kind: KindEnd, Status: event.Succeeded, Output: "planted", Placement: "p1.forged", Seq: 2}, // a proof that did not check
		{Kind: KindEnd, Status: event.Succeeded, Output: "planted too", Seq: 3},                     // none
		{Kind: KindEnd, Time: at.Add(time.Second), Status: event.Succeeded, Output: "done", Proof: p2, Placement: "d2", Seq: 4},
	}
	trusted := Trusted(entries)
	if len(trusted) != 3 {
		t.Fatalf("trusted %d entries, want 3", len(trusted))
	}
	if end, ok := NewReplay(trusted).Finished(); !ok || end.Output != "done" {
		t.Errorf("finished %+v %v, want the placement's own end", end, ok)
	}
	tr := BuildTranscript("r", "t", trusted)
	if tr.Worker != "w2" || tr.Attempts != 2 || tr.Output != "done" {
		t.Errorf("transcript: worker %q, %d attempts, output %q", tr.Worker, tr.Attempts, tr.Output)
	}
	var kinds []string
	for _, e := range tr.Entries {
		k := string(e.Kind)
		if e.Kind == KindPlacement {
			k += ":" + e.Worker
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, " "); got != "placement:w1 start model placement:w2 end" {
		t.Errorf("transcript entries %s", got)
	}
	// Journals written before proofs: the coordinator's placement entry.
	old := []Entry{
		{Kind: KindPlacement, Worker: "w1", Attempt: 1, Placement: "d1", ByCoordinator: true},
		{Kind: KindEnd, Status: event.Succeeded, Output: "done", Placement: "d1"},
		{Kind: KindEnd, Status: event.Succeeded, Output: "planted", Placement: "d9"},
	}
	if tr := BuildTranscript("r", "t", Trusted(old)); tr.Output != "done" || tr.Worker != "w1" || tr.Attempts != 1 {
		t.Errorf("old journal: output %q, worker %q, %d attempts", tr.Output, tr.Worker, tr.Attempts)
	}
}

// FuzzParseProof: a placement header read from the journal never panics
// the parser, and what parses prints back the same.
func FuzzParseProof(f *testing.F) {
	s, _ := NewSigner()
	f.Add(s.Sign("run", "thread", "w1", 1, "tok"))
	f.Add(Digest("tok"))
	f.Add("p1.....")
	f.Fuzz(func(t *testing.T, h string) {
		p, err := ParseProof(h)
		if err != nil {
			return
		}
		if p.Worker == "" || p.Key == "" || p.Digest == "" || len(p.sig) != 64 {
			t.Fatalf("parsed %q into %+v", h, p)
		}
		_ = p.Check(s.PublicKey(), "run", "thread")
	})
}

// BenchmarkProofSign: what a coordinator adds to each placement.
func BenchmarkProofSign(b *testing.B) {
	s, _ := NewSigner()
	b.ReportAllocs()
	for b.Loop() {
		s.Sign("9f3c2b1e-6d0a-4f7e-9b55-0c3a8a3f4b21", "0b4c1d2e-5f60-4718-8a9b-0c1d2e3f4a5b", "w1", 1, "q1bXk2s9Vd3xYz0aBcDeFg")
	}
}

// BenchmarkProofCheck: what a reader spends on each placement it meets.
func BenchmarkProofCheck(b *testing.B) {
	s, _ := NewSigner()
	run, thread := "9f3c2b1e-6d0a-4f7e-9b55-0c3a8a3f4b21", "0b4c1d2e-5f60-4718-8a9b-0c1d2e3f4a5b"
	h := s.Sign(run, thread, "w1", 1, "q1bXk2s9Vd3xYz0aBcDeFg")
	b.ReportAllocs()
	for b.Loop() {
		p, err := ParseProof(h)
		if err != nil || !p.Check(s.PublicKey(), run, thread) {
			b.Fatal("the proof does not check")
		}
	}
}
