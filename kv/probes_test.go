package kv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

func TestProbeCountsWindowAndLast(t *testing.T) {
	db := kvtest.Open(t)
	day := func(d int, h int) time.Time { return time.Date(2025, 3, d, h, 0, 0, 0, time.UTC) }
	records := []struct {
		target string
		at     time.Time
		ok     bool
		err    string
	}{
		{"eip155:1/rpc", day(1, 1), true, ""},
		{"eip155:1/rpc", day(1, 2), false, "timeout"},
		{"eip155:1/rpc", day(2, 1), true, ""},
		{"eip155:1/rpc", day(3, 1), true, ""},
		{"eip155:1/rpc", day(3, 5), true, ""},
		// A target whose name extends another must not leak into it.
		{"eip155:1/rpc2", day(2, 1), false, "boom"},
	}
	for _, r := range records {
		if _, err := db.RecordProbe(r.target, r.at, r.ok, r.err); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name         string
		since, until time.Time
		want         kv.ProbeCounts
	}{
		{"all days", day(1, 0), day(3, 0), kv.ProbeCounts{Successes: 4, Total: 5}},
		{"from day 2", day(2, 23), day(3, 0), kv.ProbeCounts{Successes: 3, Total: 3}},
		{"day 1 only", day(1, 0), day(1, 0), kv.ProbeCounts{Successes: 1, Total: 2}},
		{"before any", day(1, 0).AddDate(0, -1, 0), day(1, 0).AddDate(0, 0, -1), kv.ProbeCounts{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := db.ProbeWindow("eip155:1/rpc", tc.since, tc.until)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	_, last, err := db.ProbeWindow("eip155:1/rpc", day(1, 0), day(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	// OK since day 2 01:00: the failure on day 1 ended the previous run.
	if !last.OK || !last.At.Equal(day(3, 5)) || !last.Since.Equal(day(2, 1)) {
		t.Fatalf("last = %+v", last)
	}
	_, last, _ = db.ProbeWindow("eip155:1/rpc2", day(1, 0), day(3, 0))
	if last.OK || last.Error != "boom" {
		t.Fatalf("last of rpc2 = %+v", last)
	}
	_, last, _ = db.ProbeWindow("never", day(1, 0), day(3, 0))
	if !last.At.IsZero() {
		t.Fatalf("never-probed target has a last result: %+v", last)
	}
}

func TestRecordProbeReturnsPrevious(t *testing.T) {
	db := kvtest.Open(t)
	at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	prev, err := db.RecordProbe("x", at, true, "")
	if err != nil || !prev.At.IsZero() {
		t.Fatalf("first record: prev %+v err %v", prev, err)
	}
	prev, err = db.RecordProbe("x", at.Add(time.Minute), false, "down")
	if err != nil || !prev.OK || !prev.At.Equal(at) {
		t.Fatalf("second record: prev %+v err %v", prev, err)
	}
}

func TestRecordProbeRejectsBadTargets(t *testing.T) {
	db := kvtest.Open(t)
	for _, target := range []string{"", "a\x00b"} {
		if _, err := db.RecordProbe(target, time.Now(), true, ""); !errors.Is(err, kv.ErrBadProbeTarget) {
			t.Errorf("RecordProbe(%q) err = %v, want ErrBadProbeTarget", target, err)
		}
	}
}

func TestPruneProbes(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for d := range 10 {
		if _, err := db.RecordProbe("t", base.AddDate(0, 0, d), true, ""); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.PruneProbes(base.AddDate(0, 0, 7))
	if err != nil || n != 7 {
		t.Fatalf("pruned %d (err %v), want 7", n, err)
	}
	db.Close()
	// What remains survives a reopen, and the last result is kept.
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, last, err := db.ProbeWindow("t", base.AddDate(-1, 0, 0), base.AddDate(1, 0, 0))
	if err != nil || c.Total != 3 || last.At.IsZero() {
		t.Fatalf("after prune: %+v last %+v err %v", c, last, err)
	}
}

func TestUpdateProbeDaysTargetsEventsAndPrune(t *testing.T) {
	db := kvtest.Open(t)
	day := func(d int) time.Time { return time.Date(2025, 3, d, 12, 0, 0, 0, time.UTC) }
	count := func(ok bool, class string) func(kv.ProbeResult, *kv.ProbeDay) (kv.ProbeResult, []kv.Change) {
		return func(prev kv.ProbeResult, d *kv.ProbeDay) (kv.ProbeResult, []kv.Change) {
			d.Total++
			if d.Classes == nil {
				d.Classes = map[string]int64{}
			}
			d.Classes[class]++
			var evs []kv.Change
			if prev.OK && !ok {
				evs = append(evs, kv.Change{Kind: "endpoint.down", ID: "urn:air:a.test:x"})
			}
			return kv.ProbeResult{At: d.Day, OK: ok, Class: class}, evs
		}
	}
	steps := []struct {
		target string
		at     time.Time
		ok     bool
		class  string
	}{
		{"mcp https://a.test/mcp", day(1), true, "ok"},
		{"mcp https://a.test/mcp", day(2), false, "timeout"},
		{"mcp https://b.test/mcp", day(2), true, "ok"},
		{"url https://c.test/", day(3), true, "ok"},
	}
	for _, s := range steps {
		if _, _, err := db.UpdateProbe(s.target, s.at, count(s.ok, s.class)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	err := db.ForEachProbeTarget("mcp ", day(1), day(3), func(target string, days []kv.ProbeDay, last kv.ProbeResult) bool {
		seen = append(seen, target)
		if target == "mcp https://a.test/mcp" && (len(days) != 2 || days[1].Classes["timeout"] != 1 || !days[1].Day.Equal(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)) || last.OK) {
			t.Errorf("a.test: days %+v last %+v", days, last)
		}
		return true
	})
	if err != nil || len(seen) != 2 {
		t.Fatalf("targets %v, err %v; want the two mcp targets", seen, err)
	}
	evs, err := db.Changes(0, 0)
	if err != nil || len(evs) != 1 || evs[0].Kind != "endpoint.down" || evs[0].Publisher != "a.test" {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if seq, err := db.ChangeSeqBefore(time.Now().Add(time.Hour)); err != nil || seq != evs[0].Seq {
		t.Fatalf("seq before now: %d, %v", seq, err)
	}
	// Pruning before day 3 drops day records and the last results of
	// targets not probed since.
	if _, err := db.PruneProbes(day(3)); err != nil {
		t.Fatal(err)
	}
	seen = nil
	_ = db.ForEachProbeTarget("", day(1), day(3), func(target string, days []kv.ProbeDay, _ kv.ProbeResult) bool {
		seen = append(seen, target)
		return true
	})
	if len(seen) != 1 || seen[0] != "url https://c.test/" {
		t.Fatalf("after prune: %v", seen)
	}
}
