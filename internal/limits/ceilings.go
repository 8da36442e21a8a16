package limits

import (
	"fmt"
	"strconv"
	"time"
)

// Default ceilings: the most one submission may ask of a coordinator.
const (
	DefaultCeilingThreads = 256
	DefaultCeilingDepth   = 16
	DefaultCeilingSpawns  = 10_000
	DefaultCeilingTask    = 256 << 10
	DefaultMaxRunTimeout  = 24 * time.Hour
)

// Ceilings cap what a submission may ask, so no run can make its
// coordinator hold more than this in memory: MaxThreads bounds the live
// helpers of a run, MaxSpawns every helper it may ever start (the threads
// the coordinator keeps for its record), MaxDepth how deep it may grow and
// MaxTaskBytes the task it carries. Zero values mean the defaults.
type Ceilings struct {
	MaxThreads    int
	MaxDepth      int
	MaxSpawns     int
	MaxTaskBytes  int
	MaxRunTimeout time.Duration
}

// WithDefaults fills in the zero fields.
func (c Ceilings) WithDefaults() Ceilings {
	orDefault(&c.MaxThreads, DefaultCeilingThreads)
	orDefault(&c.MaxDepth, DefaultCeilingDepth)
	orDefault(&c.MaxSpawns, DefaultCeilingSpawns)
	orDefault(&c.MaxTaskBytes, DefaultCeilingTask)
	orDefault(&c.MaxRunTimeout, DefaultMaxRunTimeout)
	return c
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Ask is what one submission asks for.
type Ask struct {
	Limits    Config
	Budget    Budget
	TaskBytes int
	Timeout   time.Duration
}

// CeilingError is a submission that asks more than a ceiling allows. Its
// text names the field, the value asked, the ceiling and the coordinator
// flag that sets it.
type CeilingError struct {
	Field   string
	Asked   string
	Ceiling string
	Flag    string
}

func (e *CeilingError) Error() string {
	return fmt.Sprintf("%s %s is above the ceiling of %s (coordinator --%s)", e.Field, e.Asked, e.Ceiling, e.Flag)
}

// Unwrap makes a CeilingError match ErrBadConfig.
func (e *CeilingError) Unwrap() error { return ErrBadConfig }

// Check is the one rule for what a submission may ask, shared by the API,
// the CLI and the coordinator (the authority, which checks again). It
// rejects negative values too, so one call validates the whole ask.
func (c Ceilings) Check(a Ask) error {
	c = c.WithDefaults()
	if err := a.Limits.Validate(); err != nil {
		return err
	}
	if err := a.Budget.Validate(); err != nil {
		return err
	}
	if a.Timeout < 0 {
		return fmt.Errorf("%w: timeout %s is negative", ErrBadConfig, a.Timeout)
	}
	eff := a.Limits.withDefaults()
	switch {
	case eff.MaxThreads > c.MaxThreads:
		return &CeilingError{"agent_max_threads", strconv.Itoa(eff.MaxThreads), strconv.Itoa(c.MaxThreads), "max-agent-threads"}
	case eff.MaxDepth > c.MaxDepth:
		return &CeilingError{"agent_max_depth", strconv.Itoa(eff.MaxDepth), strconv.Itoa(c.MaxDepth), "max-agent-depth"}
	case a.Budget.Spawns > c.MaxSpawns:
		return &CeilingError{"budget.spawns", strconv.Itoa(a.Budget.Spawns), strconv.Itoa(c.MaxSpawns), "max-spawns"}
	case a.TaskBytes > c.MaxTaskBytes:
		return &CeilingError{"task", strconv.Itoa(a.TaskBytes) + " bytes", strconv.Itoa(c.MaxTaskBytes) + " bytes", "max-task-bytes"}
	case a.Timeout > c.MaxRunTimeout:
		return &CeilingError{"timeout", a.Timeout.String(), c.MaxRunTimeout.String(), "max-run-timeout"}
	}
	return nil
}

// Spawns is the spawn limit of a run under these ceilings: the budget's,
// or the ceiling when the budget sets none.
func (c Ceilings) Spawns(b Budget) int {
	c = c.WithDefaults()
	if b.Spawns > 0 && b.Spawns < c.MaxSpawns {
		return b.Spawns
	}
	return c.MaxSpawns
}
