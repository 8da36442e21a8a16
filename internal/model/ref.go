package model

import (
	"fmt"
	"strings"
)

// Ref is a parsed model reference "provider:name". The sim model has no name.
type Ref struct {
	Provider string
	Name     string
}

// ParseRef splits a reference such as "openai:gpt-4o" or "sim".
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Ref{}, fmt.Errorf("%w: empty model reference", ErrBadRef)
	}
	provider, name, _ := strings.Cut(s, ":")
	if provider == "" {
		return Ref{}, fmt.Errorf("%w: %q has no provider", ErrBadRef, s)
	}
	return Ref{Provider: provider, Name: name}, nil
}

func (r Ref) String() string {
	if r.Name == "" {
		return r.Provider
	}
	return r.Provider + ":" + r.Name
}
