package cluster_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/formica-run/formica/internal/event"
	"github.com/formica-run/formica/internal/store"
	"github.com/formica-run/formica/internal/wire"
	tproc "github.com/formica-run/formica/test/proc"
)

// clusterTimeout bounds the start of a clustered coordinator: its run store
// needs a JetStream meta leader and every peer before it can place replicas.
const clusterTimeout = 2 * time.Minute

// node is one coordinator process embedding one node of a NATS cluster.
type node struct {
	id   string // coordinator id
	url  string // client URL of its NATS node
	proc *proc
}

// startNATSCluster starts n coordinator processes whose embedded NATS
// servers form one cluster over loopback routes, and waits until each node
// routes to every other (each sees every coordinator's heartbeat). A start
// that lost a port to another process is tried again with fresh ports.
func startNATSCluster(t *testing.T, n int) []node {
	t.Helper()
	for attempt := 1; ; attempt++ {
		nodes, ok := tryNATSCluster(t, n)
		if ok {
			return nodes
		}
		for _, nd := range nodes {
			nd.proc.kill(t)
		}
		if attempt == 3 {
			t.Fatalf("the %d-node cluster did not start", n)
		}
		t.Logf("cluster start lost a port to another process, trying again")
	}
}

func tryNATSCluster(t *testing.T, n int) ([]node, bool) {
	t.Helper()
	ports := freePorts(t, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i])
	}
	nodes := make([]node, n)
	// Every node trusts the same authority: one made in shared, copied
	// into each node's data dir (as docs/security.md says for a cluster).
	shared := t.TempDir()
	tproc.Creds(t, bin.coordinator, shared, "client", "setup")
	for i := range n {
		nodes[i] = node{id: fmt.Sprintf("c%d", i+1), url: natsURL(ports[i])}
		dir := t.TempDir()
		if err := os.CopyFS(filepath.Join(dir, "auth"), os.DirFS(filepath.Join(shared, "auth"))); err != nil {
			t.Fatal(err)
		}
		dataDirs.Store(nodes[i].url, shared)
		nodes[i].proc = start(t, "coordinator "+nodes[i].id, bin.coordinator,
			"--id", nodes[i].id, "--heartbeat", coordHeartbeat, "--data-dir", dir, "--http", "off",
			"--replicas", "3", // the run store survives the loss of a node
			"--cwd", os.TempDir(), // runs name t.TempDir()s as their --cwd
			"--nats-listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--nats-server-name", fmt.Sprintf("n%d", i+1),
			"--nats-cluster-name", "formica-test",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[n+i]),
			"--nats-routes", strings.Join(routes, ","))
	}
	for _, nd := range nodes {
		if !waitReadyWithin(t, nd.proc, "coordinator ready", clusterTimeout) {
			if strings.Contains(nd.proc.stderr.String(), "address already in use") {
				return nodes, false
			}
			t.Fatalf("%s exited (%s) before it was ready", nd.proc.name, nd.proc.status())
		}
	}
	for _, nd := range nodes {
		nc := connect(t, nd.url)
		var mu sync.Mutex
		seen := map[string]bool{}
		sub, err := nc.Subscribe(wire.SubjectCoordHeartbeats, func(m *nats.Msg) {
			var hb wire.CoordHeartbeat
			if wire.DecodeAs(m.Data, wire.TypeCoordHeartbeat, &hb) == nil {
				mu.Lock()
				seen[hb.ID] = true
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, readyTimeout, fmt.Sprintf("node %s hears all %d coordinators", nd.id, n), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == n
		})
		sub.Unsubscribe()
	}
	return nodes, true
}

// owner asks each coordinator about a run it would own: the owner knows the
// run (and answers that the probe's parent thread is not in it), the others
// say they do not own it.
func owner(t *testing.T, nc *nats.Conn, nodes []node, run string) int {
	t.Helper()
	probe := wire.MustEncode(wire.TypeSpawnRequest, wire.SpawnRequest{RunID: run, ParentID: "ownership-probe", Name: "probe", Task: "probe"})
	found := -1
	for i, nd := range nodes {
		reply, err := nc.Request(wire.SubjectSpawn(nd.id, "probe"), probe, 5*time.Second)
		if err != nil {
			t.Fatalf("probe %s: %v", nd.id, err)
		}
		text := string(reply.Data)
		switch {
		case reply.Header.Get("Formica-Type") != "error":
			t.Fatalf("probe %s: a %q reply", nd.id, reply.Header.Get("Formica-Type"))
		case strings.Contains(text, "is not owned by"):
		case strings.Contains(text, "is not in run"):
			if found >= 0 {
				t.Fatalf("both %s and %s own run %s", nodes[found].id, nd.id, run)
			}
			found = i
		default:
			t.Fatalf("probe %s: unexpected answer %q", nd.id, text)
		}
	}
	if found < 0 {
		t.Fatalf("no coordinator owns run %s", run)
	}
	return found
}

