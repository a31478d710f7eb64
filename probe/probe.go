// Package probe owns scheduled probes: it runs a check per target on a
// schedule (an interval with jitter, politeness per host, a global budget
// per minute), keeps success and attempt counters, outcome classes and a
// latency histogram per target and UTC day in kv (so they survive
// restarts), reports observed availability as the Wilson score lower bound
// over a sliding window of days, withheld while there are too few probes to
// say anything, and declares a target down or up after a debounce, with the
// change events written in the same transaction as the probe.
//
// It knows nothing of the services that own the targets: a target is a name
// and a function; helpers build the checks the facilitator needs (a chain id
// read over RPC, a network's settle path) from small interfaces, and the
// registry builds its own for indexed endpoints.
package probe

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

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
	// DefaultMaxConcurrent bounds the probes in flight across all targets.
	DefaultMaxConcurrent = 64
)

// States of a target, after the debounce.
const (
	StateUp   = "up"
	StateDown = "down"
)

// Target is one thing probed. Name is its counter key, unique within a
// scheduler; Group and Path let a report be read per network and path (or
// per kind and transport).
type Target struct {
	// Name identifies the counters in kv, e.g. "eip155:8453/rpc". Renaming a
	// target starts its counts from zero.
	Name string
	// Group is what the target belongs to, e.g. the network "eip155:8453".
	Group string
	// Path is the aspect probed within the group, e.g. "rpc" or "settle".
	Path string
	// Host is the politeness key: probes of targets sharing a host obey
	// Options.HostConcurrency and HostGap. Empty means no host limits.
	Host string
	// Check returns nil when the target works. It must honour ctx. Give
	// either Check or Observe.
	Check func(ctx context.Context) error
	// Observe is a check that reports more than an error: an outcome class
	// and, for MCP servers, the tool list's hashes.
	Observe func(ctx context.Context) Observation
	// Events returns the change events to append with a probe's record,
	// given the target's previous and new last results (for instance
	// endpoint down/up, tool list changed). It runs inside the write
	// transaction and may run more than once: it must be pure.
	Events func(prev, cur kv.ProbeResult) []kv.Change
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
	// Interval between two probes of one target; default 30 s.
	Interval time.Duration
	// Jitter spreads each next probe uniformly over ±Jitter×Interval, so
	// targets added together do not stay in lockstep. 0 to 1; default 0.
	Jitter float64
	// Spread makes a target's first probe happen at a random time within
	// one interval rather than at once (a large index must not be probed
	// in one burst at start).
	Spread bool
	// Timeout bounds one check; default 10 s.
	Timeout time.Duration
	// Window is the number of UTC days, today included, that availability
	// is computed over; default 30.
	Window int
	// HostConcurrency is how many probes of one Host may run at once;
	// default 1.
	HostConcurrency int
	// HostGap is the least time between the starts of two probes of one
	// Host; default 0.
	HostGap time.Duration
	// Budget caps the probes started per minute across all targets; 0
	// means no cap. Targets due beyond it wait their turn.
	Budget int
	// MaxConcurrent caps the probes in flight; default 64.
	MaxConcurrent int
	// DownAfter is how many consecutive failed probes declare a target
	// down; default 1. A target is up again at its first answered probe.
	DownAfter int
	// Targets, when set, supplies the targets instead of New's list; it is
	// called at Start and every Refresh (default: Interval).
	Targets func() ([]Target, error)
	Refresh time.Duration
	// Logger receives change events and store errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock of the records; nil means time.Now. Waiting always
	// uses the time package (testing/synctest fakes both).
	Now func() time.Time
	// OnChange is called after a probe that changed the target's state
	// between up and down (not on a target's first state). It runs on the
	// probe's goroutine: keep it short.
	OnChange func(Change)
}

