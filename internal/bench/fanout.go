package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// fanout: one root, FanoutN helpers of FanoutLatency over Workers × Slots.
func (b *suite) fanout(ctx context.Context, res *Result) error {
	set := b.set
	b.logf("   %d helpers of %v over %d workers × %d slots", set.FanoutN, set.FanoutLatency, set.Workers, set.Slots)
	c, err := b.startCluster(ctx, false, set.Workers, set.Slots, nil)
	if err != nil {
		return err
	}
	defer c.stop()
	if _, err := c.fanout(ctx, 20, 0); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	waves := (set.FanoutN + set.Workers*set.Slots - 1) / (set.Workers * set.Slots)
	// fan times the fan-out at one latency against its ideal: each wave of
	// Workers × Slots helpers takes the latency.
	fan := func(latency time.Duration) (latencyMs, idealMs, makespanMs, ratio float64, err error) {
		span, err := c.fanout(ctx, set.FanoutN, latency)
		ideal := time.Duration(waves) * latency
		return ms(latency), ms(ideal), ms(span), round(float64(span)/float64(ideal), 3), err
	}
	f := &Fanout{Helpers: set.FanoutN, Workers: set.Workers, Slots: set.Slots}
	if f.LatencyMs, f.IdealMs, f.MakespanMs, f.Ratio, err = fan(set.FanoutLatency); err != nil {
		return err
	}
	// The same at a slow model's latency, where the spawn path's own cost
	// should vanish next to the model's.
	if f.SlowLatencyMs, f.SlowIdealMs, f.SlowMakespanMs, f.SlowRatio, err = fan(set.FanoutSlowLatency); err != nil {
		return err
	}
	res.Fanout, res.FanoutMakespanRatio, res.FanoutMakespanRatioSlow = f, ptr(f.Ratio), ptr(f.SlowRatio)
	return nil
}

// scaling: the cost per helper of one root fanning out to each size.
func (b *suite) scaling(ctx context.Context, res *Result) error {
	set := b.set
	c, err := b.startCluster(ctx, false, set.Workers, set.Slots, nil)
	if err != nil {
		return err
	}
	defer c.stop()
	if _, err := c.fanout(ctx, 20, 0); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	s := &Scaling{Workers: set.Workers, Slots: set.Slots}
	for _, n := range set.ScalingSizes {
		// Repeat small fan-outs: one of them is a few hundred microseconds.
		repeats := max(1, min(21, set.ScalingRepeat/n))
		b.logf("   %d helpers × %d", n, repeats)
		spans := make([]time.Duration, 0, repeats)
		cpu0 := cpuTime()
		in0, _ := c.messages()
		for range repeats {
			span, err := c.fanout(ctx, n, 0)
			if err != nil {
				return fmt.Errorf("%d helpers: %w", n, err)
			}
			spans = append(spans, span)
		}
		cpu := cpuTime() - cpu0
		in1, _ := c.messages()
		med := percentile(spans, 0.5)
		s.Points = append(s.Points, ScalePoint{Helpers: n, Repeats: repeats, MakespanMs: ms(med),
			PerHelperUs:       us(med / time.Duration(n)),
			CPUPerHelperUs:    round(float64(cpu)/float64(time.Microsecond)/float64(n*repeats), 1),
			MessagesPerHelper: round(float64(in1-in0)/float64(n*repeats), 1)})
	}
	base := slices.IndexFunc(s.Points, func(p ScalePoint) bool { return p.Helpers == 100 })
	last := s.Points[len(s.Points)-1]
	if base >= 0 && last.Helpers > 100 && s.Points[base].PerHelperUs > 0 {
		s.Ratio = round(last.PerHelperUs/s.Points[base].PerHelperUs, 3)
		if c := s.Points[base].CPUPerHelperUs; c > 0 {
			s.CPURatio = round(last.CPUPerHelperUs/c, 3)
		}
		s.RatioOf = fmt.Sprintf("%d/100", last.Helpers)
		res.ScalingRatio = ptr(s.Ratio)
	}
	res.Scaling = s
	return nil
}
