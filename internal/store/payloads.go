package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/formica-run/formica/internal/ids"
)

// Transfers keep payloads too large for one NATS message (over the
// server's max payload, 1 MiB by default) out of band: the sender writes
// the bytes into the stream TransfersStream and sends the returned
// reference instead, the receiver reads the bytes back by that reference.
// References are opaque strings, valid on every process connected to the
// same NATS system. *Store is the transport's natstransport.Offloader
// (PutPayload, GetPayload), the interface its consumer owns.
//
// One stream holds every party's bodies, so the streams do not grow with
// the fleet; its subjects keep the parties apart, in places (subject
// prefixes): CoordinatorsPlace, where the coordinators write what they
// send clients; WorkerPlace(w), where worker w writes its bodies; and
// ToWorkerPlace(w), where the coordinators write the bodies they send w.
// A body is a run of chunks, chunk i on a subject of its own,
// "<place>.<random>.<i>", each read by a direct get of the last message on
// that subject, whose API subject names it
// ($JS.API.DIRECT.GET.FORMICA_TRANSFERS.<subject>). So a worker's
// credentials write in its own place and read in the place the
// coordinators write to it, and nothing else (a batched direct get names
// its subjects in its body, where no permission looks, and is not used):
// no worker reads what was sent to another, nor has the server answer a
// direct get with bytes it wrote itself (an answer goes to whatever reply
// subject the asker names, and the server publishes it there). A
// reference names its place, and GetPayload reads it only when that is the
// place of the party the message came from (from), so no message can make
// its reader fetch, or drop, a body someone else wrote.
//
// Only coordinators delete bodies (the authority; a purge of the body's
// subjects): a worker may not purge, whose API subject names no filter,
// nor delete messages by sequence, which name no subject. What a worker
// sends is deleted by the coordinator that reads it, what a coordinator
// sends by that coordinator once the exchange is over; the stream's
// MaxAge (Config.Retention) bounds the rest, a worker's journal entries
// kept by reference among them.

// TransfersStream holds the bodies sent by reference, every party's.
const TransfersStream = "FORMICA_TRANSFERS"

// transfersStreamConfig is TransfersStream's configuration: every body for
// Retention at most, read by direct gets. It allows no rollup, per-message
// TTL, schedule, counter or batch (the defaults): headers that would let a
// writer purge past its own subjects, keep a body past MaxAge or have the
// server publish elsewhere.
func transfersStreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        TransfersStream,
		Description: "Formica message bodies over the NATS max payload, every party's under its own subjects",
		Subjects:    []string{transfersRoot + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.Retention,
		AllowDirect: true,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	}
}

// Places: subject prefixes of TransfersStream.
const (
	transfersRoot = "formica.transfers"
	// CoordinatorsPlace is where the coordinators write the bodies they
	// send to clients (and their own journal entries' large ones).
	CoordinatorsPlace = transfersRoot + ".coord"
	fromWorkers       = transfersRoot + ".from."
	toWorkers         = transfersRoot + ".to."
)

// WorkerPlace is the place of worker id (one subject token), where it
// writes its bodies.
func WorkerPlace(id string) string { return fromWorkers + id }

// ToWorkerPlace is where the coordinators write the bodies they send
// worker id, which it reads there.
func ToWorkerPlace(id string) string { return toWorkers + id }

// isPlace reports whether place is a party's place.
func isPlace(place string) bool {
	return place == CoordinatorsPlace || isWorkerPlace(place, fromWorkers) || isWorkerPlace(place, toWorkers)
}

// isWorkerPlace reports whether place is a worker's under prefix.
func isWorkerPlace(place, prefix string) bool {
	id, ok := strings.CutPrefix(place, prefix)
	return ok && ids.CheckToken(id) == nil
}

// FromCoordinators is the sender (natstransport.Config.Sender) of every
// message a client receives: only coordinators send it requests or answer
// its own, so a reference must name the coordinators' place.
func FromCoordinators(string) string { return CoordinatorsPlace }

