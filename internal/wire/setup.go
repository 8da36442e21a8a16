package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/formica-run/formica/internal/policy"
	"github.com/formica-run/formica/internal/spec"
	"github.com/formica-run/formica/internal/thread"
)

// A thread's setup is what siblings share: its agent spec without the
// agent's name (each helper's own), its handoff targets' specs and its
// permissions. It travels once per worker, not with every placement: an
// ExecRequest names it by content hash (SetupHash) and carries it
// (Setup) only when its coordinator does not know the worker to hold it.
// A worker keeps setups by hash, and keeps one only if it hashes to its
// name; a worker that holds no setup of that hash answers
// ExecSetupMissing, and the coordinator sends the request again with it.

// TypeThreadSetup is a ThreadSetup's message type;
// TypeExecSetupMissing is the worker's answer to a placement whose
// setup it does not hold.
const (
	TypeThreadSetup      Type = "thread.setup"
	TypeExecSetupMissing Type = "exec.setup_missing"
)

// ThreadSetup is the part of a thread that travels by hash.
type ThreadSetup struct {
	Agent       spec.Agent            `msgpack:"agent"`
	Agents      map[string]spec.Agent `msgpack:"agents,omitempty"`
	Permissions policy.Permissions    `msgpack:"permissions,omitempty"`
}

// ExecSetupMissing says the worker holds no setup of the request's hash.
type ExecSetupMissing struct {
	Worker    string `msgpack:"worker"`
	SetupHash string `msgpack:"setup_hash"`
}

// EncodeSetup is th's setup as it travels, and its hash.
func EncodeSetup(th *thread.Thread) (hash string, body []byte) {
	s := ThreadSetup{Agent: th.Agent, Agents: th.Agents, Permissions: th.Permissions}
	s.Agent.Name = ""
	body = encodeSorted(TypeThreadSetup, s)
	return SetupHash(body), body
}

// encodeSorted is MustEncode with map keys in order, so equal setups
// encode, and hash, alike.
func encodeSorted(t Type, body any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(outgoing{t, Version, body}); err != nil {
		panic(fmt.Errorf("wire: encode %s: %w", t, err))
	}
	return buf.Bytes()
}

// SetupHash is the content hash naming an encoded setup.
func SetupHash(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// StripSetup leaves th as it travels beside its setup's hash: the
// setup's fields empty, the agent's name kept.
func StripSetup(th *thread.Thread) {
	th.Agent = spec.Agent{Name: th.Agent.Name}
	th.Agents, th.Permissions = nil, nil
}

// SetSetup gives th, which travelled without its setup, setup s
// again, in place.
func SetSetup(th *thread.Thread, s *ThreadSetup) {
	name := th.Agent.Name
	th.Agent, th.Agents, th.Permissions = s.Agent, s.Agents, s.Permissions
	th.Agent.Name = name
}
