package bench

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// inFlight is how many requests the throughput floors keep going at once.
const inFlight = 64

// payloadSize is the raw request's body, about a small spawn's envelope.
const payloadSize = 128

func (b *suite) floors(ctx context.Context, res *Result) error {
	f := &Floors{Goroutine: goroutineFloor(b.set.Samples, b.set.Window)}
	for _, tcp := range []bool{false, true} {
		srv, err := startServer(ctx, tcp, "")
		if err != nil {
			return err
		}
		// Plain NATS request-reply between two connections.
		lat, rate, cpu, err := rawRoundTrips(dialer(srv, tcp), b.set.Samples, b.set.Window)
		srv.Shutdown()
		if err != nil {
			return err
		}
		if tcp {
			f.NATSTCP = floor(lat, rate, cpu)
		} else {
			f.NATSInproc = floor(lat, rate, cpu)
		}
	}
	res.Floors = f
	return nil
}

// goroutineFloor is a call to another goroutine that answers on a channel:
// the cheapest request-reply Go has.
func goroutineFloor(samples int, window time.Duration) Floor {
	type req struct {
		v     int
		reply chan int
	}
	reqs := make(chan req)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case r := <-reqs:
				r.reply <- r.v
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	reply := make(chan int)
	lat := make([]time.Duration, samples)
	for i := range lat {
		t0 := time.Now()
		reqs <- req{i, reply}
		<-reply
		lat[i] = time.Since(t0)
	}
	rate, cpu, _ := parallelRate(window, func() func() error {
		reply := make(chan int, 1)
		return func() error {
			reqs <- req{1, reply}
			<-reply
			return nil
		}
	})
	return floor(lat, rate, cpu)
}

// floor is p50/p99 of the sequential round trips lat, then the rate and CPU
// time per request with 64 in flight.
func floor(lat []time.Duration, rate, cpuUs float64) Floor {
	return Floor{Samples: len(lat), P50us: us(percentile(lat, 0.5)), P99us: us(percentile(lat, 0.99)),
		RequestsPerSec: round(rate, 0), CPUPerRequestUs: round(cpuUs, 2)}
}

// rawRoundTrips times samples sequential request-replies and, when window is
// set, counts those completed with 64 in flight for that long: their rate,
// and the process CPU time each cost (server, both clients).
func rawRoundTrips(dial func(string) (*nats.Conn, error), samples int, window time.Duration) (lat []time.Duration, rate, cpuUs float64, err error) {
	resp, err := dial("bench-responder")
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Close()
	req, err := dial("bench-requester")
	if err != nil {
		return nil, 0, 0, err
	}
	defer req.Close()
	subject := "formica.bench.echo." + nats.NewInbox()[len(nats.InboxPrefix):]
	sub, err := resp.Subscribe(subject, func(m *nats.Msg) { m.Respond(m.Data) })
	if err != nil {
		return nil, 0, 0, err
	}
	defer sub.Unsubscribe()
	sub.SetPendingLimits(-1, -1)
	if err := resp.Flush(); err != nil {
		return nil, 0, 0, err
	}
	payload := make([]byte, payloadSize)
	// A few untimed trips set up the response mux and warm the path.
	for range 50 {
		if _, err := req.Request(subject, payload, 5*time.Second); err != nil {
			return nil, 0, 0, fmt.Errorf("raw request: %w", err)
		}
	}
	lat = make([]time.Duration, samples)
	for i := range lat {
		t0 := time.Now()
		if _, err := req.Request(subject, payload, 5*time.Second); err != nil {
			return nil, 0, 0, fmt.Errorf("raw request: %w", err)
		}
		lat[i] = time.Since(t0)
	}
	if window <= 0 {
		return lat, 0, 0, nil
	}
	rate, cpuUs, err = parallelRate(window, func() func() error {
		return func() error {
			_, err := req.Request(subject, payload, 5*time.Second)
			return err
		}
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("raw request, %d in flight: %w", inFlight, err)
	}
	return lat, rate, cpuUs, nil
}

// parallelRate runs 64 callers, each calling its own op in a loop for
// window, and returns completed calls per second and the process CPU time
// per call in microseconds, or an error of a caller that stopped on one.
// newOp is called once per caller, before the clock starts.
func parallelRate(window time.Duration, newOp func() func() error) (rate, cpuUs float64, err error) {
	ops := make([]func() error, inFlight)
	for i := range ops {
		ops[i] = newOp()
	}
	var done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make([]error, len(ops))
	start, cpu0 := time.Now(), cpuTime()
	for i, op := range ops {
		wg.Go(func() {
			for !stop.Load() {
				if errs[i] = op(); errs[i] != nil {
					return
				}
				done.Add(1)
			}
		})
	}
	time.Sleep(window)
	stop.Store(true)
	n := done.Load()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	wg.Wait()
	if err := cmp.Or(errs...); err != nil || n == 0 {
		return 0, 0, err
	}
	return float64(n) / elapsed.Seconds(), float64(cpu) / float64(time.Microsecond) / float64(n), nil
}
