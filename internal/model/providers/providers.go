// Package providers opens a model from its reference, choosing the provider by
// the reference's prefix. It is the one place that knows every provider: which
// exist, which need a model name, and which environment variables they read.
package providers

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/formica-run/formica/internal/model"
	"github.com/formica-run/formica/internal/model/anthropic"
	"github.com/formica-run/formica/internal/model/openai"
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

// CheckRef reports whether ref names a known provider and, where the
// provider needs one, a model: what Open would refuse before reading any
// environment.
func CheckRef(ref string) error {
	r, err := model.ParseRef(ref)
	if err != nil {
		return err
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
// the missing variables.
func CheckEnv(ref string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	r, err := model.ParseRef(ref)
	if err != nil {
		return err
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

// Open returns the model ref names. Credentials and endpoints come from the
// environment of this process (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
func Open(ref string) (model.Model, error) {
	if err := CheckRef(ref); err != nil {
		return nil, err
	}
	if err := CheckEnv(ref, nil); err != nil {
		return nil, err
	}
	r, _ := model.ParseRef(ref)
	switch r.Provider {
	case "openai":
		return openai.FromEnv(r.Name)
	case "anthropic":
		return anthropic.FromEnv(r.Name)
	case "scripted":
		return scripted.Load(r.Name)
	}
	return sim.New(), nil
}
