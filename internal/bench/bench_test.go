package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
)

// childEnv makes the test binary act as a memory-scenario role process.
const childEnv = "FORMICA_BENCH_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(RoleMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testChild starts this test binary as a role process.
func testChild(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return cmd
}

// tiny are the smallest settings that still exercise every scenario.
var tiny = Settings{Samples: 20, Window: 50 * time.Millisecond, Parents: 4, HelpersPerParent: 2,
	FanoutN: 12, FanoutLatency: 20 * time.Millisecond, FanoutSlowLatency: 200 * time.Millisecond, Workers: 2, Slots: 4,
	ScalingSizes: []int{1, 100, 120}, ScalingRepeat: 2,
	MemoryHelpers: 12, MemoryParents: 4, ParkLatency: 3 * time.Second,
	QuotaHelpers: 12, QuotaRPM: 6000, QuotaLatency: 20 * time.Millisecond}

// TestSuiteJSONShape runs every scenario at the smallest settings and checks
// the JSON has every figure, never how fast anything was.
func TestSuiteJSONShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, Config{Quick: true, Settings: tiny, Child: testChild, Progress: &progress})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"spawn_p50_ratio_inproc", "spawn_p50_ratio_tcp", "spawn_throughput_ratio",
		"fanout_makespan_ratio", "fanout_makespan_ratio_slow", "scaling_ratio", "worker_bytes_per_live_helper", "coordinator_bytes_per_live_helper"} {
		v, ok := doc[key].(float64)
		if !ok {
			t.Errorf("%s = %v, want a number", key, doc[key])
			continue
		}
		if strings.HasSuffix(key, "_ratio") || strings.Contains(key, "_ratio_") {
			if v <= 0 {
				t.Errorf("%s = %v, want > 0", key, v)
			}
		}
	}
	for _, key := range []string{"machine", "settings", "floors", "spawn", "throughput", "fanout", "scaling", "memory", "quota", "targets"} {
		if doc[key] == nil {
			t.Errorf("no %q in %s", key, b)
		}
	}
	if got := len(res.Targets); got != 11 {
		t.Errorf("%d targets, want 11", got)
	}
	if q := res.Quota; q == nil || len(q.Cases) != 2 || q.Cases[0].Failed != 0 || q.Cases[1].Refused != 0 {
		t.Errorf("quota = %+v", q)
	}
	for _, tg := range res.Targets {
		if tg.Name == "messages published per helper" && (tg.Limit != 6 || tg.Value <= 0) {
			t.Errorf("messages guard = %+v", tg)
		}
	}
	if res.Throughput.AllocsPerHelper <= 0 {
		t.Errorf("allocations per helper not reported: %+v", res.Throughput)
	}
	if res.Scaling.RatioOf != "120/100" || len(res.Scaling.Points) != 3 {
		t.Errorf("scaling = %+v", res.Scaling)
	}
	if res.Spawn.Inproc.Samples < tiny.Samples || res.Spawn.TCP.Samples < tiny.Samples {
		t.Errorf("spawn samples = %d, %d", res.Spawn.Inproc.Samples, res.Spawn.TCP.Samples)
	}
	if res.Memory.Worker.BytesPerParkedParent == nil || res.Memory.Coordinator.BytesPerParkedParent == nil {
		t.Error("no parked-parent figures")
	}
	var table bytes.Buffer
	if err := WriteTable(&table, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"floors", "spawn latency", "spawn throughput", "fan-out makespan", "scaling", "memory", "quota", "regression guards"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table has no %q:\n%s", want, table.String())
		}
	}
}

func TestScenarioSubset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Scenarios: []string{ScenarioFloors}, Settings: tiny})
	if err != nil {
		t.Fatal(err)
	}
	if res.Floors == nil || res.Spawn != nil || res.SpawnP50RatioInproc != nil || len(res.Targets) != 0 {
		t.Fatalf("floors only: %+v", res)
	}
	b, _ := json.Marshal(res)
	if !bytes.Contains(b, []byte(`"spawn_p50_ratio_inproc":null`)) {
		t.Errorf("a scenario not run should leave its ratio null: %s", b)
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := ParseScenarios("floors,nope"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("unknown scenario: %v", err)
	}
	if got, err := ParseScenarios(" spawn , memory"); err != nil || len(got) != 2 || got[1] != "memory" {
		t.Errorf("ParseScenarios = %v, %v", got, err)
	}
	bad := tiny
	bad.Slots = -1
	if _, err := Run(context.Background(), Config{Settings: bad}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative slots: %v", err)
	}
	if _, err := Run(context.Background(), Config{Settings: tiny, Rounds: -1}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative rounds: %v", err)
	}
}

