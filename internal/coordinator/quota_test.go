package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/formica-run/formica/internal/quota"
	"github.com/formica-run/formica/internal/wire"
)

// replies hands each reply a handler sends to the test as it is sent.
type replies chan wire.Msg

func (r replies) Reply(m wire.Msg) error { r <- m; return nil }
func (r replies) NoReply() bool          { return false }

// next waits, bounded, for the next reply of type want.
func (r replies) next(t *testing.T, want wire.Type) wire.Msg {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-r:
			if t := wire.Type(m.Type); t == wire.TypeProgress || (t == wire.TypeQuotaWaiting && want != t) {
				continue
			}
			if wire.Type(m.Type) != want {
				t.Fatalf("reply %s (%s), want %s", m.Type, m.Data, want)
			}
			return m
		case <-timeout:
			t.Fatalf("no %s reply", want)
		}
	}
}

func quotaCoordinator() *Coordinator {
	return &Coordinator{quotas: newQuotas(), alive: keepalive{repliers: map[*alivePing]struct{}{}},
		cfg: Config{ID: "c1", Logger: slog.New(slog.DiscardHandler)}}
}

func take(c *Coordinator, worker, id string, inFlight int64) replies {
	r := make(replies, 16)
	msg := wire.Message(wire.TypeQuotaTake, wire.QuotaTake{ID: id, Endpoint: "e", Key: "e http://x",
		Limits: quota.Limits{InFlight: inFlight}, RunID: "run", ThreadID: id})
	msg.Subject = wire.SubjectQuota("c1", worker)
	go c.handleQuota(context.Background(), msg, r)
	return r
}

func done(c *Coordinator, worker, id string, status int) replies {
	r := make(replies, 1)
	msg := wire.Message(wire.TypeQuotaDone, wire.QuotaDone{ID: id, Key: "e http://x", Status: status})
	msg.Subject = wire.SubjectQuota("c1", worker)
	c.handleQuota(context.Background(), msg, r)
	return r
}

// TestQuotaLostWorkerGivesBack: a worker that dies holding the only place
// in flight gives it back, so the next ask is granted.
func TestQuotaLostWorkerGivesBack(t *testing.T) {
	c := quotaCoordinator()
	take(c, "w1", "a", 1).next(t, wire.TypeQuotaGrant)
	waiting := take(c, "w2", "b", 1)
	if m := waiting.next(t, wire.TypeQuotaWaiting); len(m.Data) == 0 {
		t.Fatal("waiting says nothing")
	}
	c.quotaWorkerLost("w1")
	waiting.next(t, wire.TypeQuotaGrant)
	done(c, "w2", "b", 200).next(t, wire.TypeOK)
	take(c, "w3", "c", 1).next(t, wire.TypeQuotaGrant)
	if s := c.quotas.reg.Snapshots(); len(s) != 1 || s[0].InFlight != 1 {
		t.Errorf("snapshot %+v, want one call in flight", s)
	}
}

// TestQuotaWithdrawnAsk: a waiting ask its worker gives up leaves the
// queue without an answer, and a later ask gets the place.
func TestQuotaWithdrawnAsk(t *testing.T) {
	c := quotaCoordinator()
	take(c, "w1", "a", 1).next(t, wire.TypeQuotaGrant)
	waiting := take(c, "w1", "b", 1)
	waiting.next(t, wire.TypeQuotaWaiting)
	done(c, "w1", "b", 0).next(t, wire.TypeOK)
	done(c, "w1", "a", 200).next(t, wire.TypeOK)
	take(c, "w1", "c", 1).next(t, wire.TypeQuotaGrant)
	select {
	case m := <-waiting:
		if wire.Type(m.Type) != wire.TypeProgress {
			t.Errorf("withdrawn ask answered %s", m.Type)
		}
	default:
	}
}

// TestQuotaEndBeforeAsk: an ask whose end overtook it is refused, so the
// place it would take is never held.
func TestQuotaEndBeforeAsk(t *testing.T) {
	c := quotaCoordinator()
	done(c, "w1", "a", 0).next(t, wire.TypeOK)
	take(c, "w1", "a", 1).next(t, wire.TypeError)
	take(c, "w1", "b", 1).next(t, wire.TypeQuotaGrant)
}

// TestQuotaEndOfAnotherWorkersAsk: a worker cannot end another's share.
func TestQuotaEndOfAnotherWorkersAsk(t *testing.T) {
	c := quotaCoordinator()
	take(c, "w1", "a", 1).next(t, wire.TypeQuotaGrant)
	done(c, "w2", "a", 200).next(t, wire.TypeOK)
	if s := c.quotas.reg.Snapshots(); s[0].InFlight != 1 {
		t.Errorf("in flight %d after another worker's end, want 1", s[0].InFlight)
	}
}

// TestQuotaBadAsks: malformed asks are refused with a clear error.
func TestQuotaBadAsks(t *testing.T) {
	c := quotaCoordinator()
	r := make(replies, 1)
	c.handleQuota(context.Background(), wire.Msg{Type: string(wire.TypeQuotaTake), Data: []byte{0xc1}, Subject: wire.SubjectQuota("c1", "w1")}, r)
	r.next(t, wire.TypeError)
	r = make(replies, 1)
	msg := wire.Message(wire.TypeQuotaTake, wire.QuotaTake{ID: "x", Key: "e", Limits: quota.Limits{RequestsPerMinute: -5}})
	msg.Subject = wire.SubjectQuota("c1", "w1")
	c.handleQuota(context.Background(), msg, r)
	r.next(t, wire.TypeError)
}
