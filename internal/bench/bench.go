package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Scenario names, in the order they run.
const (
	ScenarioFloors     = "floors"
	ScenarioSpawn      = "spawn"
	ScenarioThroughput = "throughput"
	ScenarioFanout     = "fanout"
	ScenarioScaling    = "scaling"
	ScenarioMemory     = "memory"
	ScenarioQuota      = "quota"
)

// Scenarios lists every scenario in running order.
var Scenarios = []string{ScenarioFloors, ScenarioSpawn, ScenarioThroughput, ScenarioFanout, ScenarioScaling, ScenarioMemory, ScenarioQuota}

// ErrBadConfig wraps rejected settings.
var ErrBadConfig = errors.New("bad bench config")

// Config chooses what runs and how big. Zero values mean the defaults of the
// full suite, or of the quick one with Quick set.
type Config struct {
	// Quick shrinks every scenario so the suite runs in seconds.
	Quick bool
	// Scenarios to run, by name; nil runs them all.
	Scenarios []string
	// Rounds runs the chosen scenarios that many times, one whole round
	// after another, and combines them (see Result.Rounds); 0 means 1.
	Rounds int
	// Settings override the defaults field by field (zero: default).
	Settings Settings
	// Child builds the command of a memory-scenario role process from the
	// role's arguments (see RoleMain). Default: this executable with
	// "bench" and the arguments, which is right for the formica binary.
	Child func(args []string) *exec.Cmd
	// Progress receives a line as each step starts; nil discards.
	Progress io.Writer
}

// Settings are the sizes of every scenario.
type Settings struct {
	// Samples is the sequential round trips per floor, and the spawns timed
	// per kind of connection.
	Samples int `json:"samples"`
	// Window is how long each 64-in-flight throughput window runs.
	Window time.Duration `json:"window_ns"`
	// Parents spawn at once in the throughput scenario, each
	// HelpersPerParent helpers in sequence.
	Parents          int `json:"parents"`
	HelpersPerParent int `json:"helpers_per_parent"`
	// FanoutN helpers of FanoutLatency each over Workers workers of Slots.
	FanoutN       int           `json:"fanout_n"`
	FanoutLatency time.Duration `json:"fanout_latency_ns"`
	// FanoutSlowLatency is the fan-out's second latency, a slow model's.
	FanoutSlowLatency time.Duration `json:"fanout_slow_latency_ns"`
	Workers           int           `json:"workers"`
	Slots             int           `json:"slots"`
	// ScalingSizes are the fan-out sizes of the scaling scenario; the ratio
	// is the last one's cost over 100's. Sizes below ScalingRepeat are run
	// several times (up to 21, about ScalingRepeat helpers in all) and the
	// median taken.
	ScalingSizes  []int `json:"scaling_sizes"`
	ScalingRepeat int   `json:"scaling_repeat"`
	// MemoryHelpers are kept alive at once; MemoryParents parked at once,
	// each on one helper of ParkLatency (the parents' own first call waits
	// as long, so it must outlast spawning them all).
	MemoryHelpers int           `json:"memory_helpers"`
	MemoryParents int           `json:"memory_parents"`
	ParkLatency   time.Duration `json:"park_latency_ns"`
	// QuotaHelpers helpers fan out against a provider allowing QuotaRPM
	// requests a minute, each answer taking QuotaLatency.
	QuotaHelpers int           `json:"quota_helpers"`
	QuotaRPM     int           `json:"quota_rpm"`
	QuotaLatency time.Duration `json:"quota_latency_ns"`
	// Journal runs the spawn, throughput, fan-out and scaling stacks with
	// JetStream and the run store, so every thread journals its life.
	Journal bool `json:"journal,omitempty"`
	// Metrics gives the stacks Prometheus metrics, as the coordinator and
	// worker binaries always have them (they are recorded, never scraped).
	Metrics bool `json:"metrics,omitempty"`
	// Trace exports every span with the SDK's batching OTLP/HTTP exporter
	// to a receiver on loopback that the suite starts (it reads and drops).
	Trace bool `json:"trace,omitempty"`
}

// Full and Quick are the default settings.
var (
	Full = Settings{Samples: 2000, Window: time.Second, Parents: 64, HelpersPerParent: 100,
		FanoutN: 1000, FanoutLatency: 100 * time.Millisecond, FanoutSlowLatency: time.Second, Workers: 4, Slots: 64,
		ScalingSizes: []int{1, 10, 100, 1000, 10000}, ScalingRepeat: 2000,
		MemoryHelpers: 10000, MemoryParents: 2000, ParkLatency: 10 * time.Second,
		QuotaHelpers: 200, QuotaRPM: 600, QuotaLatency: 300 * time.Millisecond}
	Quick = Settings{Samples: 300, Window: 250 * time.Millisecond, Parents: 64, HelpersPerParent: 5,
		FanoutN: 300, FanoutLatency: 50 * time.Millisecond, FanoutSlowLatency: time.Second, Workers: 4, Slots: 64,
		ScalingSizes: []int{1, 10, 100, 1000}, ScalingRepeat: 1000,
		MemoryHelpers: 1000, MemoryParents: 200, ParkLatency: 3 * time.Second,
		QuotaHelpers: 100, QuotaRPM: 3000, QuotaLatency: 60 * time.Millisecond}
)