// TestRunSurvivesNATSNodeLoss: three coordinator processes, each embedding
// a node of one NATS cluster, and four workers given every node's URL. In
// the middle of a run, a node that neither hosts the run's coordinator nor
// the client is killed; its workers reconnect elsewhere, threads they lost
// are placed again, and the run succeeds.
func TestRunSurvivesNATSNodeLoss(t *testing.T) {
	t0 := time.Now()
	nodes := startNATSCluster(t, 3)
	t.Logf("cluster of 3 coordinators formed in %v", time.Since(t0).Round(time.Millisecond))
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.url)
	}
	// The test and the client use node 0, which is never killed.
	nc := connect(t, nodes[0].url)
	events := watchEvents(t, nc)
	hb := watchHeartbeats(t, nc)
	workers := map[string]*proc{}
	// Each worker picks a node at random; four of them make it likely that
	// some are on the node that dies.
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("w%d", i)
		workers[id] = start(t, "worker "+id, bin.worker, append(credsFlag(t, nodes[0].url, "worker", id), "--nats", strings.Join(urls, ","), "--id", id,
			"--slots", "3", "--heartbeat", fastHeartbeat)...)
	}
	for id, p := range workers {
		p.waitLog(t, "worker ready", readyTimeout)
		hb.waitSeen(t, id, 2)
	}

	t.Logf("workers ready after %v", time.Since(t0).Round(time.Millisecond))
	// The cluster holds the store's streams, replicated on the three
	// nodes, the consumers of the queue and of the webhooks and a lease
	// watch per coordinator; the four workers add none.
	cli := start(t, "formica assets", bin.formica, append([]string{"assets", "--json", "--nats", nodes[0].url},
		credsFlag(t, nodes[0].url, "client", "cli")...)...)
	var assets wire.Assets
	if code := cli.wait(t, readyTimeout); code != 0 || json.Unmarshal([]byte(cli.stdout.String()), &assets) != nil {
		t.Fatalf("formica assets: exit %d\n%s%s", code, cli.stdout.String(), cli.stderr.String())
	}
	t.Logf("formica assets: %d streams, %d consumers", assets.Streams, assets.Consumers)
	if assets.Streams != store.OwnStreams || assets.Consumers != 2+len(nodes) {
		t.Errorf("formica assets: %d streams, %d consumers; want %d and %d", assets.Streams, assets.Consumers, store.OwnStreams, 2+len(nodes))
	}
	task := "Plan:\n- a\n  - a1\n  - a2\n- b\n  - b1\n  - b2\n- c\n  - c1\n  - c2"
	run := startRun(t, nodes[0].url, "--agent", simAgent(t, 1000), task)
	leaf := events.wait(t, eventTimeout, "a depth-2 helper started", started(func(d int) bool { return d == 2 }))
	own := owner(t, nc, nodes, leaf.RunID)
	victim := 1
	if own == 1 {
		victim = 2
	}
	t.Logf("run %s is owned by %s; killing node %s after %v", leaf.RunID, nodes[own].id, nodes[victim].id, time.Since(t0).Round(time.Millisecond))
	nodes[victim].proc.kill(t)

	rec := succeeded(t, run)
	t.Logf("run ended after %v", time.Since(t0).Round(time.Millisecond))
	want := "a: a1: done: a1\n  a2: done: a2\nb: b1: done: b1\n  b2: done: b2\nc: c1: done: c1\n  c2: done: c2"
	if rec.Output != want {
		t.Errorf("output:\n%s\nwant:\n%s", rec.Output, want)
	}
	var moved []string
	for id, p := range workers {
		if strings.Contains(p.stderr.String(), "nats reconnected") {
			moved = append(moved, id)
		}
	}
	lost := 0
	for _, e := range events.all() {
		if e.Type == event.WorkerLost {
			lost++
		}
	}
	t.Logf("workers that reconnected to another node: %v; worker.lost events: %d", moved, lost)
	if nodes[own].proc.exited() || nodes[0].proc.exited() {
		t.Errorf("a surviving coordinator exited: %s, %s", nodes[own].proc.status(), nodes[0].proc.status())
	}
}
