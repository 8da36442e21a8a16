package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Objects (large records, payloads over the max payload) are read by
// direct gets alone: the object's info (the last message on its meta
// subject), then its chunks in batches. ObjectStore.Get would create a
// consumer for the chunks, and a credential that may create consumers on a
// stream may point one's delivery at any subject: the chunks someone wrote
// there would be republished as a message on another worker's subject, the
// server publishing it. So neither workers nor clients may create
// consumers, and they read objects this way.

// objectBatch is how many chunks one batched direct get asks for: a chunk
// is up to 128 KiB, so a batch stays about 1 MiB.
const objectBatch = 8

// ObjectStream is the JetStream stream behind object store bucket.
func ObjectStream(bucket string) string { return "OBJ_" + bucket }

// readObject returns the body of object name in ob, whose bucket is
// bucket, or jetstream.ErrObjectNotFound (a deleted object, or one whose
// chunks are gone). A body that does not match its info's size, chunk
// count or digest is refused.
func (s *Store) readObject(ctx context.Context, ob jetstream.ObjectStore, bucket, name string) ([]byte, error) {
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
	digest := sha256.New()
	chunks, over := uint32(0), false
	err = s.readDirect(ctx, ObjectStream(bucket), "$O."+bucket+".C."+info.NUID, 1, objectBatch, func(m *storedMsg) error {
		if over || uint64(body.Len()+len(m.data)) > info.Size {
			over = true
			return nil
		}
		chunks++
		body.Write(m.data)
		digest.Write(m.data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("object %s: chunks: %w", name, err)
	}
	if over {
		return nil, fmt.Errorf("object %s: chunks past its size %d", name, info.Size)
	}
	if chunks == 0 {
		return nil, jetstream.ErrObjectNotFound
	}
	if uint64(body.Len()) != info.Size || chunks != info.Chunks {
		return nil, fmt.Errorf("object %s: %d bytes in %d chunks, its info says %d in %d", name, body.Len(), chunks, info.Size, info.Chunks)
	}
	if want := "SHA-256=" + base64.URLEncoding.EncodeToString(digest.Sum(nil)); info.Digest != want {
		return nil, fmt.Errorf("object %s: digest mismatch", name)
	}
	return body.Bytes(), nil
}