// ToWorker is the place worker id reads what the coordinators send it
// from (natstransport.Config.Sender of a worker), ToWorkerPlace(id).
func ToWorker(id string) func(string) string {
	place := ToWorkerPlace(id)
	return func(string) string { return place }
}

// ErrNoTransfers reports a body too large for one message from a store
// that has no place of its own (a client's): clients send every message
// inline, within the NATS max payload.
var ErrNoTransfers = errors.New("store: this party has no transfers place: the body must fit one NATS message")

// ErrForeignRef reports a reference into a place other than its sender's,
// or one this store may not delete.
var ErrForeignRef = errors.New("store: reference outside its sender's place")

// Chunks: at most maxChunk bytes each, and under the connection's max
// payload by chunkHeadroom (the stream's headers on a direct get's
// answer); chunkWindow direct gets are asked at once.
const (
	maxChunk      = 256 << 10
	chunkHeadroom = 4 << 10
	chunkWindow   = 8
)

// PutPayload stores data and returns its reference: in this store's own
// place, or, for a coordinator's store, in to, the ToWorkerPlace of the
// worker it is sent to ("" for none: its own).
func (s *Store) PutPayload(ctx context.Context, to string, data []byte) (string, error) {
	if s.place == "" {
		return "", fmt.Errorf("store: put payload of %d bytes: %w", len(data), ErrNoTransfers)
	}
	place := s.place
	if to != "" && to != s.place {
		if s.place != CoordinatorsPlace || !isWorkerPlace(to, toWorkers) {
			return "", fmt.Errorf("%w: %s may not write into %s", ErrForeignRef, s.place, to)
		}
		place = to
	}
	size := max(1, min(maxChunk, int(s.nc.MaxPayload())-chunkHeadroom))
	sum := sha256.Sum256(data)
	r := payloadRef{place: place, id: uuid.NewString(), sum: hex.EncodeToString(sum[:]), chunks: (len(data) + size - 1) / size}
	for i := range r.chunks {
		m := &nats.Msg{Subject: r.chunk(i), Data: data[i*size : min(len(data), (i+1)*size)]}
		if _, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(TransfersStream)); err != nil {
			return "", fmt.Errorf("store: put payload: chunk %d of %d: %w", i+1, r.chunks, err)
		}
	}
	return r.String(), nil
}

// payloadRef is a parsed reference: "<place>/<random>.<sha256>.<chunks>".
// One of an earlier version names an object of a transfers bucket
// (legacy), read, never deleted, until that bucket is removed (see
// RemoveDrainedTransfers).
type payloadRef struct {
	place, id, sum string
	chunks         int
	legacy         *legacyRef
}

func (r payloadRef) String() string {
	return r.place + "/" + r.id + "." + r.sum + "." + strconv.Itoa(r.chunks)
}

// chunk is the subject of chunk i.
func (r payloadRef) chunk(i int) string { return r.place + "." + r.id + "." + strconv.Itoa(i) }

