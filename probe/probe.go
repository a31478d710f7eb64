// Package probe owns scheduled probes: it runs a check per target every
// interval, keeps success and attempt counters per target and UTC day in kv
// (so they survive restarts), reports observed availability as the Wilson
// score lower bound over a sliding window of days, withheld while there are
// too few probes to say anything, and emits a change event when a target
// goes up or down.
//
// It knows nothing of the services that own the targets: a target is a name
// and a function; helpers build the checks the facilitator needs (a chain id
// read over RPC, a network's settle path) from small interfaces.
package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// MinProbes is the number of probes in the window below which availability
// is withheld: fewer say nothing useful (one success would read as 21%).
const MinProbes = 5

// Z is the normal quantile of the Wilson bound: 95% two-sided confidence.
const Z = 1.96

// Defaults of Options.
const (
	DefaultInterval = 30 * time.Second
	DefaultTimeout  = 10 * time.Second
	DefaultWindow   = 30 // days
)

// Target is one thing probed. Name is its counter key, unique within a
// scheduler; Group and Path let a report be read per network and path.
type Target struct {
	// Name identifies the counters in kv, e.g. "eip155:8453/rpc". Renaming a
	// target starts its counts from zero.
	Name string
	// Group is what the target belongs to, e.g. the network "eip155:8453".
	Group string
	// Path is the aspect probed within the group, e.g. "rpc" or "settle".
	Path string
	// Check returns nil when the target works. It must honour ctx.
	Check func(ctx context.Context) error
}

// Change is a target changing state between two probes.
type Change struct {
	Target Target
	At     time.Time
	Up     bool
	// Error is why the probe failed (empty when Up).
	Error string
}

// Options tune New. Zero values take the defaults.
type Options struct {
	// Interval between two rounds of probes; default 30 s.
	Interval time.Duration
	// Timeout bounds one check; default 10 s.
	Timeout time.Duration
	// Window is the number of UTC days, today included, that availability
	// is computed over; default 30.
	Window int
	// Logger receives change events and store errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnChange is called after a probe whose outcome differs from the
	// target's previous one (not on a target's first probe). It runs on the
	// scheduler's goroutine: keep it short.
	OnChange func(Change)
}

// Scheduler probes its targets every interval. Build it with New, call
// Start, and Close it before closing the store.
type Scheduler struct {
	db      *kv.DB
	targets []Target
	opts    Options
	logger  *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a scheduler for targets recording in db. Targets need a
// unique non-empty name and a check.
func New(db *kv.DB, targets []Target, opts Options) (*Scheduler, error) {
	if db == nil {
		return nil, errors.New("probe: nil store")
	}
	seen := map[string]bool{}
	for i, t := range targets {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("probe: target %d has no name", i)
		case t.Check == nil:
			return nil, fmt.Errorf("probe: target %s has no check", t.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("probe: target %s given twice", t.Name)
		}
		seen[t.Name] = true
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{
		db:      db,
		targets: slices.Clone(targets),
		opts:    opts,
		logger:  opts.Logger.With("component", "probe"),
	}, nil
}

// Targets returns the scheduler's targets in the order given.
func (s *Scheduler) Targets() []Target { return slices.Clone(s.targets) }

// Start probes every target at once and then every interval, in a
// goroutine, until Close or ctx ends. Calling it twice is a no-op.
func (s *Scheduler) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

func (s *Scheduler) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(s.opts.Interval)
	defer tick.Stop()
	lastPrune := time.Time{}
	for {
		s.RunOnce(ctx)
		// Day counts older than the window serve nothing; dropping them
		// daily keeps the bucket the size of the window.
		if now := s.opts.Now(); now.Sub(lastPrune) > 24*time.Hour {
			if _, err := s.db.PruneProbes(windowStart(now, s.opts.Window)); err != nil {
				s.logger.Error("prune probe counts", "err", err)
			}
			lastPrune = now
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Close stops the schedule and waits for a round in progress, bounded by
// ctx.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RunOnce probes every target once, concurrently (a slow RPC must not delay
// the others' counts), and records the outcomes. A round cancelled by ctx
// records nothing for the checks it cut short: shutting down is not an
// outage.
func (s *Scheduler) RunOnce(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range s.targets {
		wg.Go(func() { s.probe(ctx, t) })
	}
	wg.Wait()
}

func (s *Scheduler) probe(ctx context.Context, t Target) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	err := runCheck(cctx, t.Check)
	cancel()
	if ctx.Err() != nil {
		return
	}
	probeResults.WithLabelValues(t.Path, outcomeOf(err)).Inc()
	at := s.opts.Now()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	prev, rerr := s.db.RecordProbe(t.Name, at, err == nil, msg)
	if rerr != nil {
		s.logger.Error("record probe", "target", t.Name, "err", rerr)
		return
	}
	if prev.At.IsZero() || prev.OK == (err == nil) {
		return
	}
	ch := Change{Target: t, At: at, Up: err == nil, Error: msg}
	if ch.Up {
		s.logger.Info("probe target up", "target", t.Name, "down_since", prev.Since)
	} else {
		s.logger.Warn("probe target down", "target", t.Name, "err", msg)
	}
	if s.opts.OnChange != nil {
		s.opts.OnChange(ch)
	}
}

// runCheck turns a panicking check into a failed probe: one broken check
// must not stop the schedule.
func runCheck(ctx context.Context, check func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("check panicked: %v", r)
		}
	}()
	return check(ctx)
}

// Availability is the observed availability of one target over the window.
type Availability struct {
	Target    string `json:"target"`
	Group     string `json:"group,omitempty"`
	Path      string `json:"path,omitempty"`
	Probes    int64  `json:"probes"`
	Successes int64  `json:"successes"`
	// LowerBound is the Wilson score lower bound (95%) of the success
	// ratio, in [0, 1]; nil while Probes < MinProbes.
	LowerBound *float64 `json:"lowerBound"`
	// Withheld says why LowerBound is nil.
	Withheld   string `json:"withheld,omitempty"`
	WindowDays int    `json:"windowDays"`
	// Last is the most recent probe; nil when never probed.
	Last *LastProbe `json:"last,omitempty"`
}

// LastProbe is the most recent probe of a target.
type LastProbe struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	// Since is when the target entered its current state.
	Since time.Time `json:"since"`
}

