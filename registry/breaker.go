package registry

import (
	"context"
	"sync"
	"time"
)

// Every upstream registry (configured, public, discovered) sits behind a
// circuit breaker, so one that is down costs nothing: the search that finds
// it failing opens its breaker, later searches skip it, and a background
// trial (never a caller's search) closes it again once it answers. Public
// registries start open, closed by their first trial, so a machine with no
// network answers even its first federated search in local time.

// Kinds of upstream, as reported per response.
const (
	kindConfigured = "configured"
	kindPublic     = "public"
	kindDiscovered = "discovered"
)

const (
	// minBreakerBackoff is the wait after a first failure before a trial;
	// each failed trial doubles it up to maxBreakerBackoff.
	minBreakerBackoff = 30 * time.Second
	maxBreakerBackoff = 10 * time.Minute
	// trialTimeout bounds a background trial; nobody waits for it.
	trialTimeout = 5 * time.Second
)

// breakers holds one breaker per upstream base URL and the background
// trials they start.
type breakers struct {
	now    func() time.Time
	mu     sync.Mutex
	m      map[string]*breaker
	ctx    context.Context // cancelled by close: trials stop at once
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (bs *breakers) init(now func() time.Time) {
	bs.now = now
	bs.m = map[string]*breaker{}
	bs.ctx, bs.cancel = context.WithCancel(context.Background())
}

// get returns the breaker of base, closed when new.
func (bs *breakers) get(base string) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[base]
	if b == nil {
		b = &breaker{}
		bs.m[base] = b
	}
	return b
}

// close stops every trial and waits for them.
func (bs *breakers) close() {
	bs.cancel()
	bs.wg.Wait()
}

// breaker is one upstream's circuit: closed (asked) or open (skipped until
// a background trial succeeds).
type breaker struct {
	mu      sync.Mutex
	open    bool
	until   time.Time // while open: when the next trial may start
	backoff time.Duration
	trying  bool   // a trial is under way
	reason  string // why it is open, for the response's report
}

// startOpen opens a breaker that has never been tried: its first trial is
// due at once.
func (b *breaker) startOpen() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.reason = true, "not reached yet; a background check is under way"
}

// admit says whether a search may ask the upstream at now. When it may not,
// trial says a background trial is due and now claimed by the caller, and
// reason says why the upstream is skipped.
func (b *breaker) admit(now time.Time) (ask, trial bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true, false, ""
	}
	if !b.trying && !now.Before(b.until) {
		b.trying = true
		trial = true
	}
	return false, trial, b.reason
}

// success closes the breaker.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.trying, b.backoff, b.reason = false, false, 0, ""
}

// failure opens the breaker (or keeps it open) with a longer wait before
// the next trial.
func (b *breaker) failure(now time.Time, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.backoff == 0:
		b.backoff = minBreakerBackoff
	case b.open:
		b.backoff = min(2*b.backoff, maxBreakerBackoff)
	}
	b.open, b.trying = true, false
	b.until = now.Add(b.backoff)
	b.reason = "failed recently (" + why + "); skipped until a background check reaches it"
}

// DefaultPublicRegistries are the public ARD registries federation=auto
// asks unless the operator names others (or none): every registry we know
// that answers ARD POST /search without a key. Sources: Hugging Face
// Discover's README and launch post, GitHub Agent Finder's documentation,
// Neuronto's published API (see docs/decisions.md).
var DefaultPublicRegistries = []string{
	"https://huggingface-hf-discover.hf.space",
	"https://agentfinder.github.com/api/v1",
	"https://neuronto.com",
}
