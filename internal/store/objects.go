package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Objects (large records, payloads over the max payload) are read by
// direct gets alone: the object's info (the last message on its meta
// subject), then its chunks one by one. ObjectStore.Get would create a
// consumer for the chunks, and a credential that may create consumers on a
// stream may point one's delivery at any subject: the chunks someone wrote
// there would be republished as a message on another worker's subject, the
// server publishing it. So neither workers nor clients may create
// consumers on the object stores, and they read them this way.

// maxObjectPrealloc bounds what a read reserves up front from the size an
// object's info claims (an info is as trustworthy as its writer).
const maxObjectPrealloc = 16 << 20

// readObject returns the body of object name in ob, whose stream is st,
// or jetstream.ErrObjectNotFound (a deleted object, or one whose chunks
// are gone). A body that does not match its info's size, chunk count or
// digest is refused.
func readObject(ctx context.Context, ob jetstream.ObjectStore, st jetstream.Stream, bucket, name string) ([]byte, error) {
	info, err := ob.GetInfo(ctx, name)
	if err != nil {
		return nil, err
	}
	if info.Size == 0 {
		return []byte{}, nil
	}
	if info.Chunks == 0 || info.NUID == "" {
		return nil, fmt.Errorf("object %s: %w", name, jetstream.ErrBadObjectMeta)
	}
	var body bytes.Buffer
	body.Grow(int(min(info.Size, maxObjectPrealloc)))
	digest := sha256.New()
	subject := "$O." + bucket + ".C." + info.NUID
	seq := uint64(1)
	for range info.Chunks {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, jetstream.ErrObjectNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("object %s: chunk: %w", name, err)
		}
		if uint64(body.Len()+len(m.Data)) > info.Size {
			return nil, fmt.Errorf("object %s: chunks past its size %d", name, info.Size)
		}
		body.Write(m.Data)
		digest.Write(m.Data)
		seq = m.Sequence + 1
	}
	if uint64(body.Len()) != info.Size {
		return nil, fmt.Errorf("object %s: %d bytes, its info says %d", name, body.Len(), info.Size)
	}
	if want := "SHA-256=" + base64.URLEncoding.EncodeToString(digest.Sum(nil)); info.Digest != want {
		return nil, fmt.Errorf("object %s: digest mismatch", name)
	}
	return body.Bytes(), nil
}

// objectStream is the stream behind object store bucket, looked up once.
func (s *Store) objectStream(ctx context.Context, bucket string) (jetstream.Stream, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if st, ok := s.objStreams[bucket]; ok {
		return st, nil
	}
	st, err := s.js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("store: object store %s: %w", bucket, err)
	}
	if s.objStreams == nil {
		s.objStreams = map[string]jetstream.Stream{}
	}
	s.objStreams[bucket] = st
	return st, nil
}

// objBucket is an object store and its stream.
type objBucket struct {
	ob jetstream.ObjectStore
	st jetstream.Stream
}

// maxBuckets bounds the transfers buckets a store keeps looked up (a
// coordinator reads one per worker); past it the cache starts over.
const maxBuckets = 4096

// bucket is transfers bucket name, looked up on first use and again on
// every use until found: a worker may start before any coordinator made
// its bucket.
func (s *Store) bucket(ctx context.Context, name string) (objBucket, error) {
	s.tmu.Lock()
	b, ok := s.buckets[name]
	s.tmu.Unlock()
	if ok {
		return b, nil
	}
	ob, err := s.js.ObjectStore(ctx, name)
	if err != nil {
		return objBucket{}, fmt.Errorf("store: object store %s: %w", name, err)
	}
	st, err := s.js.Stream(ctx, "OBJ_"+name)
	if err != nil {
		return objBucket{}, fmt.Errorf("store: object store %s: %w", name, err)
	}
	b = objBucket{ob: ob, st: st}
	s.tmu.Lock()
	if s.buckets == nil || len(s.buckets) >= maxBuckets {
		s.buckets = map[string]objBucket{}
	}
	s.buckets[name] = b
	s.tmu.Unlock()
	return b, nil
}
