package probe_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/kv/kvtest"
	"github.com/ardx-dev/ardx/probe"
)

func TestWilsonLowerBound(t *testing.T) {
	tests := []struct {
		name             string
		successes, total int64
		want             float64
		wantOK           bool
	}{
		{"no probes", 0, 0, 0, false},
		{"four of four is too few", 4, 4, 0, false},
		{"five of five", 5, 5, 0.5655085, true},
		{"none of five", 0, 5, 0, true},
		{"four of five", 4, 5, 0.3755283, true},
		{"nine of ten", 9, 10, 0.5958436, true},
		{"95 of 100", 95, 100, 0.8882480, true},
		{"1000 of 1000", 1000, 1000, 0.9961731, true},
		{"more successes than probes", 6, 5, 0, false},
		{"negative", -1, 5, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := probe.WilsonLowerBound(tc.successes, tc.total)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("WilsonLowerBound(%d, %d) = %v, %v; want %v, %v", tc.successes, tc.total, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// FuzzWilsonLowerBound checks the bound's invariants on any counts: within
// [0, 1] and never above the observed ratio.
func FuzzWilsonLowerBound(f *testing.F) {
	f.Add(int64(5), int64(5))
	f.Add(int64(0), int64(1<<40))
	f.Fuzz(func(t *testing.T, s, n int64) {
		lb, ok := probe.WilsonLowerBound(s, n)
		if !ok {
			return
		}
		if lb < 0 || lb > 1 || math.IsNaN(lb) {
			t.Fatalf("bound %v out of [0,1] for %d/%d", lb, s, n)
		}
		if p := float64(s) / float64(n); lb > p+1e-12 {
			t.Fatalf("bound %v above ratio %v for %d/%d", lb, p, s, n)
		}
	})
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestSchedulerCountsWithholdsAndReportsChanges(t *testing.T) {
	db := kvtest.Open(t)
	clk := &clock{now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	var failing atomic.Bool
	var changes []probe.Change
	targets := []probe.Target{
		{Name: "net/rpc", Group: "net", Path: probe.PathRPC, Check: func(context.Context) error {
			if failing.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
		{Name: "net/settle", Group: "net", Path: probe.PathSettle, Check: func(context.Context) error { panic("broken check") }},
		{Name: "other/rpc", Group: "other", Path: probe.PathRPC, Check: func(context.Context) error { return nil }},
	}
	s, err := probe.New(db, targets, probe.Options{Now: clk.Now, Window: 2, OnChange: func(c probe.Change) { changes = append(changes, c) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 4 {
		s.RunOnce(ctx)
		clk.Add(time.Minute)
	}
	report, err := s.Group("net")
	if err != nil {
		t.Fatal(err)
	}
	if len(report) != 2 || report[0].Path != probe.PathRPC || report[1].Path != probe.PathSettle {
		t.Fatalf("group report = %+v", report)
	}
	if a := report[0]; a.LowerBound != nil || a.Probes != 4 || a.Withheld == "" {
		t.Fatalf("under five probes the bound must be withheld: %+v", a)
	}
	// The panicking check counts as a failure, not a crash.
	if a := report[1]; a.Successes != 0 || a.Probes != 4 || a.Last == nil || a.Last.OK {
		t.Fatalf("panicking check: %+v", a)
	}

	failing.Store(true)
	s.RunOnce(ctx)
	clk.Add(time.Minute)
	failing.Store(false)
	s.RunOnce(ctx)

	if len(changes) != 2 || changes[0].Up || changes[0].Error != "connection refused" || !changes[1].Up || changes[0].Target.Name != "net/rpc" {
		t.Fatalf("changes = %+v", changes)
	}
	report, _ = s.Group("net")
	a := report[0]
	want, _ := probe.WilsonLowerBound(5, 6)
	if a.LowerBound == nil || *a.LowerBound != want || a.Probes != 6 || a.Successes != 5 || a.Withheld != "" {
		t.Fatalf("after six probes: %+v, want bound %v", a, want)
	}

	// The window slides: two days later the old counts no longer count.
	clk.Add(48 * time.Hour)
	report, _ = s.Group("net")
	if report[0].Probes != 0 || report[0].LowerBound != nil || report[0].Last == nil {
		t.Fatalf("outside the window: %+v", report[0])
	}
}

func TestSchedulerStartAndClose(t *testing.T) {
	db := kvtest.Open(t)
	var n atomic.Int64
	s, err := probe.New(db, []probe.Target{{Name: "t", Check: func(context.Context) error { n.Add(1); return nil }}},
		probe.Options{Interval: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() < 3 {
		t.Fatalf("only %d probes ran", n.Load())
	}
	after := n.Load()
	time.Sleep(30 * time.Millisecond)
	if n.Load() != after {
		t.Fatal("probes ran after Close")
	}
}

func TestNewRejectsBadTargets(t *testing.T) {
	db := kvtest.Open(t)
	ok := func(context.Context) error { return nil }
	tests := []struct {
		name    string
		targets []probe.Target
	}{
		{"no name", []probe.Target{{Check: ok}}},
		{"no check", []probe.Target{{Name: "a"}}},
		{"duplicate", []probe.Target{{Name: "a", Check: ok}, {Name: "a", Check: ok}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := probe.New(db, tc.targets, probe.Options{}); err == nil {
				t.Fatal("New accepted bad targets")
			}
		})
	}
}

// unavailable wraps a network that reports it cannot settle.
type unavailable struct{ probe.Settler }

func (unavailable) Available() (bool, string) { return false, "signer out of gas" }

// otherAsset points the settle check at an address with no code.
type otherAsset struct{ probe.Settler }

func (otherAsset) Asset() string { return "0x000000000000000000000000000000000000dEaD" }

func TestChecksAgainstDevChain(t *testing.T) {
	dc, err := evm.NewDevChain(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name    string
		check   func(context.Context) error
		wantErr bool
	}{
		{"rpc answers the dev chain id", probe.RPCCheck(dc.Client, dc.ChainID), false},
		{"rpc on the wrong chain", probe.RPCCheck(dc.Client, big.NewInt(8453)), true},
		{"settle path works", probe.SettleCheck(dc.Network, dc.Client), false},
		{"network unavailable", probe.SettleCheck(unavailable{dc.Network}, dc.Client), true},
		{"asset without code", probe.SettleCheck(otherAsset{dc.Network}, dc.Client), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(ctx)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}
