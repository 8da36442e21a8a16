package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// budgetRecord is the part of the --json record the budget tests read.
type budgetRecord struct {
	Status   string `json:"status"`
	Error    string `json:"error"`
	Output   string `json:"output"`
	Refusals struct {
		Budget int `json:"budget"`
	} `json:"refusals"`
	Threads []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"threads"`
	Budget map[string]struct {
		Used  int64 `json:"used"`
		Limit int64 `json:"limit"`
	} `json:"budget"`
}

// perCall is what every response of openAIServer costs: 12 prompt and 3
// completion tokens.
const perCall = 15

// chainServer makes each thread whose task is "depth-N" (N < last) spawn
// one helper "depth-N+1" and then answer with what it got; the last one
// answers at once. delay slows every response; results collects every tool
// result the model was shown.
func chainServer(t *testing.T, last int, delay time.Duration, results *[]string, mu *sync.Mutex) []string {
	srv := openAIServer(t, func(req *chatRequest) reply {
		time.Sleep(delay)
		if res := req.results(); len(res) > 0 {
			mu.Lock()
			*results = append(*results, res...)
			mu.Unlock()
			return reply{text: strings.Join(res, "\n")}
		}
		task := req.task()
		if strings.HasPrefix(task, "fan-") {
			n, _ := strconv.Atoi(strings.TrimPrefix(task, "fan-"))
			var calls [][2]string
			for i := range n {
				calls = append(calls, [2]string{fmt.Sprintf("h%d", i), "depth-" + strconv.Itoa(last)})
			}
			return reply{calls: calls}
		}
		var n int
		fmt.Sscanf(task, "depth-%d", &n)
		if n >= last {
			return reply{text: "bottom"}
		}
		return reply{calls: [][2]string{{fmt.Sprintf("d%d", n+1), fmt.Sprintf("depth-%d", n+1)}}}
	})
	return openAIEnv(srv)
}

func runBudget(t *testing.T, env []string, args ...string) budgetRecord {
	t.Helper()
	args = append([]string{"run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir()}, args...)
	r := formica(t, env, args...)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (failed)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var rec budgetRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("stdout: %v\n%s", err, r.stdout)
	}
	return rec
}

var tokensSpent = regexp.MustCompile(`^budget exhausted \(tokens\): (\d+)/50$`)

// TestTokenBudgetOverOpenAIWire runs a chain of helpers, one model call at
// a time, on 50 tokens: it stops within one call (15 tokens) past the
// budget, the spawn past it gets the exact text, every thread of the chain
// fails with the budget's reason and the run with its use.
func TestTokenBudgetOverOpenAIWire(t *testing.T) {
	var mu sync.Mutex
	var results []string
	env := chainServer(t, 8, 0, &results, &mu)
	rec := runBudget(t, env, "--budget-tokens", "50", "depth-0")
	m := tokensSpent.FindStringSubmatch(rec.Error)
	if rec.Status != "failed" || m == nil {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	used, _ := strconv.Atoi(m[1])
	if used < 50 || used > 50+perCall {
		t.Fatalf("used %d of 50: past one call of %d", used, perCall)
	}
	if b := rec.Budget["tokens"]; b.Used != int64(used) || b.Limit != 50 {
		t.Fatalf("record budget %+v", rec.Budget)
	}
	if rec.Refusals.Budget != 1 {
		t.Fatalf("refusals %+v", rec.Refusals)
	}
	for _, th := range rec.Threads {
		if th.Status != "failed" || th.Error != "budget exhausted (tokens)" {
			t.Errorf("thread %s: %s %q", th.Name, th.Status, th.Error)
		}
	}
	if len(rec.Threads) != used/perCall {
		t.Errorf("%d threads for %d calls", len(rec.Threads), used/perCall)
	}
}

// TestSpawnBudgetOverOpenAIWire fans out to four helpers on a budget of two
// spawns: the model sees two answers and two refusals with the exact text.
func TestSpawnBudgetOverOpenAIWire(t *testing.T) {
	var mu sync.Mutex
	var results []string
	env := chainServer(t, 0, 0, &results, &mu)
	rec := runBudget(t, env, "--budget-spawns", "2", "fan-4")
	if rec.Status != "failed" || rec.Error != "budget exhausted (spawns): 2/2" {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	refused := 0
	for _, r := range results {
		if r == "Agent budget exhausted (spawns). Solve the task yourself." {
			refused++
		} else if r != "bottom" {
			t.Errorf("tool result %q", r)
		}
	}
	if refused != 2 || len(results) != 4 || rec.Refusals.Budget != 2 || len(rec.Threads) != 3 {
		t.Fatalf("%d refused of %d results; record refusals %+v, %d threads", refused, len(results), rec.Refusals, len(rec.Threads))
	}
}

// TestDurationBudgetOverOpenAIWire runs a chain whose every model call takes
// 300ms on 1s: the thread whose next call would start past it fails with the
// exact reason, its parent sees it, and the run fails with the duration.
func TestDurationBudgetOverOpenAIWire(t *testing.T) {
	var mu sync.Mutex
	var results []string
	env := chainServer(t, 20, 300*time.Millisecond, &results, &mu)
	rec := runBudget(t, env, "--budget-duration", "1s", "depth-0")
	if rec.Status != "failed" || !strings.HasPrefix(rec.Error, "budget exhausted (duration): ") || !strings.HasSuffix(rec.Error, "/1s") {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	failed := 0
	for _, th := range rec.Threads {
		if th.Error == "budget exhausted (duration)" {
			failed++
		}
	}
	if failed == 0 || len(rec.Threads) >= 20 {
		t.Fatalf("%d of %d threads failed with the duration", failed, len(rec.Threads))
	}
}

// TestHelperBudgetOverOpenAIWire gives every helper a budget of 50 tokens
// (helper.budget in the agent spec; the run itself has none). The root
// starts two helpers at once: "a" heads a chain seven helpers deep (13
// model calls, 195 tokens) and "b" a chain of two (3 calls, 45 tokens). a's
// subtree stops within one call (15 tokens) past its 50 and a fails with
// the budget's reason; b and its helper finish, and so does the run, with
// b's answer and a's failure shown to the root exactly.
func TestHelperBudgetOverOpenAIWire(t *testing.T) {
	var mu sync.Mutex
	var rootResults []string
	srv := openAIServer(t, func(req *chatRequest) reply {
		task := req.task()
		if res := req.results(); len(res) > 0 {
			if task == "split" {
				mu.Lock()
				rootResults = append(rootResults, res...)
				mu.Unlock()
			}
			return reply{text: strings.Join(res, "\n")}
		}
		if task == "split" {
			return reply{calls: [][2]string{{"a", "depth-0"}, {"b", "depth-5"}}}
		}
		var n int
		fmt.Sscanf(task, "depth-%d", &n)
		if n >= 6 {
			return reply{text: "bottom"}
		}
		return reply{calls: [][2]string{{fmt.Sprintf("d%d", n+1), fmt.Sprintf("depth-%d", n+1)}}}
	})
	spec := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(spec, []byte("name: root\ntools: [agent]\nhelper:\n  budget: {tokens: 50}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := formica(t, openAIEnv(srv), "run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir(),
		"--agent", spec, "--agent-max-depth", "8", "split")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var rec struct {
		budgetRecord
		Threads []struct {
			ID       string `json:"id"`
			ParentID string `json:"parent_id"`
			Name     string `json:"name"`
			Status   string `json:"status"`
			Error    string `json:"error"`
			Usage    struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("stdout: %v\n%s", err, r.stdout)
	}
	want := "Helper a failed: budget exhausted (tokens)\nbottom"
	if rec.Status != "succeeded" || rec.Output != want {
		t.Fatalf("run: %s %q, output %q, want %q", rec.Status, rec.Error, rec.Output, want)
	}
	mu.Lock()
	got := strings.Join(rootResults, "\n")
	mu.Unlock()
	if got != want {
		t.Fatalf("the root was shown %q, want %q", got, want)
	}
	if _, ok := rec.Budget["tokens"]; ok {
		t.Fatalf("the run's own budget shows tokens: %+v", rec.Budget)
	}
	// Each subtree's tokens, summed from the threads' own usage.
	parent := map[string]string{}
	name := map[string]string{}
	for _, th := range rec.Threads {
		parent[th.ID], name[th.ID] = th.ParentID, th.Name
	}
	head := func(id string) string { // the root's helper above id
		for parent[id] != "" && parent[parent[id]] != "" {
			id = parent[id]
		}
		return name[id]
	}
	spent := map[string]int64{}
	for _, th := range rec.Threads {
		if th.ParentID == "" {
			continue
		}
		h := head(th.ID)
		spent[h] += th.Usage.InputTokens + th.Usage.OutputTokens
		switch {
		case h == "b" && th.Status != "succeeded":
			t.Errorf("b's subtree: thread %s %s %q", th.Name, th.Status, th.Error)
		case h == "a" && th.Status == "succeeded":
			t.Errorf("a's subtree: thread %s succeeded past the budget", th.Name)
		}
		if th.Name == "a" && (th.Status != "failed" || th.Error != "budget exhausted (tokens)") {
			t.Errorf("a: %s %q", th.Status, th.Error)
		}
	}
	t.Logf("tokens spent: a's subtree %d, b's %d (budget 50 each)", spent["a"], spent["b"])
	if spent["b"] != 3*perCall {
		t.Errorf("b's subtree spent %d tokens, want %d", spent["b"], 3*perCall)
	}
	if spent["a"] < 50 || spent["a"] > 50+perCall {
		t.Errorf("a's subtree spent %d tokens on a budget of 50: past one call of %d", spent["a"], perCall)
	}
}

// stuckServer is an OpenAI endpoint whose every call would take a minute
// (it lets go of them when the test ends).
func stuckServer(t *testing.T) []string {
	release := make(chan struct{})
	srv := openAIServer(t, func(*chatRequest) reply {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
		return reply{text: "too late"}
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	return openAIEnv(srv)
}

// cliSlack is what the CLI tests below allow past a bound: the slack
// docs/bounds.md gives (one second), and two more for what their clock
// also counts (the process's start, its embedded cluster's start and stop)
// on a loaded machine. Without the cut they would take a minute.
const cliSlack = 3 * time.Second

var durationDetail = regexp.MustCompile(`^budget exhausted \(duration\): \S+/3s$`)

// TestDurationBudgetCutsStuckCall: `formica run --budget-duration 3s`
// whose root is in a model call that would take a minute returns within
// the slack of its budget, failed with the budget's detail.
func TestDurationBudgetCutsStuckCall(t *testing.T) {
	env := stuckServer(t)
	start := time.Now()
	rec := runBudget(t, env, "--budget-duration", "3s", "think it over")
	overrun := time.Since(start) - 3*time.Second
	t.Logf("formica run returned %v after its budget: %s", overrun.Round(time.Millisecond), rec.Error)
	if rec.Status != "failed" || !durationDetail.MatchString(rec.Error) {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	if len(rec.Threads) != 1 || rec.Threads[0].Status != "failed" || rec.Threads[0].Error != "budget exhausted (duration)" {
		t.Errorf("threads %+v", rec.Threads)
	}
	if overrun > cliSlack {
		t.Errorf("formica run returned %v after its budget, past %v", overrun, cliSlack)
	}
}

// TestRunTimeoutReadsAsOnACluster: `formica run --timeout` is the run's
// deadline, kept by its coordinator as a submitted run's is: the run ends
// failed with "deadline exceeded", the words `formica submit --timeout`
// gives, within the same slack.
func TestRunTimeoutReadsAsOnACluster(t *testing.T) {
	env := stuckServer(t)
	start := time.Now()
	r := formica(t, env, "run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir(), "--timeout", "2s", "think it over")
	overrun := time.Since(start) - 2*time.Second
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var rec budgetRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("stdout: %v\n%s", err, r.stdout)
	}
	if rec.Status != "failed" || rec.Error != "deadline exceeded" {
		t.Fatalf("run: %s %q", rec.Status, rec.Error)
	}
	if !strings.Contains(r.stderr, "formica: run failed: deadline exceeded\n") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if overrun > cliSlack {
		t.Errorf("formica run returned %v after its timeout, past %v", overrun, cliSlack)
	}
}

// usdRecord is the part of the --json record the usd budget test reads.
type usdRecord struct {
	Status  string   `json:"status"`
	Error   string   `json:"error"`
	CostUSD *float64 `json:"cost_usd"`
	Threads []struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"threads"`
	Budget map[string]struct {
		Used  float64 `json:"used"`
		Limit float64 `json:"limit"`
	} `json:"budget"`
}