// TestMetricsAndTracing runs the spawn scenario with metrics recorded and
// every span exported: the receiver gets the exports, and the global
// provider is the no-op one again afterwards.
func TestMetricsAndTracing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set := tiny
	set.Metrics, set.Trace = true, true
	before := otel.GetTracerProvider()
	res, err := Run(ctx, Config{Scenarios: []string{ScenarioSpawn}, Settings: set})
	if err != nil {
		t.Fatal(err)
	}
	if res.Spawn == nil || res.Trace == nil || res.Trace.Exports < 1 || res.Trace.Bytes < 1 {
		t.Fatalf("spawn %+v, trace %+v: want spawn figures and exports received", res.Spawn, res.Trace)
	}
	if otel.GetTracerProvider() != before {
		t.Error("the suite left its tracer provider installed")
	}
	var table bytes.Buffer
	WriteTable(&table, res)
	if !strings.Contains(table.String(), "metrics on, tracing on") {
		t.Errorf("the table does not say what was on:\n%s", table.String())
	}
}

// TestMedians combines rounds by hand: each guard figure is the median over
// the rounds that have it, and a verdict is taken on the median.
func TestMedians(t *testing.T) {
	round := func(inproc, tcp *float64, msgs float64) *Result {
		r := &Result{SpawnP50RatioInproc: inproc, SpawnP50RatioTCP: tcp, Seconds: 1}
		r.Targets = r.targets()
		if msgs > 0 {
			r.Targets = append(r.Targets, Target{Name: "messages published per helper", Value: msgs, Limit: 6})
			r.Targets[len(r.Targets)-1].check()
		}
		return r
	}
	// Odd: in-process 9, 5, 7 (one round over the bound of 8, the median
	// under it). Even: TCP 2, 5 and absent in the last round, so the median
	// of two, over its bound of 3.
	rounds := []*Result{round(ptr(9), ptr(2), 7), round(ptr(5), ptr(5), 0), round(ptr(7), nil, 5)}
	res := medians(rounds)
	if res.SpawnP50RatioInproc == nil || *res.SpawnP50RatioInproc != 7 {
		t.Errorf("in-process median = %v, want 7", res.SpawnP50RatioInproc)
	}
	if res.SpawnP50RatioTCP == nil || *res.SpawnP50RatioTCP != 3.5 {
		t.Errorf("TCP median = %v, want 3.5 (of 2 and 5; nil in round 3)", res.SpawnP50RatioTCP)
	}
	if res.ScalingRatio != nil {
		t.Errorf("scaling ratio = %v, want nil: no round had it", *res.ScalingRatio)
	}
	if len(res.Rounds) != 3 || res.Seconds != 3 {
		t.Errorf("rounds %d, seconds %v", len(res.Rounds), res.Seconds)
	}
	want := map[string]struct {
		value  float64
		met    bool
		rounds []float64
	}{
		"spawn p50 / 2 raw round trips, in-process": {7, true, []float64{9, 5, 7}},
		"spawn p50 / 2 raw round trips, TCP":        {3.5, false, []float64{2, 5}},
		"messages published per helper":             {6, true, []float64{7, 5}},
	}
	if len(res.Targets) != len(want) {
		t.Fatalf("targets = %+v", res.Targets)
	}
	for _, tg := range res.Targets {
		w, ok := want[tg.Name]
		if !ok || tg.Value != w.value || tg.Met != w.met || !slices.Equal(tg.RoundValues, w.rounds) {
			t.Errorf("target %+v, want %+v", tg, w)
		}
	}
	var table bytes.Buffer
	WriteTable(&table, res)
	for _, s := range []string{"=== round 3 of 3", "7.00 (5.00–9.00 over 3 rounds)", "3.50 (2.00–5.00 over 2 rounds)", "TRIPPED"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table has no %q:\n%s", s, table.String())
		}
	}
	// One round: the same shape as ever, no per-round values.
	b, _ := json.Marshal(round(ptr(7), ptr(2), 5))
	if bytes.Contains(b, []byte(`"rounds"`)) || bytes.Contains(b, []byte(`"round_values"`)) {
		t.Errorf("one round's JSON has rounds: %s", b)
	}
}

// TestRaisedPastTheScenarios: the scenarios' fan-outs (one response's agent
// calls, at most the largest of these) fit the bench's ceilings and its
// workers' cap on a turn's tool calls, so no helper is refused or answered
// without a spawn (the memory scenario would wait for them all to be live).
func TestRaisedPastTheScenarios(t *testing.T) {
	for name, s := range map[string]Settings{"full": Full, "quick": Quick} {
		widest := max(s.FanoutN, s.HelpersPerParent, s.MemoryHelpers, 2*s.MemoryParents, s.QuotaHelpers, slices.Max(s.ScalingSizes))
		if widest > benchMaxToolCalls || widest > benchCeilings.MaxThreads {
			t.Errorf("%s: a fan-out of %d, past the workers' cap of %d or the ceiling of %d", name, widest, benchMaxToolCalls, benchCeilings.MaxThreads)
		}
	}
}
