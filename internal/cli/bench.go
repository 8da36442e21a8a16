package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/formica-run/formica/internal/bench"
)

// benchCommand is `formica bench`: it starts what it measures itself and
// prints a table, and with --json writes the same figures to a file. A
// first argument --role runs one side of the memory scenario (the command
// starts those child processes itself).
func benchCommand(args []string, stdio Stdio) int {
	if len(args) > 0 && (args[0] == bench.RoleFlag || args[0] == "-role") {
		return bench.RoleMain(args, stdio.In, stdio.Out, stdio.Err)
	}
	fs := newFlagSet("formica bench", stdio)
	var (
		quick     = fs.Bool("quick", false, "small sizes: the whole suite in seconds (as CI runs it)")
		jsonFile  = fs.String("json", "", "also write the figures as JSON to `file`")
		scenarios = fs.String("scenario", "", "run only these scenarios, comma-separated: floors, spawn, throughput, fanout, scaling, memory, quota")
		cpuFile   = fs.String("cpuprofile", "", "write a CPU profile of this process (not the memory scenario's children) to `file`")
		memFile   = fs.String("memprofile", "", "write an allocation profile of this process to `file` at the end")
		rounds    = fs.Int("rounds", 1, "run the scenarios `n` times, one whole round after another; the guards are the medians over the rounds")
		set       bench.Settings
	)
	fs.IntVar(&set.FanoutN, "fanout-n", 0, "fan-out helpers (default 1000; quick 300)")
	fs.DurationVar(&set.FanoutLatency, "fanout-latency", 0, "fan-out helpers' model latency (default 100ms; quick 50ms)")
	fs.DurationVar(&set.FanoutSlowLatency, "fanout-slow-latency", 0, "the fan-out's second model latency, a slow model's (default 1s)")
	fs.IntVar(&set.Workers, "workers", 0, "workers of the throughput, fan-out, scaling and memory scenarios (default 4)")
	fs.BoolVar(&set.Journal, "journal", false, "run the stacks with JetStream and every thread's journal on, as in a cluster")
	fs.BoolVar(&set.Metrics, "metrics", false, "record Prometheus metrics in the stacks, as the coordinator and worker binaries do")
	fs.BoolVar(&set.Trace, "trace", false, "export every span (batching OTLP/HTTP exporter) to a receiver on loopback the bench starts")
	fs.IntVar(&set.Slots, "slots", 0, "slots per worker of the throughput, fan-out and scaling scenarios (default 64)")
	fs.IntVar(&set.QuotaHelpers, "quota-helpers", 0, "helpers of the quota scenario's fan-out (default 200; quick 100)")
	fs.IntVar(&set.QuotaRPM, "quota-rpm", 0, "requests a minute the quota scenario's provider allows (default 600; quick 3000)")
	fs.DurationVar(&set.QuotaLatency, "quota-latency", 0, "the quota scenario's provider's time per answer (default 300ms; quick 60ms)")
	fs.Usage = func() {
		fmt.Fprintln(stdio.Err, "Usage: formica bench [--quick] [--json FILE] [--scenario NAME[,NAME]] [--rounds N] [fan-out flags]")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stdio.Err, "formica bench: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	names, err := bench.ParseScenarios(*scenarios)
	if err != nil {
		fmt.Fprintln(stdio.Err, "formica bench:", err)
		return ExitUsage
	}
	if *rounds < 1 {
		fmt.Fprintf(stdio.Err, "formica bench: --rounds must be at least 1, got %d\n", *rounds)
		return ExitUsage
	}
	if set.FanoutN < 0 || set.FanoutLatency < 0 || set.Workers < 0 || set.Slots < 0 {
		fmt.Fprintln(stdio.Err, "formica bench: sizes and latencies must not be negative")
		return ExitUsage
	}
	if *cpuFile != "" {
		f, err := os.Create(*cpuFile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stdio.Err, "formica bench: cpu profile:", err)
			return ExitFailed
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, stop := signalContext()
	defer stop()
	res, err := bench.Run(ctx, bench.Config{Quick: *quick, Scenarios: names, Rounds: *rounds, Settings: set, Progress: stdio.Err})
	if err != nil {
		fmt.Fprintln(stdio.Err, "formica bench:", err)
		if errors.Is(err, bench.ErrBadConfig) {
			return ExitUsage
		}
		return ExitFailed
	}
	if *memFile != "" {
		if err := writeHeapProfile(*memFile); err != nil {
			fmt.Fprintln(stdio.Err, "formica bench: memory profile:", err)
			return ExitFailed
		}
	}
	bench.WriteTable(stdio.Out, res)
	if *jsonFile != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(stdio.Err, "formica bench: write JSON:", err)
			return ExitFailed
		}
	}
	return ExitOK
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
