package journal

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// A placement proof is what a thread's entries carry to show that the
// placement that owned the thread wrote them (DESIGN "Trust"), without an
// entry the coordinator stores for each placement. The coordinator that
// places a thread signs, with a key pair of its own, the run, the thread,
// the worker, the attempt and the digest of the placement's token; the
// worker journals that signature with every entry. A reader checks it with
// the coordinator's public key, which coordinators alone publish (the
// store's keys bucket). The signature names its thread and run, so a proof
// copied into another thread or run does not check, and a worker, which
// holds no coordinator's private key, cannot make one: no worker can plant
// work in another thread's history. Anyone who reads the journal may check
// a proof, and learns nothing that lets them make one.

// proofVersion starts every proof: a proof of another form does not check.
const proofVersion = "p1"

// Proof is a placement proof as an entry carries it (ParseProof), once
// checked (Proof.Check).
type Proof struct {
	// Key names the coordinator key that signed it (KeyID).
	Key string
	// Worker and Attempt are the placement's: where the thread ran, and
	// which placement of its execution it was.
	Worker  string
	Attempt int
	// Digest is the placement token's (Digest).
	Digest string
	sig    []byte
}

// ErrBadProof means a proof does not parse.
var ErrBadProof = errors.New("journal: bad placement proof")

// ParseProof reads a proof from its journaled form (Signer.Sign).
func ParseProof(s string) (Proof, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 6 || parts[0] != proofVersion {
		return Proof{}, ErrBadProof
	}
	attempt, err := strconv.Atoi(parts[3])
	if err != nil || parts[1] == "" || parts[2] == "" || parts[4] == "" {
		return Proof{}, ErrBadProof
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[5])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Proof{}, ErrBadProof
	}
	return Proof{Key: parts[1], Worker: parts[2], Attempt: attempt, Digest: parts[4], sig: sig}, nil
}

// IsProof reports whether a journaled placement header is a proof (the
// other form, of journals written before proofs, is a bare digest that a
// coordinator's placement entry vouches for).
func IsProof(s string) bool { return strings.HasPrefix(s, proofVersion+".") }

// Check reports whether p was signed by pub for thread of run.
func (p Proof) Check(pub ed25519.PublicKey, run, thread string) bool {
	if len(pub) != ed25519.PublicKeySize || KeyID(pub) != p.Key {
		return false
	}
	return ed25519.Verify(pub, proofMessage(run, thread, p.Worker, p.Attempt, p.Digest), p.sig)
}

// proofMessage is what a proof signs. Ids hold no NUL, so the fields
// cannot run into one another.
func proofMessage(run, thread, worker string, attempt int, digest string) []byte {
	b := make([]byte, 0, 64+len(run)+len(thread)+len(worker)+len(digest))
	b = append(b, "formica placement proof\x00"...)
	for _, f := range []string{run, thread, worker, strconv.Itoa(attempt), digest} {
		b = append(b, f...)
		b = append(b, 0)
	}
	return b
}

// KeyID names a coordinator's public key: the first 16 hex digits of its
// SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signer is one coordinator's proof key pair. It lives only in the memory
// of the coordinator that made it; the public half is published for readers
// (see the store's PublishPlacementKey).
type Signer struct {
	id   string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// NewSigner makes a fresh key pair.
func NewSigner() (*Signer, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Signer{id: KeyID(pub), priv: priv, pub: pub}, nil
}

// KeyID names the signer's public key.
func (s *Signer) KeyID() string { return s.id }

// PublicKey is the half readers check proofs with.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// Sign returns the proof, in its journaled form, of the placement of
// thread of run on worker, attempt, under token.
func (s *Signer) Sign(run, thread, worker string, attempt int, token string) string {
	digest := Digest(token)
	sig := ed25519.Sign(s.priv, proofMessage(run, thread, worker, attempt, digest))
	return strings.Join([]string{proofVersion, s.id, worker, strconv.Itoa(attempt), digest, base64.RawURLEncoding.EncodeToString(sig)}, ".")
}
