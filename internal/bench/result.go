package bench

import (
	"slices"
	"time"
)

// Result is one run of the suite. The ratios the targets are stated in sit
// at the top level; a scenario that did not run leaves its figures nil.
// With several rounds (Config.Rounds) the ratios and targets are the
// medians over the rounds, the scenarios' figures are nil, and Rounds holds
// each round's whole result; one round has no Rounds.
type Result struct {
	SpawnP50RatioInproc      *float64 `json:"spawn_p50_ratio_inproc"`
	SpawnP50RatioTCP         *float64 `json:"spawn_p50_ratio_tcp"`
	SpawnThroughputRatio     *float64 `json:"spawn_throughput_ratio"`
	FanoutMakespanRatio      *float64 `json:"fanout_makespan_ratio"`
	FanoutMakespanRatioSlow  *float64 `json:"fanout_makespan_ratio_slow"`
	ScalingRatio             *float64 `json:"scaling_ratio"`
	WorkerBytesPerLiveHelper *float64 `json:"worker_bytes_per_live_helper"`
	CoordBytesPerLiveHelper  *float64 `json:"coordinator_bytes_per_live_helper"`
	QuotaLearnedRatio        *float64 `json:"quota_learned_ratio"`
	QuotaDeclaredRatio       *float64 `json:"quota_declared_ratio"`

	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`

	Floors     *Floors     `json:"floors,omitempty"`
	Spawn      *Spawn      `json:"spawn,omitempty"`
	Throughput *Throughput `json:"throughput,omitempty"`
	Fanout     *Fanout     `json:"fanout,omitempty"`
	Scaling    *Scaling    `json:"scaling,omitempty"`
	Memory     *Memory     `json:"memory,omitempty"`
	Quota      *Quota      `json:"quota,omitempty"`
	// Trace is what the exporter sent, with Settings.Trace.
	Trace *TraceSink `json:"trace,omitempty"`

	// Targets are the goals of BENCHMARKS.md checked against this run.
	Targets []Target `json:"targets"`

	// Rounds are the rounds' own results, with more than one round.
	Rounds []*Result `json:"rounds,omitempty"`
}

// Machine describes where the suite ran.
type Machine struct {
	GoVersion string  `json:"go_version"`
	OS        string  `json:"os"`
	Arch      string  `json:"arch"`
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model,omitempty"`
	MemoryGiB float64 `json:"memory_gib,omitempty"`
	// LoadBefore and LoadAfter are the 1, 5 and 15 minute load averages.
	LoadBefore []float64 `json:"load_before,omitempty"`
	LoadAfter  []float64 `json:"load_after,omitempty"`
}

