package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// A thread's spec travels once per worker, not with every placement: an
// ExecRequest names it by content hash (SpecHash) and carries it (Spec)
// only when its coordinator does not know the worker to hold it. The spec
// is what siblings share: the agent without its name (each helper's own),
// its handoff targets and its permissions. A worker keeps specs by hash,
// and keeps one only if it hashes to its name; a worker that holds no spec
// of that hash answers ExecSpecMissing, and the coordinator sends the
// request again with the spec.

// TypeThreadSpec is a ThreadSpec's message type; TypeExecSpecMissing is
// the worker's answer to a placement whose spec it does not hold.
const (
	TypeThreadSpec      Type = "thread.spec"
	TypeExecSpecMissing Type = "exec.spec_missing"
)

// ThreadSpec is the part of a thread that travels by hash.
type ThreadSpec struct {
	Agent       spec.Agent            `msgpack:"agent"`
	Agents      map[string]spec.Agent `msgpack:"agents,omitempty"`
	Permissions policy.Permissions    `msgpack:"permissions,omitempty"`
}

// ExecSpecMissing says the worker holds no spec of the request's hash.
type ExecSpecMissing struct {
	Worker   string `msgpack:"worker"`
	SpecHash string `msgpack:"spec_hash"`
}

// EncodeSpec is th's spec as it travels, and its hash.
func EncodeSpec(th *thread.Thread) (hash string, body []byte) {
	s := ThreadSpec{Agent: th.Agent, Agents: th.Agents, Permissions: th.Permissions}
	s.Agent.Name = ""
	body = encodeSorted(TypeThreadSpec, s)
	return SpecHash(body), body
}

// encodeSorted is MustEncode with map keys in order, so equal specs encode,
// and hash, alike.
func encodeSorted(t Type, body any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	err := errors.Join(
		enc.EncodeMapLen(3),
		enc.EncodeString("t"), enc.EncodeString(string(t)),
		enc.EncodeString("v"), enc.EncodeInt(Version),
		enc.EncodeString("b"), enc.Encode(body),
	)
	if err != nil {
		panic(fmt.Errorf("wire: encode %s: %w", t, err))
	}
	return buf.Bytes()
}

// SpecHash is the content hash naming an encoded spec.
func SpecHash(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// StripSpec leaves th as it travels beside its spec's hash: its spec's
// fields empty, the agent's name kept.
func StripSpec(th *thread.Thread) {
	th.Agent = spec.Agent{Name: th.Agent.Name}
	th.Agents, th.Permissions = nil, nil
}

// SetSpec gives th, which travelled without its spec, spec s again, in
// place.
func SetSpec(th *thread.Thread, s *ThreadSpec) {
	name := th.Agent.Name
	th.Agent, th.Agents, th.Permissions = s.Agent, s.Agents, s.Permissions
	th.Agent.Name = name
}
