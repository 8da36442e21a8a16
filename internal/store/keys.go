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

// cachedPlacementKey returns the public key id names if it was read
// before.
func (s *Store) cachedPlacementKey(id string) (ed25519.PublicKey, bool) {
	s.pkeys.mu.Lock()
	defer s.pkeys.mu.Unlock()
	pub, ok := s.pkeys.keys[id]
	return pub, ok
}

// placementKey returns the public key id names, if a coordinator
// published it.
func (s *Store) placementKey(ctx context.Context, id string) (ed25519.PublicKey, bool) {
	if pub, ok := s.cachedPlacementKey(id); ok {
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
	return s.cacheKey(id, e.Value())
}

// cacheKey keeps the key value read under id, if it is the key id names.
func (s *Store) cacheKey(id string, value []byte) (ed25519.PublicKey, bool) {
	pub := ed25519.PublicKey(value)
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

// loadPlacementKeys reads every published key into the cache, by direct
// gets over the bucket's stream (clients may create no consumer there).
func (s *Store) loadPlacementKeys(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return s.readDirect(ctx, kvStream(KeysBucket), kvSubject(KeysBucket, ">"), 1, directBatch, func(m *storedMsg) error {
		if !deleted(m) {
			s.cacheKey(kvKey(KeysBucket, m), m.data)
		}
		return nil
	})
}

// maxKeyMisses bounds the keys one read of a journal asks the keys bucket
// for and does not find: a proof under a key nobody published does not
// check, and a writer varying its key ids would otherwise cost a request
// each. A run's journals hold proofs of a few keys (one per coordinator
// process that placed its threads), all published.
const maxKeyMisses = 16

// proofs checks the placement proofs of one read of a journal, each once.
// It is safe for concurrent use.
type proofs struct {
	s   *Store
	run string

	mu      sync.Mutex
	checked map[string]*journal.Proof // thread and header -> the proof, nil if it does not check
	missing map[string]bool           // key ids not published
	all     bool                      // every published key was read (loadPlacementKeys)
}

// lookUp asks the keys bucket for key id, once; past maxKeyMisses keys not
// found, it reads every published key once instead, and then asks no more.
func (p *proofs) lookUp(ctx context.Context, id string) (ed25519.PublicKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.missing[id] || p.all:
		return p.s.cachedPlacementKey(id)
	case len(p.missing) >= maxKeyMisses:
		if err := p.s.loadPlacementKeys(ctx); err != nil {
			p.s.log.Warn("store: placement keys unreadable: journal entries under proofs do not count", "err", err)
		}
		p.all = true
		return p.s.cachedPlacementKey(id)
	}
	pub, ok := p.s.placementKey(ctx, id)
	if !ok {
		if p.missing == nil {
			p.missing = map[string]bool{}
		}
		p.missing[id] = true
	}
	return pub, ok
}

// check returns the proof header carries when a published coordinator key
// signed it for thread of run, or nil.
func (p *proofs) check(ctx context.Context, thread, header string) *journal.Proof {
	k := thread + "\x00" + header
	p.mu.Lock()
	pr, done := p.checked[k]
	p.mu.Unlock()
	if done {
		return pr
	}
	pr = p.checkOne(ctx, thread, header)
	p.mu.Lock()
	if p.checked == nil {
		p.checked = map[string]*journal.Proof{}
	}
	p.checked[k] = pr
	p.mu.Unlock()
	return pr
}

func (p *proofs) checkOne(ctx context.Context, thread, header string) *journal.Proof {
	pr, err := journal.ParseProof(header)
	if err != nil {
		return nil
	}
	pub, ok := p.s.cachedPlacementKey(pr.Key)
	if !ok {
		pub, ok = p.lookUp(ctx, pr.Key)
	}
	if !ok || !pr.Check(pub, p.run, thread) {
		return nil
	}
	return &pr
}