// Scheduler probes its targets on a schedule. Build it with New, call
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
	if err := validTargets(targets); err != nil {
		return nil, err
	}
	if opts.Targets != nil && len(targets) > 0 {
		return nil, errors.New("probe: give targets or Options.Targets, not both")
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
	if opts.HostConcurrency <= 0 {
		opts.HostConcurrency = 1
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = 1
	}
	if opts.Refresh <= 0 {
		opts.Refresh = opts.Interval
	}
	opts.Jitter = min(max(opts.Jitter, 0), 1)
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

func validTargets(targets []Target) error {
	seen := map[string]bool{}
	for i, t := range targets {
		switch {
		case t.Name == "":
			return fmt.Errorf("probe: target %d has no name", i)
		case t.Check == nil && t.Observe == nil:
			return fmt.Errorf("probe: target %s has no check", t.Name)
		case seen[t.Name]:
			return fmt.Errorf("probe: target %s given twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// Window is the number of days availability is computed over.
func (s *Scheduler) Window() int { return s.opts.Window }

// Targets returns the scheduler's targets: New's list in order, or the
// latest Options.Targets answer.
func (s *Scheduler) Targets() []Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.targets)
}

// Start probes the targets on the schedule in a goroutine until Close or
// ctx ends: each at once (or, with Spread, within its first interval) and
// then every interval. Calling it twice is a no-op.
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

// slot is the schedule of one target.
type slot struct {
	t       Target
	due     time.Time
	running bool
	gone    bool // dropped from the targets while running
	index   int  // in the due heap, while not running
}

// dueHeap orders the slots that are not running by due time, so a round of
// dispatching looks at the due ones only, however many targets there are.
type dueHeap []*slot

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *dueHeap) Push(x any)        { sl := x.(*slot); sl.index = len(*h); *h = append(*h, sl) }
func (h *dueHeap) Pop() any {
	old := *h
	sl := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	sl.index = -1
	return sl
}

// host is the politeness state of one host.
type host struct {
	inflight int
	next     time.Time // earliest next start
}

// loop dispatches due targets, oldest due first, within the host limits,
// the concurrency cap and the budget, and sleeps until the next one can go.
func (s *Scheduler) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	var (
		slots    = map[string]*slot{}
		queue    = &dueHeap{}
		hosts    = map[string]*host{}
		finished = make(chan *slot)
		inflight int
		wg       sync.WaitGroup
		refresh  time.Time
		pruned   time.Time
		budget   *rate.Limiter
		deferred []*slot
	)
	defer wg.Wait()
	if s.opts.Budget > 0 {
		perSec := float64(s.opts.Budget) / 60
		budget = rate.NewLimiter(rate.Limit(perSec), max(1, int(math.Ceil(perSec))))
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		if !now.Before(refresh) {
			s.refresh(now, slots, queue)
			refresh = now.Add(s.opts.Refresh)
		}
		// Day counts older than the window serve nothing; dropping them
		// daily keeps the bucket the size of the window.
		if at := s.opts.Now(); at.Sub(pruned) > 24*time.Hour {
			if _, err := s.db.PruneProbes(windowStart(at, s.opts.Window)); err != nil {
				s.logger.Error("prune probe counts", "err", err)
			}
			pruned = at
		}
		wake := refresh
		deferred = deferred[:0]
		for queue.Len() > 0 && inflight < s.opts.MaxConcurrent {
			sl := (*queue)[0]
			if sl.due.After(now) {
				wake = minTime(wake, sl.due)
				break
			}
			var h *host
			if sl.t.Host != "" {
				if h = hosts[sl.t.Host]; h == nil {
					h = &host{}
					hosts[sl.t.Host] = h
				}
				if h.inflight >= s.opts.HostConcurrency || h.next.After(now) {
					if h.inflight < s.opts.HostConcurrency {
						wake = minTime(wake, h.next)
					} // else woken when one of its probes finishes
					deferred = append(deferred, heap.Pop(queue).(*slot))
					continue
				}
			}
			if budget != nil {
				r := budget.ReserveN(now, 1)
				if d := r.DelayFrom(now); d > 0 {
					r.CancelAt(now)
					wake = minTime(wake, now.Add(d))
					break
				}
			}
			heap.Pop(queue)
			if h != nil {
				h.inflight++
				h.next = now.Add(s.opts.HostGap)
			}
			inflight++
			sl.running = true
			sl.due = now.Add(s.nextInterval())
			wg.Add(1)
			t := sl.t // refresh may replace sl.t while the probe runs
			go func() {
				defer wg.Done()
				s.probe(ctx, t)
				select {
				case finished <- sl:
				case <-ctx.Done():
				}
			}()
		}
		for _, sl := range deferred {
			heap.Push(queue, sl)
		}
		timer.Reset(max(0, wake.Sub(now)))
		select {
		case <-ctx.Done():
			return
		case sl := <-finished:
			inflight--
			sl.running = false
			if h := hosts[sl.t.Host]; h != nil {
				if h.inflight--; h.inflight == 0 && !h.next.After(time.Now()) {
					delete(hosts, sl.t.Host)
				}
			}
			if sl.gone {
				if slots[sl.t.Name] == sl {
					delete(slots, sl.t.Name)
				}
			} else {
				heap.Push(queue, sl)
			}
		case <-timer.C:
		}
	}
}

// refresh reloads the targets (when they come from Options.Targets) and
// brings the slots in line: new targets are scheduled, gone ones dropped.
func (s *Scheduler) refresh(now time.Time, slots map[string]*slot, queue *dueHeap) {
	targets := s.Targets()
	if s.opts.Targets != nil {
		got, err := s.opts.Targets()
		if err != nil {
			s.logger.Error("list probe targets", "err", err)
			return
		}
		if err := validTargets(got); err != nil {
			s.logger.Error("list probe targets", "err", err)
			return
		}
		targets = got
		s.mu.Lock()
		s.targets = slices.Clone(got)
		s.mu.Unlock()
	}
	keep := make(map[string]bool, len(targets))
	for _, t := range targets {
		keep[t.Name] = true
		if sl, ok := slots[t.Name]; ok {
			sl.t, sl.gone = t, false
			continue
		}
		due := now
		if s.opts.Spread {
			due = now.Add(time.Duration(rand.Int64N(int64(s.opts.Interval))))
		}
		sl := &slot{t: t, due: due}
		slots[t.Name] = sl
		heap.Push(queue, sl)
	}
	for name, sl := range slots {
		if keep[name] {
			continue
		}
		if sl.running {
			sl.gone = true
		} else {
			heap.Remove(queue, sl.index)
			delete(slots, name)
		}
	}
}

// nextInterval is the interval with its jitter.
func (s *Scheduler) nextInterval() time.Duration {
	d := s.opts.Interval
	if j := s.opts.Jitter; j > 0 {
		d += time.Duration((rand.Float64()*2 - 1) * j * float64(d))
	}
	return max(d, time.Millisecond)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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

// RunOnce probes every target once, up to MaxConcurrent at a time,
// ignoring the per-host limits and the budget, and records the outcomes. A round cancelled by ctx records
// nothing for the checks it cut short: shutting down is not an outage.
func (s *Scheduler) RunOnce(ctx context.Context) {
	targets := s.Targets()
	if s.opts.Targets != nil {
		if got, err := s.opts.Targets(); err == nil && validTargets(got) == nil {
			targets = got
		}
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, s.opts.MaxConcurrent)
	for _, t := range targets {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			s.probe(ctx, t)
		})
	}
	wg.Wait()
}

