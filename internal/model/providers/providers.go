// Package providers opens a model from its reference, choosing the provider by
// the reference's prefix. It is the one place that knows every provider.
package providers

import (
	"fmt"

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

// Open returns the model ref names. Credentials and endpoints come from the
// environment of this process (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
func Open(ref string) (model.Model, error) {
	r, err := model.ParseRef(ref)
	if err != nil {
		return nil, err
	}
	switch r.Provider {
	case "openai":
		if r.Name == "" {
			return nil, fmt.Errorf("%w: %q names no model (want openai:<model>)", model.ErrBadRef, ref)
		}
		return openai.FromEnv(r.Name)
	case "anthropic":
		if r.Name == "" {
			return nil, fmt.Errorf("%w: %q names no model (want anthropic:<model>)", model.ErrBadRef, ref)
		}
		return anthropic.FromEnv(r.Name)
	case "sim":
		return sim.New(), nil
	case "scripted":
		if r.Name == "" {
			return nil, fmt.Errorf("%w: %q names no file (want scripted:<file>)", model.ErrBadRef, ref)
		}
		return scripted.Load(r.Name)
	}
	return nil, fmt.Errorf("%w: %q (known: openai, anthropic, sim, scripted)", model.ErrUnknownProvider, r.Provider)
}