// parseRef refuses what is not a reference PutPayload made (now or before
// the shared stream).
func parseRef(ref string) (payloadRef, error) {
	bad := fmt.Errorf("%w: %q is not a payload reference", ErrInvalidConfig, ref)
	cut := strings.LastIndexByte(ref, '/')
	if cut < 0 {
		return payloadRef{}, bad
	}
	place, rest := ref[:cut], ref[cut+1:]
	if !strings.HasPrefix(place, transfersRoot+".") {
		return parseLegacyRef(place, rest, bad)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !isPlace(place) || !isSum(parts[1]) || uuid.Validate(parts[0]) != nil {
		return payloadRef{}, bad
	}
	n, err := strconv.ParseUint(parts[2], 10, 31)
	if err != nil || strconv.FormatUint(n, 10) != parts[2] {
		return payloadRef{}, bad
	}
	return payloadRef{place: place, id: parts[0], sum: parts[1], chunks: int(n)}, nil
}

// isSum reports whether s is a sha256 in lower-case hex.
func isSum(s string) bool {
	return len(s) == sha256.Size*2 && strings.Trim(s, "0123456789abcdef") == ""
}

// payloadReadTimeout bounds one payload read, the largest included.
const payloadReadTimeout = 10 * time.Second

// GetPayload returns the payload stored under ref, or ErrNotFound. from is
// the place of the party the reference came from: a reference into any
// other place is refused unread (ErrForeignRef). A body that does not
// match the hash its reference names is refused.
func (s *Store) GetPayload(ctx context.Context, from, ref string) ([]byte, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.legacy != nil || r.place != from {
		return nil, fmt.Errorf("%w: %s, sent by the owner of %q", ErrForeignRef, ref, from)
	}
	return s.readPayload(ctx, r)
}

// readPayload reads a parsed reference.
func (s *Store) readPayload(ctx context.Context, r payloadRef) ([]byte, error) {
	// A body past its retention may lose some chunks before others, and a
	// server may not answer: bound the read.
	ctx, cancel := context.WithTimeout(ctx, payloadReadTimeout)
	defer cancel()
	read := s.readChunks
	if r.legacy != nil {
		read = s.readLegacy
	}
	data, err := read(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("store: get payload %s: %w", r, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != r.sum {
		return nil, fmt.Errorf("%w: payload %s does not match its reference", ErrNotFound, r)
	}
	return data, nil
}

// readChunks reads r's chunks, chunkWindow direct gets in flight, into one
// body: ErrNotFound when one is missing (the body was deleted, aged out,
// or never was).
func (s *Store) readChunks(ctx context.Context, r payloadRef) ([]byte, error) {
	body := []byte{}
	if r.chunks == 0 {
		return body, nil
	}
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox + ".*")
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	held := map[int][]byte{} // chunks come in any order (any replica answers)
	for asked, done := 0, 0; done < r.chunks; {
		for ; asked < r.chunks && asked < done+chunkWindow; asked++ {
			api := "$JS.API.DIRECT.GET." + TransfersStream + "." + r.chunk(asked)
			if err := s.nc.PublishRequest(api, inbox+"."+strconv.Itoa(asked), nil); err != nil {
				return nil, err
			}
		}
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(m.Subject[len(inbox)+1:])
		if _, dup := held[i]; err != nil || dup || i < done || i >= asked {
			return nil, fmt.Errorf("answer %s to no chunk asked", m.Subject)
		}
		switch status := m.Header.Get("Status"); {
		case status == "404":
			return nil, fmt.Errorf("%w: chunk %d of %d", ErrNotFound, i+1, r.chunks)
		case status == "503":
			return nil, errNoDirect
		case status != "" || m.Header.Get(jetstream.SubjectHeader) != r.chunk(i):
			return nil, fmt.Errorf("chunk %d: status %s %s", i+1, status, m.Header.Get("Description"))
		}
		held[i] = m.Data
		for c, ok := held[done]; ok; c, ok = held[done] {
			body = append(body, c...)
			delete(held, done)
			done++
		}
	}
	return body, nil
}

// MayDeletePayload reports whether this store deletes the payload under
// ref: a coordinator's store (the authority) deletes any body in the
// transfers stream; no other store deletes.
func (s *Store) MayDeletePayload(ref string) bool {
	r, err := parseRef(ref)
	return err == nil && r.legacy == nil && s.place == CoordinatorsPlace && s.transfers != nil
}

// DeletePayload removes the payload stored under ref: it purges the
// subjects of its chunks. Deleting a missing payload is no error, so
// cleanup can be retried freely. Only payload references are deleted, and
// only those MayDeletePayload allows (ErrForeignRef otherwise, asking the
// server nothing).
func (s *Store) DeletePayload(ctx context.Context, ref string) error {
	r, err := parseRef(ref)
	if err != nil {
		return err
	}
	if !s.MayDeletePayload(ref) {
		return fmt.Errorf("%w: %s is not this party's to delete", ErrForeignRef, ref)
	}
	if err := s.transfers.Purge(ctx, jetstream.WithPurgeSubject(r.place+"."+r.id+".>")); err != nil {
		return fmt.Errorf("store: delete payload %s: %w", ref, err)
	}
	return nil
}