func (s *Scheduler) probe(ctx context.Context, t Target) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	start := time.Now()
	obs := runCheck(cctx, t)
	took := time.Since(start)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if obs.Class == "" {
		obs.Class = Classify(obs.Err)
	}
	probeResults.WithLabelValues(t.Path, string(obs.Class)).Inc()
	at := s.opts.Now().UTC()
	msg := ""
	if obs.Err != nil {
		msg = obs.Err.Error()
	}
	var cur kv.ProbeResult // as committed: the last run of the function
	prev, _, err := s.db.UpdateProbe(t.Name, at, func(prev kv.ProbeResult, day *kv.ProbeDay) (kv.ProbeResult, []kv.Change) {
		cur = s.next(t, prev, day, at, obs, msg, took)
		if t.Events == nil {
			return cur, nil
		}
		return cur, t.Events(prev, cur)
	})
	if err != nil {
		s.logger.Error("record probe", "target", t.Name, "err", err)
		return
	}
	state := cur.State
	if prev.State == "" || prev.State == state {
		return
	}
	ch := Change{Target: t, At: at, Up: state == StateUp, Error: msg}
	if ch.Up {
		s.logger.Info("probe target up", "target", t.Name, "down_since", prev.Since)
	} else {
		s.logger.Warn("probe target down", "target", t.Name, "class", obs.Class, "err", msg)
	}
	if s.opts.OnChange != nil {
		s.opts.OnChange(ch)
	}
}