// withDefaults fills zero fields, and an empty ScalingSizes, from base.
func (s Settings) withDefaults(base Settings) Settings {
	v, d := reflect.ValueOf(&s).Elem(), reflect.ValueOf(base)
	for i := range v.NumField() {
		if f := v.Field(i); f.IsZero() || f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(d.Field(i))
		}
	}
	s.ScalingSizes = slices.Clone(s.ScalingSizes)
	return s
}

func (s Settings) validate() error {
	for _, v := range []int{s.Samples, s.Parents, s.HelpersPerParent, s.FanoutN, s.Workers, s.Slots, s.ScalingRepeat, s.MemoryHelpers, s.MemoryParents, s.QuotaHelpers, s.QuotaRPM} {
		if v < 1 {
			return fmt.Errorf("%w: sizes must be positive: %+v", ErrBadConfig, s)
		}
	}
	if s.Window <= 0 || s.FanoutLatency < 0 || s.FanoutSlowLatency < 0 || s.ParkLatency <= 0 {
		return fmt.Errorf("%w: durations must be positive", ErrBadConfig)
	}
	for _, n := range s.ScalingSizes {
		if n < 1 {
			return fmt.Errorf("%w: scaling size %d", ErrBadConfig, n)
		}
	}
	return nil
}

// ParseScenarios splits a comma-separated list and checks every name.
func ParseScenarios(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(Scenarios, name) {
			return nil, fmt.Errorf("%w: unknown scenario %q (have %s)", ErrBadConfig, name, strings.Join(Scenarios, ", "))
		}
		out = append(out, name)
	}
	return out, nil
}

// Run runs the chosen scenarios in order, Rounds times, and returns their
// figures: one round's result, or with several the medians over the rounds
// (see medians).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	base := Full
	if cfg.Quick {
		base = Quick
	}
	set := cfg.Settings.withDefaults(base)
	if err := set.validate(); err != nil {
		return nil, err
	}
	want := cfg.Scenarios
	if len(want) == 0 {
		want = Scenarios
	}
	for _, name := range want {
		if !slices.Contains(Scenarios, name) {
			return nil, fmt.Errorf("%w: unknown scenario %q", ErrBadConfig, name)
		}
	}
	if cfg.Rounds < 0 {
		return nil, fmt.Errorf("%w: rounds must be at least 1", ErrBadConfig)
	}
	b := &suite{set: set, cfg: cfg, progress: cmp.Or[io.Writer](cfg.Progress, io.Discard)}
	if cfg.Rounds <= 1 {
		return b.round(ctx, want)
	}
	var rounds []*Result
	for i := range cfg.Rounds {
		b.logf("=== round %d of %d", i+1, cfg.Rounds)
		res, err := b.round(ctx, want)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", i+1, err)
		}
		rounds = append(rounds, res)
	}
	return medians(rounds), nil
}

// round runs the chosen scenarios once.
func (b *suite) round(ctx context.Context, want []string) (*Result, error) {
	set := b.set
	res := &Result{Machine: machine(), Settings: set, Started: time.Now()}
	if set.Trace {
		sink, stop, err := startTracing(ctx)
		if err != nil {
			return nil, err
		}
		defer func() {
			stop()
			res.Trace = sink.stats()
		}()
	}
	steps := map[string]func(context.Context, *Result) error{ScenarioFloors: b.floors, ScenarioSpawn: b.spawn,
		ScenarioThroughput: b.throughput, ScenarioFanout: b.fanout, ScenarioScaling: b.scaling, ScenarioMemory: b.memory, ScenarioQuota: b.quota}
	for _, name := range Scenarios {
		if !slices.Contains(want, name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return res, context.Cause(ctx)
		}
		t0 := time.Now()
		b.logf("== %s", name)
		if err := steps[name](ctx, res); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		b.logf("   %s done in %.1fs", name, time.Since(t0).Seconds())
	}
	res.Seconds = time.Since(res.Started).Seconds()
	res.Machine.LoadAfter = loadAverage()
	res.Targets = res.targets()
	return res, nil
}

// suite carries the settings through the scenarios.
type suite struct {
	set      Settings
	cfg      Config
	progress io.Writer
}

func (b *suite) logf(format string, a ...any) {
	fmt.Fprintf(b.progress, format+"\n", a...)
}
