// Package providers opens a model from its reference, choosing the provider by
// the reference's prefix or the endpoint it names. It is the one place that
// knows every provider: which exist, which need a model name, which
// environment variables they read, and which endpoints an operator declared
// (endpoints.go).
package providers

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/scripted"
	"github.com/formica-run/formica/internal/model/sim"
)

// Sim is the reference of the built-in deterministic model.
const Sim = "sim"

// Names lists the providers Open knows.
var Names = []string{"openai", "anthropic", "sim", "scripted"}

// ErrMissingCredentials reports a provider whose credentials are not in the
// environment; the message names the variables.
var ErrMissingCredentials = errors.New("missing model provider credentials")

// ErrUnknownEndpoint reports a ref naming an endpoint no providers file
// declares.
var ErrUnknownEndpoint = errors.New("unknown model endpoint")

// CheckRef reports whether ref names a known provider and, where the
// provider needs one, a model: what Open would refuse before reading any
// environment. A named endpoint ("fast/gpt-4o") passes when its name is
// well formed: the workers that call it know whether it is declared.
func CheckRef(ref string) error {
	r, err := model.ParseRef(ref)
	if err != nil {
		return err
	}
	if r.Endpoint {
		if err := checkEndpointName(r.Provider); err != nil {
			return fmt.Errorf("%w: endpoint %q in %q: %w", model.ErrBadRef, r.Provider, ref, err)
		}
		return nil
	}
	switch r.Provider {
	case "openai", "anthropic":
		if r.Name == "" {
			return fmt.Errorf("%w: %q names no model (want %s:<model>)", model.ErrBadRef, ref, r.Provider)
		}
	case "scripted":
		if r.Name == "" {
			return fmt.Errorf("%w: %q names no file (want scripted:<file>)", model.ErrBadRef, ref)
		}
	case "sim":
	default:
		hint := ""
		if !strings.Contains(ref, ":") {
			hint = fmt.Sprintf("; a model needs its provider, e.g. openai:%s", ref)
		}
		return fmt.Errorf("%w %q in %q (known: %s)%s", model.ErrUnknownProvider, r.Provider, ref, strings.Join(Names, ", "), hint)
	}
	return nil
}

// CheckEnv reports whether the environment read by getenv holds what the
// provider of ref needs (nil getenv: this process's environment). It names
// the missing variables. Declared endpoints were checked when their file
// was read.
func CheckEnv(ref string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	r, err := model.ParseRef(ref)
	if err != nil {
		return err
	}
	if r.Endpoint {
		return nil
	}
	set := func(k string) bool { return strings.TrimSpace(getenv(k)) != "" }
	switch r.Provider {
	case "openai":
		if !set("OPENAI_API_KEY") && !set("OPENAI_BASE_URL") {
			return fmt.Errorf("%w: %s needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)", ErrMissingCredentials, ref)
		}
	case "anthropic":
		if !set("ANTHROPIC_API_KEY") && !set("ANTHROPIC_BASE_URL") {
			return fmt.Errorf("%w: %s needs ANTHROPIC_API_KEY", ErrMissingCredentials, ref)
		}
	}
	return nil
}

// defaultOpener opens refs for Open: the default endpoints only.
var defaultOpener = &Opener{}

// Open returns the model ref names, over the default endpoints.
// Credentials and endpoints come from the environment of this process
// (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
func Open(ref string) (model.Model, error) { return defaultOpener.Open(ref) }

// Opener opens model refs over a set of endpoints. Its zero value knows the
// default endpoints only. It is safe for concurrent use.
type Opener struct {
	// Endpoints are the endpoints refs may name (nil: the defaults, read
	// from this process's environment).
	Endpoints *Endpoints
	// Logger receives the providers' retry warnings; default discards.
	Logger *slog.Logger
}

func (o *Opener) endpoints() *Endpoints {
	if o.Endpoints == nil {
		return &Endpoints{getenv: os.Getenv}
	}
	return o.Endpoints
}

// Check reports what Open would refuse of ref before any call: an unknown
// provider or endpoint, or missing credentials.
func (o *Opener) Check(ref string) error {
	if err := CheckRef(ref); err != nil {
		return err
	}
	r, _ := model.ParseRef(ref)
	eps := o.endpoints()
	if r.Endpoint {
		if _, ok := eps.Endpoint(r.Provider); !ok {
			return fmt.Errorf("%w %q in %q (known: %s)", ErrUnknownEndpoint, r.Provider, ref, strings.Join(eps.Names(), ", "))
		}
		return nil
	}
	if eps.Declared(r.Provider) {
		return nil // a declared default was checked with its file
	}
	return CheckEnv(ref, eps.getenv)
}

// Open returns the model ref names. Calls to HTTP endpoints are paced by
// the endpoint's quota: the one a worker shares with its cluster (WithGates
// on the call's context), else one this process keeps.
func (o *Opener) Open(ref string) (model.Model, error) {
	if err := o.Check(ref); err != nil {
		return nil, err
	}
	r, _ := model.ParseRef(ref)
	switch {
	case r.Endpoint, r.Provider == "openai", r.Provider == "anthropic":
		eps := o.endpoints()
		ep, _ := eps.Endpoint(r.Provider)
		return openEndpoint(ep, r.Name, eps.getenv, o.Logger)
	case r.Provider == "scripted":
		return scripted.Load(r.Name)
	}
	return sim.New(), nil
}