// next counts a probe into day and returns the target's new last result:
// the debounced state, consecutive failures, and the last tool list seen.
func (s *Scheduler) next(t Target, prev kv.ProbeResult, day *kv.ProbeDay, at time.Time, obs Observation, msg string, took time.Duration) kv.ProbeResult {
	answered := obs.Class.Answered()
	day.Total++
	if day.Classes == nil {
		day.Classes = map[string]int64{}
	}
	day.Classes[string(obs.Class)]++
	cur := prev
	cur.At, cur.OK, cur.Class, cur.Error, cur.LatencyMs = at, answered, string(obs.Class), msg, 0
	cur.Group, cur.Path = t.Group, t.Path
	if answered {
		day.Successes++
		// Latency is kept for answers only: a timeout's is the timeout.
		b := latencyBucket(took)
		if len(day.Latency) <= b {
			day.Latency = append(day.Latency, make([]int64, b+1-len(day.Latency))...)
		}
		day.Latency[b]++
		cur.LatencyMs = took.Milliseconds()
		cur.Fails = 0
		cur.State = StateUp
	} else {
		cur.Fails = prev.Fails + 1
		if cur.Fails >= s.opts.DownAfter {
			cur.State = StateDown
		}
	}
	if prev.At.IsZero() || prev.State != cur.State {
		cur.Since = at
	}
	if prev.State == StateUp && cur.State == StateDown {
		day.Downs++
	}
	switch {
	case len(obs.Pay) > 0:
		cur.PayTerms, cur.PayAt = obs.Pay, at
	case obs.Pay != nil || answered:
		// It answered without payment terms: what it stated before no
		// longer holds. A failed probe says nothing, and keeps them.
		cur.PayTerms, cur.PayAt = nil, time.Time{}
	}
	if obs.Tools != nil {
		if prev.SchemaHash != "" && prev.SchemaHash != obs.SchemaHash {
			cur.ToolsChangedAt = at
		}
		n := *obs.Tools
		cur.Tools, cur.SchemaHash, cur.ToolHashes = &n, obs.SchemaHash, obs.ToolHashes
	}
	return cur
}

// runCheck runs the target's check and turns a panic into a failed probe:
// one broken check must not stop the schedule.
func runCheck(ctx context.Context, t Target) (obs Observation) {
	defer func() {
		if r := recover(); r != nil {
			obs = Observation{Class: ClassProtocolError, Err: fmt.Errorf("check panicked: %v", r)}
		}
	}()
	if t.Observe != nil {
		return t.Observe(ctx)
	}
	err := t.Check(ctx)
	if err != nil && ctx.Err() != nil {
		return Observation{Class: ClassTimeout, Err: err}
	}
	return Observation{Err: err}
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
	sum, err := Summarize(s.db, t.Name, s.opts.Window, s.opts.Now())
	if err != nil {
		return Availability{}, err
	}
	a := Availability{Target: t.Name, Group: t.Group, Path: t.Path,
		Probes: sum.Probes, Successes: sum.Successes, LowerBound: sum.LowerBound, Withheld: sum.Withheld, WindowDays: s.opts.Window}
	if sum.Last != nil {
		a.Last = &LastProbe{At: sum.Last.At, OK: sum.Last.OK, Error: sum.Last.Error, Since: sum.Last.Since}
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
