package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// describing is a Registerer that notes the name of every metric
// registered through it, series or not (a Gather lists only metrics with
// series, and a vector has none before its first use).
type describing struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registerer.Register(c)
}

func (d describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// exportedNames lists every metric a process doing roles exports.
func exportedNames(t *testing.T, roles Role) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := describing{Registerer: reg, names: map[string]bool{}}
	build(roles, reg, d)
	if len(d.names) < 40 {
		t.Fatalf("only %d metrics described: %v", len(d.names), d.names)
	}
	return d.names
}

// promName finds the metric and recording rule names in a PromQL
// expression: Formica's own (formica_...) and its recording rules'
// (formica:...). Label values such as job="formica-worker" do not match.
var promName = regexp.MustCompile(`\bformica[_:][A-Za-z0-9_:]*`)

// ruleFile is deploy/prometheus-rules.yml.
type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

// TestDeployNamesExist: every metric the recording rules, alerts and the
// Grafana dashboard in deploy/ name is one the processes export, and every
// recording rule the alerts and the dashboard use is defined, so a renamed
// metric cannot leave them reading nothing.
func TestDeployNamesExist(t *testing.T) {
	exported := exportedNames(t, All)
	deploy := filepath.Join("..", "..", "deploy")
	data, err := os.ReadFile(filepath.Join(deploy, "prometheus-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("prometheus-rules.yml: %v", err)
	}
	recorded := map[string]bool{}
	exprs := map[string]string{} // expression -> where it is
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			exprs[r.Expr] = "prometheus-rules.yml: " + r.Record + r.Alert
		}
	}
	data, err = os.ReadFile(filepath.Join(deploy, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs[tg.Expr] = "grafana-dashboard.json: panel " + p.Title
		}
	}
	if len(recorded) == 0 || len(dash.Panels) == 0 {
		t.Fatalf("%d recording rules, %d panels", len(recorded), len(dash.Panels))
	}
	for expr, where := range exprs {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: no expression", where)
		}
		for _, n := range promName.FindAllString(expr, -1) {
			switch {
			case strings.HasPrefix(n, "formica:"):
				if !recorded[n] {
					t.Errorf("%s: %s is not a recording rule of prometheus-rules.yml", where, n)
				}
			case !exported[n] && !exported[histogramBase(n)]:
				t.Errorf("%s: metric %s is not exported by internal/metrics", where, n)
			}
		}
		// A worker drained by SIGTERM is counted as left, not lost, and
		// must not page anyone: the lost-worker alert reads the lost count.
		if strings.HasSuffix(where, "FormicaWorkerLost") && !strings.Contains(expr, "formica_workers_lost_total") {
			t.Errorf("%s does not read formica_workers_lost_total: %s", where, expr)
		}
	}
}

// histogramBase is the histogram a _bucket, _sum or _count series belongs to.
func histogramBase(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}