// Report returns the availability of every target, in the order given.
func (s *Scheduler) Report() ([]Availability, error) {
	out := make([]Availability, 0, len(s.targets))
	for _, t := range s.targets {
		a, err := s.availability(t)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Group returns the availability of the targets of one group, in the order
// given.
func (s *Scheduler) Group(group string) ([]Availability, error) {
	var out []Availability
	for _, t := range s.targets {
		if t.Group != group {
			continue
		}
		a, err := s.availability(t)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (s *Scheduler) availability(t Target) (Availability, error) {
	now := s.opts.Now()
	c, last, err := s.db.ProbeWindow(t.Name, windowStart(now, s.opts.Window), now)
	if err != nil {
		return Availability{}, err
	}
	a := Availability{Target: t.Name, Group: t.Group, Path: t.Path,
		Probes: c.Total, Successes: c.Successes, WindowDays: s.opts.Window}
	if lb, ok := WilsonLowerBound(c.Successes, c.Total); ok {
		a.LowerBound = &lb
	} else {
		a.Withheld = fmt.Sprintf("%d of the %d probes needed so far", c.Total, MinProbes)
	}
	if !last.At.IsZero() {
		a.Last = &LastProbe{At: last.At, OK: last.OK, Error: last.Error, Since: last.Since}
	}
	return a, nil
}

// windowStart is the first instant of the window's first UTC day.
func windowStart(now time.Time, days int) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -(days - 1))
}

// WilsonLowerBound returns the lower bound of the Wilson score interval at
// 95% confidence (z = 1.96) for successes out of total. ok is false, and the
// bound withheld, when total < MinProbes or the counts are inconsistent.
//
// Wilson rather than the plain ratio because a target probed three times,
// all fine, has not shown 100% availability; the bound rises towards the
// observed ratio as evidence accumulates.
func WilsonLowerBound(successes, total int64) (lb float64, ok bool) {
	if total < MinProbes || successes < 0 || successes > total {
		return 0, false
	}
	n := float64(total)
	p := float64(successes) / n
	z2 := Z * Z
	centre := p + z2/(2*n)
	margin := Z * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	lb = (centre - margin) / (1 + z2/n)
	// Rounding can push an all-failure bound a hair below zero.
	return max(0, min(1, lb)), true
}
