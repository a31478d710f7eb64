package probe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/probe"
)

// starts records when each check started and how many of one host ran at
// once.
type starts struct {
	mu       sync.Mutex
	at       map[string][]time.Time // target -> starts
	byHost   map[string][]time.Time
	inflight map[string]int
	maxAtOne map[string]int
}

func newStarts() *starts {
	return &starts{at: map[string][]time.Time{}, byHost: map[string][]time.Time{}, inflight: map[string]int{}, maxAtOne: map[string]int{}}
}

func (s *starts) check(name, host string, took time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		s.mu.Lock()
		now := time.Now()
		s.at[name] = append(s.at[name], now)
		s.byHost[host] = append(s.byHost[host], now)
		s.inflight[host]++
		s.maxAtOne[host] = max(s.maxAtOne[host], s.inflight[host])
		s.mu.Unlock()
		time.Sleep(took)
		s.mu.Lock()
		s.inflight[host]--
		s.mu.Unlock()
		return nil
	}
}

func TestSchedulePolitePerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := kvtest.Open(t)
		st := newStarts()
		var targets []probe.Target
		for h := range 3 {
			for i := range 4 {
				host := fmt.Sprintf("h%d.test", h)
				name := fmt.Sprintf("%s/%d", host, i)
				targets = append(targets, probe.Target{Name: name, Host: host, Check: st.check(name, host, 500*time.Millisecond)})
			}
		}
		s, err := probe.New(db, targets, probe.Options{Interval: time.Minute, Jitter: 0.1, Spread: true, HostGap: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(t.Context())
		time.Sleep(10*time.Minute + 30*time.Second)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for host, at := range st.byHost {
			if st.maxAtOne[host] != 1 {
				t.Errorf("%s: %d probes at once, want 1", host, st.maxAtOne[host])
			}
			slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
			for i := 1; i < len(at); i++ {
				if gap := at[i].Sub(at[i-1]); gap < 2*time.Second {
					t.Errorf("%s: two probes %v apart, want at least 2s", host, gap)
				}
			}
		}
		for name, at := range st.at {
			// Ten and a half minutes at one a minute ±10%, first within one.
			if len(at) < 9 || len(at) > 12 {
				t.Errorf("%s probed %d times in 10.5 minutes, want about 10", name, len(at))
			}
		}
		if len(st.at) != len(targets) {
			t.Errorf("%d targets probed, want %d", len(st.at), len(targets))
		}
	})
}

func TestScheduleBudgetPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := kvtest.Open(t)
		st := newStarts()
		var targets []probe.Target
		for i := range 100 {
			name := fmt.Sprintf("t%d", i)
			targets = append(targets, probe.Target{Name: name, Host: name, Check: st.check(name, name, 0)})
		}
		s, err := probe.New(db, targets, probe.Options{Interval: time.Minute, Budget: 30})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(t.Context())
		time.Sleep(3 * time.Minute)
		s.Close(context.Background())
		n := 0
		for _, at := range st.at {
			n += len(at)
		}
		// 30 a minute, plus the burst of one second's worth.
		if n < 85 || n > 91 {
			t.Fatalf("%d probes in 3 minutes with a budget of 30 a minute", n)
		}
	})
}

func TestScheduleDebounceEventsAndTargetChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := kvtest.Open(t)
		var mu sync.Mutex
		fail := false
		flaky := func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return errors.New("refused")
			}
			return nil
		}
		events := func(prev, cur kv.ProbeResult) []kv.Change {
			if prev.State != "" && prev.State != cur.State {
				return []kv.Change{{Time: cur.At, Kind: "endpoint." + cur.State, ID: "urn:air:a.test:x"}}
			}
			return nil
		}
		var listMu sync.Mutex
		list := []probe.Target{{Name: "a", Host: "a.test", Check: flaky, Events: events}}
		var changes []probe.Change
		s, err := probe.New(db, nil, probe.Options{Interval: time.Minute, DownAfter: 3, Refresh: time.Minute,
			Targets: func() ([]probe.Target, error) {
				listMu.Lock()
				defer listMu.Unlock()
				return slices.Clone(list), nil
			},
			OnChange: func(c probe.Change) { mu.Lock(); changes = append(changes, c); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(t.Context())
		time.Sleep(90 * time.Second) // probes at 0 and 60 s: up
		mu.Lock()
		fail = true
		mu.Unlock()
		time.Sleep(2 * time.Minute) // 120, 180 s: two failures, not down yet
		synctest.Wait()
		mu.Lock()
		if len(changes) != 0 {
			t.Fatalf("changes after two failures: %+v", changes)
		}
		mu.Unlock()
		time.Sleep(time.Minute) // 240 s: the third: down
		synctest.Wait()
		mu.Lock()
		fail = false
		mu.Unlock()
		listMu.Lock()
		var bN atomic.Int64
		list = append(list, probe.Target{Name: "b", Check: func(context.Context) error { bN.Add(1); return nil }})
		listMu.Unlock()
		time.Sleep(time.Minute) // 300 s: up again; b appears
		synctest.Wait()
		s.Close(context.Background())
		mu.Lock()
		defer mu.Unlock()
		if len(changes) != 2 || changes[0].Up || !changes[1].Up {
			t.Fatalf("changes: %+v, want down then up", changes)
		}
		got, err := db.Changes(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Kind != "endpoint.down" || got[1].Kind != "endpoint.up" {
			t.Fatalf("feed events: %+v", got)
		}
		if bN.Load() == 0 {
			t.Fatal("a target added to the list was never probed")
		}
		sum, err := probe.Summarize(db, "a", 30, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Probes != 6 || sum.Successes != 3 || sum.Downs != 1 || sum.Outcomes["protocol_error"] != 3 {
			t.Fatalf("summary: %+v", sum)
		}
	})
}
