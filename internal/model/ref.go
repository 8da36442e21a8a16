package model

import (
	"fmt"
	"strings"
)

// Ref is a parsed model reference: "provider:name" for a provider's default
// endpoint ("openai:gpt-4o", "sim"), or "endpoint/name" for an endpoint an
// operator declared by name in a providers file ("fast/gpt-4o"). The sim
// model has no name.
type Ref struct {
	// Provider is the provider (openai, anthropic, sim, scripted) or, when
	// Endpoint is set, the declared endpoint's name.
	Provider string
	Name     string
	// Endpoint says Provider names a declared endpoint ("fast/gpt-4o").
	Endpoint bool
}

// ParseRef splits a reference such as "openai:gpt-4o", "sim" or
// "fast/gpt-4o". A colon before any slash makes a provider reference, so
// "openai:meta-llama/llama-3" names the model "meta-llama/llama-3"; a slash
// first makes an endpoint reference, whose model name may hold further
// slashes and colons ("router/meta-llama/llama-3:8b").
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Ref{}, fmt.Errorf("%w: empty model reference", ErrBadRef)
	}
	colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
	if slash >= 0 && (colon < 0 || slash < colon) {
		endpoint, name := s[:slash], s[slash+1:]
		if endpoint == "" {
			return Ref{}, fmt.Errorf("%w: %q has no endpoint before the slash", ErrBadRef, s)
		}
		if name == "" {
			return Ref{}, fmt.Errorf("%w: %q names no model after the slash (want %s/<model>)", ErrBadRef, s, endpoint)
		}
		return Ref{Provider: endpoint, Name: name, Endpoint: true}, nil
	}
	provider, name, _ := strings.Cut(s, ":")
	if provider == "" {
		return Ref{}, fmt.Errorf("%w: %q has no provider", ErrBadRef, s)
	}
	return Ref{Provider: provider, Name: name}, nil
}

func (r Ref) String() string {
	switch {
	case r.Endpoint:
		return r.Provider + "/" + r.Name
	case r.Name == "":
		return r.Provider
	}
	return r.Provider + ":" + r.Name
}
