package worker

import (
	"encoding/json"
	"strconv"

	"github.com/nats-io/nats.go/micro"

	"github.com/formica-run/formica/internal/wire"
)

// Version is reported by the worker's micro service.
const Version = "0.1.0"

// addService registers the worker as micro service formica-worker, so
// `nats micro ls|info|stats` lists it, with its status endpoint; Start
// adds placement (exec) to it.
func (w *Worker) addService() error {
	svc, err := micro.AddService(w.cfg.Conn, micro.Config{
		Name:        "formica-worker",
		Version:     Version,
		Description: "Formica worker: hosts agent threads",
		Metadata:    map[string]string{"id": w.cfg.ID, "host": w.host, "slots": strconv.Itoa(w.cfg.Slots)},
		StatsHandler: func(*micro.Endpoint) any {
			return map[string]int{"slots": w.cfg.Slots, "running": w.Running(), "hosted": w.Hosted()}
		},
	})
	if err != nil {
		return err
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(func(r micro.Request) {
		b, _ := json.Marshal(map[string]any{"id": w.cfg.ID, "host": w.host, "slots": w.cfg.Slots,
			"running": w.Running(), "hosted": w.Hosted(), "draining": w.draining.Load()})
		r.Respond(b)
	}), micro.WithEndpointSubject(wire.WorkerSubjectPrefix+w.cfg.ID+".status"))
	if err != nil {
		svc.Stop()
		return err
	}
	w.svc = svc
	return nil
}
