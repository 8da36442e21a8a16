// Package auth holds Formica's NATS trust: an operator, a system account and
// the Formica account, whose signing key issues each role its own user
// credentials (coordinator, worker, client) with the subjects that role may
// use. The embedded server runs in the NATS JWT (operator) mode trusting
// this operator, so credentials issued later — by `coordinator creds` from
// the same --data-dir — are accepted without a restart, and an external
// cluster can be set up the same way with nsc.
package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Dir is where, under a coordinator's data dir, the trust's seeds are kept.
const Dir = "auth"

// ErrNoAuthority means the data dir holds no trust (no coordinator ever
// started there with authentication).
var ErrNoAuthority = errors.New("auth: no NATS trust in this data dir")

// Authority is the trust of one Formica deployment.
type Authority struct {
	signer                             nkeys.KeyPair
	operatorJWT, systemJWT, accountJWT string
	accountPub, systemPub              string
	operatorClaims                     *jwt.OperatorClaims
}

// seeds are the files of the authority, each holding one nkey seed.
var seeds = []struct {
	file   string
	create func() (nkeys.KeyPair, error)
}{
	{"operator.nk", nkeys.CreateOperator},
	{"system.nk", nkeys.CreateAccount},
	{"account.nk", nkeys.CreateAccount},
	{"signing.nk", nkeys.CreateAccount},
}

// Open loads the authority kept under dataDir, creating it on first use
// when create is set. Seeds are written with mode 0600 in a 0700 directory.
func Open(dataDir string, create bool) (*Authority, error) {
	dir := filepath.Join(dataDir, Dir)
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	kps := make([]nkeys.KeyPair, len(seeds))
	for i, s := range seeds {
		path := filepath.Join(dir, s.file)
		seed, err := os.ReadFile(path)
		switch {
		case err == nil:
			if kps[i], err = nkeys.FromSeed([]byte(strings.TrimSpace(string(seed)))); err != nil {
				return nil, fmt.Errorf("auth: %s: %w", path, err)
			}
		case errors.Is(err, os.ErrNotExist) && create:
			if kps[i], err = s.create(); err != nil {
				return nil, fmt.Errorf("auth: %w", err)
			}
			seed, _ := kps[i].Seed()
			if err := writeSecret(path, append(seed, '\n')); err != nil {
				return nil, err
			}
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("%w: %s is missing", ErrNoAuthority, path)
		default:
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	return build(kps[0], kps[1], kps[2], kps[3])
}

// NewEphemeral returns an authority that lives only in memory, for a
// process whose clients are all in-process (`formica run`).
func NewEphemeral() (*Authority, error) {
	kps := make([]nkeys.KeyPair, len(seeds))
	for i, s := range seeds {
		var err error
		if kps[i], err = s.create(); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	return build(kps[0], kps[1], kps[2], kps[3])
}

func build(op, sys, acc, signer nkeys.KeyPair) (*Authority, error) {
	a := &Authority{signer: signer}
	opPub, _ := op.PublicKey()
	a.systemPub, _ = sys.PublicKey()
	a.accountPub, _ = acc.PublicKey()
	signerPub, _ := signer.PublicKey()

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "formica"
	oc.SystemAccount = a.systemPub
	var err error
	if a.operatorJWT, err = oc.Encode(op); err != nil {
		return nil, fmt.Errorf("auth: operator: %w", err)
	}
	a.operatorClaims = oc

	sc := jwt.NewAccountClaims(a.systemPub)
	sc.Name = "SYS"
	if a.systemJWT, err = sc.Encode(op); err != nil {
		return nil, fmt.Errorf("auth: system account: %w", err)
	}
	ac := jwt.NewAccountClaims(a.accountPub)
	ac.Name = AccountName
	ac.SigningKeys.Add(signerPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit,
		Streams: jwt.NoLimit, Consumer: jwt.NoLimit}
	if a.accountJWT, err = ac.Encode(op); err != nil {
		return nil, fmt.Errorf("auth: account: %w", err)
	}
	return a, nil
}

// AccountName names the Formica account.
const AccountName = "FORMICA"

// Configure puts the server in operator mode trusting this authority, with
// a memory resolver preloaded with its two accounts.
func (a *Authority) Configure(o *server.Options) error {
	res := &server.MemAccResolver{}
	if err := errors.Join(res.Store(a.systemPub, a.systemJWT), res.Store(a.accountPub, a.accountJWT)); err != nil {
		return fmt.Errorf("auth: resolver: %w", err)
	}
	o.TrustedOperators = []*jwt.OperatorClaims{a.operatorClaims}
	o.AccountResolver = res
	o.SystemAccount = a.systemPub
	return nil
}

// Account is the Formica account's public key (for nsc and monitoring).
func (a *Authority) Account() string { return a.accountPub }

// ServerConfig is the nats-server configuration that trusts this authority
// as Configure does for the embedded server: operator mode, the system
// account, and a memory resolver preloaded with both accounts. An external
// NATS server or cluster includes it from its own configuration; then the
// credentials of `coordinator creds` from the same data dir work there too.
func (a *Authority) ServerConfig() string {
	return fmt.Sprintf(`# The NATS trust of a Formica deployment (coordinator creds --nats-server-conf).
# Include it from each server's configuration; it holds public keys and
# signed JWTs only, no seed.
operator: %s
system_account: %s
resolver: MEMORY
resolver_preload: {
  %s: %s
  %s: %s
}
`, a.operatorJWT, a.systemPub, a.systemPub, a.systemJWT, a.accountPub, a.accountJWT)
}

func writeSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}