// Floor is one reference path: sequential round trips and 64 in flight.
type Floor struct {
	Samples int     `json:"samples"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	// RequestsPerSec is completed round trips per second with 64 in flight,
	// CPUPerRequestUs the process CPU time each took then.
	RequestsPerSec  float64 `json:"requests_per_sec_64"`
	CPUPerRequestUs float64 `json:"cpu_per_request_us"`
}

// Floors are the paths everything else is compared with.
type Floors struct {
	Goroutine  Floor `json:"goroutine"`
	NATSInproc Floor `json:"nats_inproc"`
	NATSTCP    Floor `json:"nats_tcp"`
}

// SpawnLatency is one spawn at a time through the whole path.
type SpawnLatency struct {
	Samples int     `json:"samples"`
	P50us   float64 `json:"p50_us"`
	P99us   float64 `json:"p99_us"`
	// RawP50us and RawP99us are plain request-replies on the same server
	// and kind of connection, measured just before.
	RawP50us float64 `json:"raw_p50_us"`
	RawP99us float64 `json:"raw_p99_us"`
	// Ratio is P50us / (2 × RawP50us).
	Ratio float64 `json:"ratio"`
	// CrossWorker is the share of helpers that ran on another worker than
	// their parent.
	CrossWorker float64 `json:"cross_worker"`
	// CPUPerSpawnUs is the process CPU time per timed spawn (every
	// component is in this process).
	CPUPerSpawnUs float64 `json:"cpu_per_spawn_us"`
}

// Spawn is the spawn latency over both kinds of connection.
type Spawn struct {
	Inproc *SpawnLatency `json:"inproc,omitempty"`
	TCP    *SpawnLatency `json:"tcp,omitempty"`
}

// Throughput is helpers per second with many parents spawning at once.
type Throughput struct {
	Parents          int     `json:"parents"`
	HelpersPerParent int     `json:"helpers_per_parent"`
	Workers          int     `json:"workers"`
	Slots            int     `json:"slots"`
	Helpers          int     `json:"helpers"`
	Seconds          float64 `json:"seconds"`
	HelpersPerSec    float64 `json:"helpers_per_sec"`
	// RawRequestsPerSec is plain request-replies with 64 in flight on the
	// same in-process server.
	RawRequestsPerSec float64 `json:"raw_requests_per_sec_64"`
	// Ratio is HelpersPerSec / (RawRequestsPerSec / 2).
	Ratio float64 `json:"ratio"`
	// CPUPerHelperUs and RawCPUPerRequestUs are process CPU time per helper
	// and per raw round trip. Both runs saturate the CPUs, so CPURatio =
	// 2 × RawCPUPerRequestUs / CPUPerHelperUs is the ratio the machine's
	// other load does not move.
	CPUPerHelperUs     float64 `json:"cpu_per_helper_us"`
	RawCPUPerRequestUs float64 `json:"raw_cpu_per_request_us"`
	CPURatio           float64 `json:"cpu_ratio"`
	// AllocsPerHelper and AllocBytesPerHelper are heap allocations per
	// helper, every component included: a figure load does not move.
	AllocsPerHelper     float64 `json:"allocs_per_helper"`
	AllocBytesPerHelper float64 `json:"alloc_bytes_per_helper"`
	// MessagesPerHelper are published to the server per helper (control
	// messages, events, heartbeats), DeliveriesPerHelper delivered by it.
	MessagesPerHelper   float64 `json:"messages_per_helper"`
	DeliveriesPerHelper float64 `json:"deliveries_per_helper"`
	// StoredPerHelper are messages JetStream stored per helper, in every
	// stream (journal, events, records); EventsStoredPerHelper those in
	// the events stream. Zero without --journal.
	StoredPerHelper       float64 `json:"stored_per_helper"`
	EventsStoredPerHelper float64 `json:"events_stored_per_helper"`
}

// Fanout is one parent fanning out to N helpers of latency L.
type Fanout struct {
	Helpers    int     `json:"helpers"`
	LatencyMs  float64 `json:"latency_ms"`
	Workers    int     `json:"workers"`
	Slots      int     `json:"slots"`
	IdealMs    float64 `json:"ideal_ms"`
	MakespanMs float64 `json:"makespan_ms"`
	Ratio      float64 `json:"ratio"`
	// The same fan-out at a slow model's latency (Settings.FanoutSlowLatency).
	SlowLatencyMs  float64 `json:"slow_latency_ms"`
	SlowIdealMs    float64 `json:"slow_ideal_ms"`
	SlowMakespanMs float64 `json:"slow_makespan_ms"`
	SlowRatio      float64 `json:"slow_ratio"`
}

// ScalePoint is the cost per helper of one fan-out size.
type ScalePoint struct {
	Helpers int `json:"helpers"`
	Repeats int `json:"repeats"`
	// MakespanMs is the median fan-out makespan.
	MakespanMs  float64 `json:"makespan_ms"`
	PerHelperUs float64 `json:"per_helper_us"`
	// CPUPerHelperUs is the process CPU time per helper over the repeats,
	// each run's set-up and record included.
	CPUPerHelperUs float64 `json:"cpu_per_helper_us"`
	// MessagesPerHelper are published to the server per helper.
	MessagesPerHelper float64 `json:"messages_per_helper"`
}

// Scaling is the cost per helper as one parent's fan-out grows.
type Scaling struct {
	Workers int          `json:"workers"`
	Slots   int          `json:"slots"`
	Points  []ScalePoint `json:"points"`
	// Ratio is the cost per helper at the largest size / at 100 helpers;
	// RatioOf says which sizes ("10000/100").
	Ratio   float64 `json:"ratio"`
	RatioOf string  `json:"ratio_of"`
	// CPURatio is the same ratio of CPU time per helper, which the
	// machine's other load moves less than the wall-clock one.
	CPURatio float64 `json:"cpu_ratio"`
}

// Side is one process's share of the memory scenario.
type Side struct {
	// BaseBytes is HeapAlloc + StackInuse idle after a warm-up run.
	BaseBytes uint64 `json:"base_bytes"`
	// HeapPerHelper and StackPerHelper split BytesPerLiveHelper.
	BytesPerLiveHelper  float64 `json:"bytes_per_live_helper"`
	HeapPerHelper       float64 `json:"heap_per_live_helper"`
	StackPerHelper      float64 `json:"stack_per_live_helper"`
	GoroutinesPerHelper float64 `json:"goroutines_per_live_helper"`
	// BytesPerParkedParent is what a parent waiting on its helper adds.
	BytesPerParkedParent *float64 `json:"bytes_per_parked_parent,omitempty"`
}

// Memory is what a live helper and a parked parent cost each side.
type Memory struct {
	Helpers int `json:"helpers"`
	Parents int `json:"parents"`
	Workers int `json:"workers"`
	// Coordinator is the coordinator's process.
	Coordinator Side `json:"coordinator"`
	// Worker is the helpers' workers: a live helper's own thread. Its
	// parked-parent figure covers the parent's thread and its call to its
	// helper, wherever they run.
	Worker Side `json:"worker"`
	// ParentWorker is the parent's worker: what each of the parent's calls
	// to a live helper costs there (the parent's side of the spawn).
	ParentWorker Side `json:"parent_worker"`
}

// Target is one regression guard of BENCHMARKS.md and whether this run
// stayed within it. The guards are set wide enough that a quiet run of this
// machine kind never trips them, so one that does is a real regression, not
// noise.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Limit is the bound Value must stay at or under (AtLeast: at or over).
	Limit   float64 `json:"limit"`
	AtLeast bool    `json:"at_least,omitempty"`
	Met     bool    `json:"met"`
	// RoundValues are Value in each round that had it, in order, when
	// Value is their median (more than one round).
	RoundValues []float64 `json:"round_values,omitempty"`
}

// check sets Met from Value and the bound.
func (t *Target) check() {
	t.Met = t.Value <= t.Limit
	if t.AtLeast {
		t.Met = t.Value >= t.Limit
	}
}

func ptr(f float64) *float64 { return &f }

// ratios are the guard figures at the top level of r.
func (r *Result) ratios() []**float64 {
	return []**float64{&r.SpawnP50RatioInproc, &r.SpawnP50RatioTCP, &r.SpawnThroughputRatio,
		&r.FanoutMakespanRatio, &r.FanoutMakespanRatioSlow, &r.ScalingRatio,
		&r.WorkerBytesPerLiveHelper, &r.CoordBytesPerLiveHelper, &r.QuotaLearnedRatio, &r.QuotaDeclaredRatio}
}

// medians combines several rounds into one result: each top-level ratio and
// each target's value is the median over the rounds that have it (nil when
// none does), a target's verdict is taken on its median, and its per-round
// values are kept in RoundValues. Machine, Settings and Started are the
// first round's (with the last round's LoadAfter), Seconds and Trace the
// rounds' sums; the scenarios' own figures are only in Rounds.
func medians(rounds []*Result) *Result {
	first, last := rounds[0], rounds[len(rounds)-1]
	res := &Result{Machine: first.Machine, Settings: first.Settings, Started: first.Started, Rounds: rounds}
	res.Machine.LoadAfter = last.Machine.LoadAfter
	for i, f := range res.ratios() {
		var vs []float64
		for _, r := range rounds {
			if v := *r.ratios()[i]; v != nil {
				vs = append(vs, *v)
			}
		}
		if len(vs) > 0 {
			*f = ptr(median(vs))
		}
	}
	byName := map[string]int{}
	for _, r := range rounds {
		res.Seconds += r.Seconds
		if r.Trace != nil {
			if res.Trace == nil {
				res.Trace = &TraceSink{}
			}
			res.Trace.Exports += r.Trace.Exports
			res.Trace.Bytes += r.Trace.Bytes
		}
		for _, t := range r.Targets {
			i, ok := byName[t.Name]
			if !ok {
				i = len(res.Targets)
				byName[t.Name] = i
				res.Targets = append(res.Targets, Target{Name: t.Name, Limit: t.Limit, AtLeast: t.AtLeast})
			}
			res.Targets[i].RoundValues = append(res.Targets[i].RoundValues, t.Value)
		}
	}
	for i := range res.Targets {
		t := &res.Targets[i]
		t.Value = median(t.RoundValues)
		t.check()
	}
	return res
}

// median is the middle of vs, or the mean of the two middle values.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// targets checks the guards against what ran. Allocation counts are
// reported (Throughput), not guarded.
func (r *Result) targets() []Target {
	var ts []Target
	add := func(name string, v *float64, limit float64, atLeast bool) {
		if v == nil {
			return
		}
		t := Target{Name: name, Value: *v, Limit: limit, AtLeast: atLeast}
		t.check()
		ts = append(ts, t)
	}
	add("spawn p50 / 2 raw round trips, in-process", r.SpawnP50RatioInproc, 8, false)
	add("spawn p50 / 2 raw round trips, TCP", r.SpawnP50RatioTCP, 3, false)
	add("spawn throughput / (raw req/s / 2)", r.SpawnThroughputRatio, 0.15, true)
	add("fan-out makespan / ideal", r.FanoutMakespanRatio, 1.2, false)
	add("fan-out makespan / ideal, slow model", r.FanoutMakespanRatioSlow, 1.03, false)
	scaling := "cost per helper at 10,000 / at 100"
	if r.Scaling != nil && r.Scaling.RatioOf != "" && r.Scaling.RatioOf != "10000/100" {
		scaling = "cost per helper at " + r.Scaling.RatioOf + " helpers (guard: 10000/100)"
	}
	add(scaling, r.ScalingRatio, 1.6, false)
	add("worker bytes per live helper", r.WorkerBytesPerLiveHelper, 16<<10, false)
	add("coordinator bytes per live helper", r.CoordBytesPerLiveHelper, 8<<10, false)
	add("quota fan-out makespan / the quota's ideal, limits learned", r.QuotaLearnedRatio, 1.25, false)
	add("quota fan-out makespan / the quota's ideal, limits declared", r.QuotaDeclaredRatio, 1.10, false)
	if t := r.Throughput; t != nil {
		add("messages published per helper", &t.MessagesPerHelper, 6, false)
	}
	return ts
}
