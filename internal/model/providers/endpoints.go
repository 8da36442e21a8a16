package providers

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/formica-run/formica/internal/ids"
	"github.com/formica-run/formica/internal/model/anthropic"
	"github.com/formica-run/formica/internal/model/openai"
	"github.com/formica-run/formica/internal/quota"
)

// ErrProvidersFile reports a providers file that cannot be used: unreadable,
// malformed, or declaring a bad endpoint.
var ErrProvidersFile = errors.New("providers file")

// The wire formats an endpoint may speak.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
)

// Endpoint is one provider endpoint: a name model refs use ("fast/gpt-4o"),
// the wire format it speaks, where it is and where its key comes from, and
// the quota its operator declared (zero fields: learned from the provider).
type Endpoint struct {
	Name    string
	Format  string
	BaseURL string
	// KeyEnv is the environment variable holding the API key; empty for a
	// server that needs none.
	KeyEnv string
	// IdleTimeout fails an attempt that receives no byte for this long
	// (zero: the provider's default).
	IdleTimeout time.Duration
	Limits      quota.Limits
}

// endpointFile is one endpoint as a providers file writes it; its limits
// are quota.Limits' fields, by their YAML names.
type endpointFile struct {
	Format       string        `yaml:"format"`
	BaseURL      string        `yaml:"base_url"`
	KeyEnv       string        `yaml:"key_env"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	quota.Limits `yaml:",inline"`
}

// Key identifies the endpoint's quota across the cluster: its name and
// where it points, so two workers that mean different servers by one name
// never share a quota.
func (e Endpoint) Key() string { return e.Name + " " + e.BaseURL }

// Endpoints are the endpoints model refs may name: the two defaults
// ("openai", "anthropic", from the usual environment variables) and those a
// providers file declares, which may redefine a default (to give it limits).
type Endpoints struct {
	declared map[string]Endpoint
	getenv   func(string) string
}

// providersFile is the file's shape.
type providersFile struct {
	Endpoints map[string]endpointFile `yaml:"endpoints"`
}

// LoadFile reads a providers file (YAML or JSON) and checks every
// endpoint it declares, keys included, against this process's environment.
// An empty path declares nothing.
func LoadFile(path string) (*Endpoints, error) {
	if path == "" {
		return &Endpoints{getenv: os.Getenv}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProvidersFile, err)
	}
	e, err := Parse(data, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// Parse reads a providers file's contents; getenv (nil: this process's
// environment) is where the endpoints' keys are looked up, now and when a
// model is opened.
func Parse(data []byte, getenv func(string) string) (*Endpoints, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var f providersFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProvidersFile, err)
	}
	e := &Endpoints{declared: map[string]Endpoint{}, getenv: getenv}
	for _, name := range slices.Sorted(maps.Keys(f.Endpoints)) {
		ef := f.Endpoints[name]
		ep := Endpoint{Name: name, Format: ef.Format, BaseURL: strings.TrimSpace(ef.BaseURL), KeyEnv: ef.KeyEnv,
			IdleTimeout: ef.IdleTimeout, Limits: ef.Limits}
		if err := e.check(ep); err != nil {
			return nil, fmt.Errorf("%w: endpoint %q: %w", ErrProvidersFile, name, err)
		}
		e.declared[name] = ep
	}
	return e, nil
}

// checkEndpointName is the rule for an endpoint's name, in a providers file
// and in a ref: one subject token (it names the endpoint's quota on the
// wire) without the ':' and '/' that split a ref.
func checkEndpointName(name string) error {
	if err := ids.CheckToken(name); err != nil || strings.ContainsAny(name, ":/") {
		return errors.New("a name is one word without '.', ':', '/' or spaces")
	}
	return nil
}

// check refuses what would only fail at the first call: a bad name,
// format, URL or limit, or a key variable that is not set.
func (e *Endpoints) check(ep Endpoint) error {
	if err := checkEndpointName(ep.Name); err != nil {
		return err
	}
	if ep.Format != FormatOpenAI && ep.Format != FormatAnthropic {
		return fmt.Errorf("format %q: want %s or %s", ep.Format, FormatOpenAI, FormatAnthropic)
	}
	if ep.BaseURL == "" {
		return errors.New("base_url is missing")
	}
	if ep.IdleTimeout < 0 {
		return errors.New("idle_timeout is negative")
	}
	if err := ep.Limits.Validate(); err != nil {
		return err
	}
	if ep.KeyEnv != "" && strings.TrimSpace(e.getenv(ep.KeyEnv)) == "" {
		return fmt.Errorf("%w: key_env %s is not set", ErrMissingCredentials, ep.KeyEnv)
	}
	// The provider's own checks (URL shape, a key for the provider's own
	// API), made now rather than at the first call.
	_, err := openEndpoint(ep, "check", e.getenv, nil)
	return err
}

// Names lists the endpoints refs may name, declared ones and the defaults.
func (e *Endpoints) Names() []string {
	names := append(slices.Collect(maps.Keys(e.declared)), FormatOpenAI, FormatAnthropic)
	slices.Sort(names)
	return slices.Compact(names)
}

// Endpoint returns the endpoint named name: a declared one, else a default
// built from the environment.
func (e *Endpoints) Endpoint(name string) (Endpoint, bool) {
	if ep, ok := e.declared[name]; ok {
		return ep, true
	}
	switch name {
	case FormatOpenAI:
		return Endpoint{Name: name, Format: FormatOpenAI, KeyEnv: "OPENAI_API_KEY",
			BaseURL: cmp.Or(strings.TrimSpace(e.getenv("OPENAI_BASE_URL")), openai.DefaultBaseURL)}, true
	case FormatAnthropic:
		return Endpoint{Name: name, Format: FormatAnthropic, KeyEnv: "ANTHROPIC_API_KEY",
			BaseURL: cmp.Or(strings.TrimSpace(e.getenv("ANTHROPIC_BASE_URL")), anthropic.DefaultBaseURL)}, true
	}
	return Endpoint{}, false
}

// Declared reports whether name is declared in the providers file.
func (e *Endpoints) Declared(name string) bool {
	_, ok := e.declared[name]
	return ok
}

// FlagUsage describes the --providers flag every program that calls models
// shares.
const FlagUsage = "providers `file` (YAML or JSON) declaring named model endpoints and their quotas; refs name one as <endpoint>/<model>"
