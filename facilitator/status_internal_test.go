package facilitator

import (
	"testing"

	"github.com/ardx-dev/ardx/probe"
)

// TestFormatObserved: the status page says what the Wilson bound means,
// rounded down so "at least" stays true.
func TestFormatObserved(t *testing.T) {
	bound := func(ok, n int64) *float64 {
		lb, _ := probe.WilsonLowerBound(ok, n)
		return &lb
	}
	cases := []struct {
		p    PathAvailability
		want string
	}{
		{PathAvailability{Successes: 10, Probes: 10, LowerBound: bound(10, 10)}, "at least 72% with 95% confidence, 10 of 10 ok"},
		{PathAvailability{Successes: 95, Probes: 100, LowerBound: bound(95, 100)}, "at least 88% with 95% confidence, 95 of 100 ok"},
		{PathAvailability{Successes: 5000, Probes: 5000, LowerBound: bound(5000, 5000)}, "at least 99.9% with 95% confidence, 5000 of 5000 ok"},
		{PathAvailability{Successes: 3, Probes: 3}, "withheld, 3 of 3 ok"},
	}
	for _, c := range cases {
		if got := formatObserved(c.p); got != c.want {
			t.Errorf("formatObserved(%d/%d) = %q, want %q", c.p.Successes, c.p.Probes, got, c.want)
		}
	}
}
