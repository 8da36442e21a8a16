package store

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/journal"
)

// KeysBucket is the KV bucket of the coordinators' public placement keys
// (journal.Signer), keyed by key id: what a thread's journal entries are
// checked with on replay and in transcripts (journal.Proof). Only
// coordinators write it; anyone who reads journals reads it. It holds no
// secret: each private key stays in the memory of the coordinator that
// made it.
const KeysBucket = "formica_keys"

// KeyRepublish is how often a coordinator publishes its placement key
// again: the bucket keeps a key for Retention and a day after its last
// publication, so a key outlives every journal entry it vouches for.
const KeyRepublish = time.Hour

// keysConfig is the keys bucket of cfg.
func keysConfig(cfg Config) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: KeysBucket, Description: "Formica coordinators' placement proof keys",
		History: 1, TTL: cfg.Retention + 24*time.Hour, Storage: jetstream.FileStorage, Replicas: cfg.Replicas}
}

// placementKeys looks the keys bucket up once and caches the keys read.
type placementKeys struct {
	mu   sync.Mutex
	kv   jetstream.KeyValue
	keys map[string]ed25519.PublicKey
}

// PublishPlacementKey publishes s's public key, so that proofs it signs
// check; a coordinator publishes it before it places anything, and again
// every KeyRepublish.
func (s *Store) PublishPlacementKey(ctx context.Context, signer *journal.Signer) error {
	kv, err := s.keysBucket(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := kv.Put(ctx, signer.KeyID(), signer.PublicKey()); err != nil {
		return fmt.Errorf("store: publish placement key: %w", err)
	}
	return nil
}

// keysBucket returns the keys bucket: opened by a coordinator's Open,
// looked up on first use by anyone else.
func (s *Store) keysBucket(ctx context.Context) (jetstream.KeyValue, error) {
	s.pkeys.mu.Lock()
	defer s.pkeys.mu.Unlock()
	if s.pkeys.kv != nil {
		return s.pkeys.kv, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, KeysBucket)
	if err != nil {
		return nil, fmt.Errorf("store: placement keys: %w", err)
	}
	s.pkeys.kv = kv
	return kv, nil
}

// placementKey returns the public key id names, if a coordinator
// published it.
func (s *Store) placementKey(ctx context.Context, id string) (ed25519.PublicKey, bool) {
	s.pkeys.mu.Lock()
	pub, ok := s.pkeys.keys[id]
	s.pkeys.mu.Unlock()
	if ok {
		return pub, true
	}
	kv, err := s.keysBucket(ctx)
	if err != nil {
		s.log.Warn("store: placement keys unreadable: journal entries under proofs do not count", "err", err)
		return nil, false
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	e, err := kv.Get(ctx, id)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.Warn("store: placement key unreadable", "key", id, "err", err)
		}
		return nil, false
	}
	pub = ed25519.PublicKey(e.Value())
	if len(pub) != ed25519.PublicKeySize || journal.KeyID(pub) != id {
		return nil, false
	}
	s.pkeys.mu.Lock()
	if s.pkeys.keys == nil {
		s.pkeys.keys = map[string]ed25519.PublicKey{}
	}
	s.pkeys.keys[id] = pub
	s.pkeys.mu.Unlock()
	return pub, true
}

// proofs checks the placement proofs of one read of a journal, each once.
type proofs struct {
	s       *Store
	run     string
	checked map[string]*journal.Proof // thread and header -> the proof, nil if it does not check
}

// check sets e's Proof when its placement header is a proof that a
// published coordinator key signed for e's thread and run, and its
// Placement to the proof's digest.
func (p *proofs) check(ctx context.Context, e *journal.Entry) {
	if !journal.IsProof(e.Placement) {
		return
	}
	k := e.ThreadID + "\x00" + e.Placement
	pr, done := p.checked[k]
	if !done {
		pr = p.checkOne(ctx, e.ThreadID, e.Placement)
		if p.checked == nil {
			p.checked = map[string]*journal.Proof{}
		}
		p.checked[k] = pr
	}
	if pr != nil {
		e.Proof, e.Placement = pr, pr.Digest
	}
}

func (p *proofs) checkOne(ctx context.Context, thread, header string) *journal.Proof {
	pr, err := journal.ParseProof(header)
	if err != nil {
		return nil
	}
	pub, ok := p.s.placementKey(ctx, pr.Key)
	if !ok || !pr.Check(pub, p.run, thread) {
		return nil
	}
	return &pr
}
