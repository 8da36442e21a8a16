package auth

import (
	"fmt"
	"time"

	"github.com/formica-run/formica/internal/ids"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
)

// Role is what a credential may do on the NATS plane.
type Role string

// The roles.
const (
	// Coordinator is the control plane: every subject.
	Coordinator Role = "coordinator"
	// Worker hosts threads: its own subjects only (see docs/security.md).
	Worker Role = "worker"
	// Client submits, watches, cancels and approves runs.
	Client Role = "client"
	// Viewer is an operator's read-only credential for dashboards and the
	// nats CLI: stream, KV and object store listings and info, micro
	// service discovery and the events; no run contents, no writes.
	Viewer Role = "viewer"
)

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case Coordinator, Worker, Client, Viewer:
		return r, nil
	}
	return "", fmt.Errorf("auth: unknown role %q (want coordinator, worker, client or viewer)", s)
}

// InboxPrefix is the reply-subject root a role's connection must use
// (nats.CustomInboxPrefix): its credential may subscribe only there.
func InboxPrefix(role Role, id string) string {
	if role == Coordinator {
		return "" // the default, _INBOX
	}
	return "_FORMICA." + string(role) + "." + id
}

// Credentials are one user's JWT and nkey seed.
type Credentials struct {
	Role Role
	ID   string
	JWT  string
	Seed []byte
}

// File is the credentials in the standard .creds format (nats --creds,
// --nats-creds).
func (c Credentials) File() ([]byte, error) { return jwt.FormatUserConfig(c.JWT, c.Seed) }

// Issue creates credentials for role under id (a worker's id: one subject
// token; a client's: a name), signed by the account's signing key.
func (a *Authority) Issue(role Role, id string) (Credentials, error) {
	if err := ids.CheckToken(id); err != nil {
		return Credentials{}, fmt.Errorf("auth: id: %w", err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Credentials{}, fmt.Errorf("auth: %w", err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = id
	uc.IssuerAccount = a.accountPub
	uc.Tags.Add("formica-role:" + string(role))
	permit(&uc.Permissions, role, id)
	token, err := uc.Encode(a.signer)
	if err != nil {
		return Credentials{}, fmt.Errorf("auth: sign %s credentials: %w", role, err)
	}
	return Credentials{Role: role, ID: id, JWT: token, Seed: seed}, nil
}

// permit writes role's permissions; docs/security.md is
// their description and must follow any change here.
func permit(p *jwt.Permissions, role Role, id string) {
	switch role {
	case Coordinator:
		p.Pub.Allow.Add(">")
		p.Sub.Allow.Add(">")
	case Worker:
		p.Pub.Allow.Add(
			wire.SubjectWorkerHeartbeat(id),
			wire.SubjectSpawn("*", id), wire.SubjectApproval("*", id), wire.SubjectThreadCancel("*", id),
			wire.SubjectBudget("*", id), wire.SubjectPlacement("*", id), wire.SubjectQuota("*", id),
			// Replies to the coordinators' placements, checked by token; they
			// carry the thread's events too, which only coordinators publish.
			wire.ExecInboxPrefix+".>",
			// Threads' own journal entries (never the coordinator's); they
			// count only under a placement token the worker was given.
			store.SubjectJournal("*", "*", false),
		)
		// In the transfers stream, every party's: its own place written,
		// where its large bodies go, and the place the coordinators write
		// those they send it read, by direct gets whose API subject names
		// the chunk's subject (a subject with wildcards there matches no
		// permission but as the literal tokens it has); and nothing else of
		// JetStream. Not its own place read: a direct get's answer goes to
		// whatever reply subject the asker names, so the server would
		// publish bytes the worker wrote on another's subjects. Not the
		// batched direct get, which names what it reads in its body, where
		// no permission looks; no purge or message delete, for the same
		// reason (coordinators delete bodies). No consumers: one delivers
		// on whatever subject its creator names.
		p.Pub.Allow.Add(store.WorkerPlace(id)+".>", "$JS.API.DIRECT.GET."+store.TransfersStream+"."+store.ToWorkerPlace(id)+".>")
		p.Sub.Allow.Add(
			wire.WorkerSubjectPrefix+id+".>",
			wire.SubjectCoordHeartbeats,
			InboxPrefix(Worker, id)+".>",
			"$SRV.>", // nats micro ls|info|stats
		)
		p.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	case Client:
		p.Pub.Allow.Add(
			// Requests the coordinators answer and act on: the one way a
			// client changes a run (records and the queue are theirs).
			wire.SubjectSubmit, wire.SubjectEnqueue, wire.SubjectCancelRequest, wire.SubjectRunCancel,
			wire.SubjectResume, wire.SubjectWorkers, wire.SubjectAssets, wire.SubjectApprovalDecide,
			// A cancel kept for the coordinator that picks the run up.
			store.SubjectCancels,
			// JetStream reads: stream info and single messages of any stream,
			// by direct gets; no consumer, write, purge, delete,
			// configuration or ack. A consumer delivers on whatever subject
			// its creator names, so the right to create one, on any
			// stream, is a right to have the server publish stored bytes
			// on a worker's exec subject.
			"$JS.API.STREAM.INFO.*", "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.>",
		)
		p.Sub.Allow.Add(wire.EventsAll, InboxPrefix(Client, id)+".>")
		// What the events, records and approvals streams republish as
		// they store it, with no reply subject: how a client follows a
		// run, a record or the approvals without a consumer.
		p.Sub.Allow.Add(store.StoredSubjects...)
		// An approver answers with progress and then its decision.
		p.Resp = &jwt.ResponsePermission{MaxMsgs: -1, Expires: time.Hour}
	case Viewer:
		p.Pub.Allow.Add(ViewerRequests...)
		p.Sub.Allow.Add(wire.EventsAll, InboxPrefix(Viewer, id)+".>")
		// It answers nothing: no response permission.
	}
}

// ViewerRequests are the subjects a viewer publishes on: the requests
// that `nats stream ls|info`, `kv ls|info`, `object ls|info` and `micro
// ls|info|stats` make, each answered in its own inbox. JetStream's
// account info and the stream and consumer listings and infos: names,
// configurations and counts, never a stored message (no direct or
// message get, so no record, journal entry or payload is read), no
// consumer made (one delivers stored bytes on whatever subject its
// creator names), no write, purge, delete or configuration. Micro
// discovery: the services' ping, info and stats, by every name and id.
// The server's answer about the asking user itself (`nats account info`).
var ViewerRequests = []string{
	"$SYS.REQ.USER.INFO",
	"$JS.API.INFO",
	"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.STREAM.INFO.*",
	"$JS.API.CONSUMER.NAMES.*", "$JS.API.CONSUMER.LIST.*", "$JS.API.CONSUMER.INFO.*.*",
	"$SRV.PING", "$SRV.PING.>", "$SRV.INFO", "$SRV.INFO.>", "$SRV.STATS", "$SRV.STATS.>",
}