// TestUSDBudgetFlag: --budget-usd bounds the run in US dollars at the
// --prices file's prices. Each call is estimated at its default output
// (1,024 tokens, $0.1024 at $100 a million) before it is sent: on 5 cents
// the first call is refused and the run fails with the budget named; on a
// dollar the chain runs, and the record shows what it used, in dollars.
func TestUSDBudgetFlag(t *testing.T) {
	var mu sync.Mutex
	var results []string
	env := chainServer(t, 2, 0, &results, &mu)
	prices := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(prices, []byte("test-model: {input: 0, output: 100}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(want int, budget string) usdRecord {
		t.Helper()
		r := formica(t, env, "run", "--model", "openai:test-model", "--json", "--cwd", t.TempDir(),
			"--prices", prices, "--budget-usd", budget, "depth-0")
		if r.code != want {
			t.Fatalf("--budget-usd %s: exit %d, want %d\nstdout: %s\nstderr: %s", budget, r.code, want, r.stdout, r.stderr)
		}
		var rec usdRecord
		if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
			t.Fatalf("stdout: %v\n%s", err, r.stdout)
		}
		return rec
	}
	rec := run(1, "0.05")
	if rec.Status != "failed" || rec.Error != "budget exhausted (usd): $0.00/$0.05" {
		t.Fatalf("run on 5 cents: %s %q", rec.Status, rec.Error)
	}
	if b, ok := rec.Budget["usd"]; !ok || b.Used != 0 || b.Limit != 0.05 {
		t.Fatalf("record budget %+v", rec.Budget)
	}
	if len(rec.Threads) != 1 || rec.Threads[0].Error != "budget exhausted (usd)" {
		t.Fatalf("threads %+v", rec.Threads)
	}

	rec = run(0, "1")
	if rec.Status != "succeeded" || rec.CostUSD == nil {
		t.Fatalf("run on a dollar: %s %q, cost %v", rec.Status, rec.Error, rec.CostUSD)
	}
	// Five calls (three threads) of 3 output tokens at $100 a million.
	if b := rec.Budget["usd"]; b.Limit != 1 || b.Used != *rec.CostUSD || b.Used < 0.0014 || b.Used > 0.0016 {
		t.Fatalf("record budget %+v, cost %v", rec.Budget, *rec.CostUSD)
	}
}
