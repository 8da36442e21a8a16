package auth

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
)

// Identity is who a credentials file speaks for.
type Identity struct {
	Role Role
	ID   string
}

// ReadCredsFile reads the role and id a .creds file issued by Issue names
// (its user JWT's name and formica-role tag). A file issued otherwise (nsc)
// without the tag is a client named after its user.
func ReadCredsFile(path string) (Identity, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, fmt.Errorf("auth: %w", err)
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return Identity{}, fmt.Errorf("auth: %s: %w", path, err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return Identity{}, fmt.Errorf("auth: %s: %w", path, err)
	}
	id := Identity{Role: Client, ID: uc.Name}
	for _, tag := range uc.Tags {
		if r, ok := strings.CutPrefix(tag, "formica-role:"); ok {
			if id.Role, err = ParseRole(r); err != nil {
				return Identity{}, err
			}
		}
	}
	return id, nil
}

// Options are the nats.go options of an in-process connection with c.
func (c Credentials) Options() []nats.Option {
	opts := []nats.Option{nats.UserJWTAndSeed(c.JWT, string(c.Seed))}
	if p := InboxPrefix(c.Role, c.ID); p != "" {
		opts = append(opts, nats.CustomInboxPrefix(p))
	}
	return opts
}

// Issuing is the command that issues a credential of role, for messages
// that tell a person how to get the one they need.
func Issuing(role Role) string {
	if role == Worker {
		return "coordinator creds --data-dir <coordinator data dir> --role worker --id <worker id> --out <worker id>.creds"
	}
	return "coordinator creds --data-dir <coordinator data dir> --role " + string(role) + " --out " + string(role) + ".creds"
}

// CheckRole reads the credentials file path and says, at once and without
// dialling, when it holds another role's credential than the one user
// needs (any of want: a coordinator's credential may act as a client).
func CheckRole(path, user string, want ...Role) (Identity, error) {
	id, err := ReadCredsFile(path)
	if err != nil {
		return Identity{}, err
	}
	if slices.Contains(want, id.Role) {
		return id, nil
	}
	return id, fmt.Errorf("%s holds a %s credential (%s %s), but %s needs a %s credential; issue one with: %s",
		path, id.Role, id.Role, id.ID, user, want[0], Issuing(want[0]))
}

// Remedy tells a person refused by the server how to connect as role.
func Remedy(role Role) string {
	return "give a " + string(role) + " credential with --nats-creds FILE or $FORMICA_NATS_CREDS, issued with: " + Issuing(role)
}
