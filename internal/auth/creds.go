package auth

import (
	"fmt"
	"os"
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

// InboxFor is the inbox prefix a connection with credentials file path must
// use, or "" when it has none or may use the default.
func InboxFor(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	id, err := ReadCredsFile(path)
	if err != nil {
		return "", err
	}
	return InboxPrefix(id.Role, id.ID), nil
}

// Options are the nats.go options of an in-process connection with c.
func (c Credentials) Options() []nats.Option {
	opts := []nats.Option{nats.UserJWTAndSeed(c.JWT, string(c.Seed))}
	if p := InboxPrefix(c.Role, c.ID); p != "" {
		opts = append(opts, nats.CustomInboxPrefix(p))
	}
	return opts
}
