package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints res as aligned tables, one per scenario (per round, with
// several), then the targets.
func WriteTable(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	m := res.Machine
	fmt.Fprintf(w, "formica bench: %s %s/%s, %d CPUs", m.GoVersion, m.OS, m.Arch, m.CPUs)
	if m.CPUModel != "" {
		fmt.Fprintf(w, " (%s)", m.CPUModel)
	}
	if m.MemoryGiB > 0 {
		fmt.Fprintf(w, ", %.0f GiB", m.MemoryGiB)
	}
	fmt.Fprintf(w, "\nload average before %s, after %s; %.1f s\n", loads(m.LoadBefore), loads(m.LoadAfter), res.Seconds)
	if set := res.Settings; set.Journal || set.Metrics || set.Trace {
		fmt.Fprintf(w, "stacks with: journal %s, metrics %s, tracing %s", onOff(set.Journal), onOff(set.Metrics), onOff(set.Trace))
		if t := res.Trace; t != nil {
			fmt.Fprintf(w, " (%d exports, %.1f KiB sent)", t.Exports, float64(t.Bytes)/1024)
		}
		fmt.Fprintln(w)
	}
	if len(res.Rounds) == 0 {
		writeScenarios(w, res)
	}
	for i, r := range res.Rounds {
		fmt.Fprintf(w, "\n=== round %d of %d: %.1f s, load average after %s\n", i+1, len(res.Rounds), r.Seconds, loads(r.Machine.LoadAfter))
		writeScenarios(w, r)
	}
	if len(res.Targets) > 0 {
		fmt.Fprintln(w, "\nregression guards")
		p("\tguard\tvalue\tbound\t\t")
		for _, t := range res.Targets {
			bound, verdict := "≤ ", "ok"
			if t.AtLeast {
				bound = "≥ "
			}
			if !t.Met {
				verdict = "TRIPPED"
			}
			value := num(t.Value)
			if n := len(t.RoundValues); n > 1 {
				value += fmt.Sprintf(" (%s–%s over %d rounds)", num(slices.Min(t.RoundValues)), num(slices.Max(t.RoundValues)), n)
			}
			p("\t%s\t%s\t%s%s\t%s\t", t.Name, value, bound, num(t.Limit), verdict)
		}
		tw.Flush()
	}
	return nil
}

// writeScenarios prints one round's scenario tables.
func writeScenarios(w io.Writer, res *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	if f := res.Floors; f != nil {
		fmt.Fprintln(w, "\nfloors (128 B request-reply)")
		p("\tpath\tp50\tp99\treq/s, 64 in flight\tCPU/req\t")
		names := []string{"goroutine + channel reply", "NATS in-process", "NATS TCP loopback"}
		for i, fl := range []Floor{f.Goroutine, f.NATSInproc, f.NATSTCP} {
			p("\t%s\t%s\t%s\t%s\t%s\t", names[i], usStr(fl.P50us), usStr(fl.P99us), count(fl.RequestsPerSec), usStr(fl.CPUPerRequestUs))
		}
		tw.Flush()
	}
	if s := res.Spawn; s != nil {
		fmt.Fprintln(w, "\nspawn latency (one agent call, whole path, sequential)")
		p("\tconnection\tspawns\tp50\tp99\traw p50\traw p99\tp50 / 2 raw\ton other worker\tCPU/spawn\t")
		names := []string{"in-process", "TCP loopback"}
		for i, l := range []*SpawnLatency{s.Inproc, s.TCP} {
			if l != nil {
				p("\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f%%\t%s\t", names[i], l.Samples, usStr(l.P50us), usStr(l.P99us),
					usStr(l.RawP50us), usStr(l.RawP99us), times(l.Ratio), 100*l.CrossWorker, usStr(l.CPUPerSpawnUs))
			}
		}
		tw.Flush()
	}
	if t := res.Throughput; t != nil {
		fmt.Fprintf(w, "\nspawn throughput (%d parents spawning in sequence, %d workers, in-process)\n", t.Parents, t.Workers)
		p("\thelpers\tseconds\thelpers/s\traw req/s (64)\thelpers/s / (raw/2)\tCPU/helper\tCPU/raw req\tCPU ratio\tallocs/helper\t")
		p("\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s (%s)\t", t.Helpers, t.Seconds, count(t.HelpersPerSec), count(t.RawRequestsPerSec), times(t.Ratio),
			usStr(t.CPUPerHelperUs), usStr(t.RawCPUPerRequestUs), times(t.CPURatio), count(t.AllocsPerHelper), bytesStr(t.AllocBytesPerHelper))
		tw.Flush()
		fmt.Fprintf(w, "per helper: %.1f messages published, %.1f delivered", t.MessagesPerHelper, t.DeliveriesPerHelper)
		if t.StoredPerHelper > 0 {
			fmt.Fprintf(w, ", %.1f stored (%.1f of them events)", t.StoredPerHelper, t.EventsStoredPerHelper)
		}
		fmt.Fprintln(w)
	}
	if f := res.Fanout; f != nil {
		fmt.Fprintf(w, "\nfan-out makespan (N=%d, L=%gms, W=%d, S=%d)\n", f.Helpers, f.LatencyMs, f.Workers, f.Slots)
		p("\tlatency\tideal\tmakespan\tratio\t")
		p("\t%s\t%s\t%s\t%s\t", msStr(f.LatencyMs), msStr(f.IdealMs), msStr(f.MakespanMs), times(f.Ratio))
		if f.SlowLatencyMs > 0 {
			p("\t%s\t%s\t%s\t%s\t", msStr(f.SlowLatencyMs), msStr(f.SlowIdealMs), msStr(f.SlowMakespanMs), times(f.SlowRatio))
		}
		tw.Flush()
	}
	if q := res.Quota; q != nil {
		fmt.Fprintf(w, "\nquota (fan-out against %d requests/min, burst %d, %d in flight, %gms an answer; W=%d)\n",
			q.RequestsPerMinute, q.Burst, q.InFlight, q.LatencyMs, q.Workers)
		p("\tlimits\thelpers\tfailed\trequests\trefused\tideal\tmakespan\tratio\t")
		for _, c := range q.Cases {
			p("\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t", c.Limits, c.Helpers, c.Failed, c.Requests, c.Refused,
				msStr(c.IdealMs), msStr(c.MakespanMs), times(c.Ratio))
		}
		tw.Flush()
	}
	if s := res.Scaling; s != nil {
		fmt.Fprintf(w, "\nscaling (one parent fans out, zero latency, W=%d, S=%d)\n", s.Workers, s.Slots)
		p("\thelpers\trepeats\tmakespan\tper helper\tCPU/helper\tmessages/helper\t")
		for _, pt := range s.Points {
			p("\t%s\t%d\t%s\t%s\t%s\t%.1f\t", count(float64(pt.Helpers)), pt.Repeats, msStr(pt.MakespanMs), usStr(pt.PerHelperUs),
				usStr(pt.CPUPerHelperUs), pt.MessagesPerHelper)
		}
		tw.Flush()
		if s.RatioOf != "" {
			fmt.Fprintf(w, "per-helper cost %s: %s (CPU per helper: %s)\n", s.RatioOf, times(s.Ratio), times(s.CPURatio))
		}
	}
	if mem := res.Memory; mem != nil {
		fmt.Fprintf(w, "\nmemory (heap + stacks after GC; %d live helpers, %d parked parents, %d helper workers)\n", mem.Helpers, mem.Parents, mem.Workers)
		p("\tprocess\tidle\tper live helper\theap\tstacks\tgoroutines\tper parked parent\t")
		names := []string{"coordinator", "helper's worker", "parent's worker"}
		for i, sd := range []Side{mem.Coordinator, mem.Worker, mem.ParentWorker} {
			pp := "-"
			if sd.BytesPerParkedParent != nil {
				pp = bytesStr(*sd.BytesPerParkedParent)
			}
			p("\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t", names[i], bytesStr(float64(sd.BaseBytes)), bytesStr(sd.BytesPerLiveHelper),
				bytesStr(sd.HeapPerHelper), bytesStr(sd.StackPerHelper), sd.GoroutinesPerHelper, pp)
		}
		tw.Flush()
	}
}

func loads(l []float64) string {
	if len(l) == 0 {
		return "n/a"
	}
	return strings.Trim(fmt.Sprintf("%.2f", l), "[]") // "[0.52 0.40 0.31]" less its brackets
}

func usStr(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f µs", v)
	}
	return fmt.Sprintf("%.1f µs", v)
}

func msStr(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

func times(v float64) string { return fmt.Sprintf("%.2f×", v) }

// count writes an integer with thousands separators.
func count(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func bytesStr(v float64) string {
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%s%.1f MiB", neg, v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%s%.1f KiB", neg, v/(1<<10))
	}
	return fmt.Sprintf("%s%.0f B", neg, v)
}

// num prints a target's value: bytes as such, ratios with two decimals.
func num(v float64) string {
	if v >= 1000 {
		return bytesStr(v)
	}
	return fmt.Sprintf("%.2f", v)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
