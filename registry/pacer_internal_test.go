package registry

import (
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestPacerKeepsToItsDuty: work paced at a quarter takes four times its
// length, in pauses after slices of work; in a hurry it is not paused.
func TestPacerKeepsToItsDuty(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hurry     bool
		wantSlept time.Duration
	}{
		{"paced", false, 3 * time.Second}, // 1 s of work at a quarter
		{"in a hurry", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
			var slept, longest time.Duration
			p := newPacer(0.25, 2*time.Millisecond, func() bool { return tc.hurry })
			p.now = func() time.Time { return clock }
			p.sleep = func(d time.Duration) {
				slept += d
				longest = max(longest, d)
				clock = clock.Add(d)
			}
			for range 100_000 { // 10 µs of work a call: 1 s
				p.pace()
				clock = clock.Add(10 * time.Microsecond)
			}
			// Up to the last slice's pause is still owed when the work ends.
			if slept < tc.wantSlept-10*time.Millisecond || slept > tc.wantSlept {
				t.Fatalf("slept %v over 1 s of work, want about %v", slept, tc.wantSlept)
			}
			if !tc.hurry && longest > 10*time.Millisecond {
				t.Fatalf("a pause of %v: the work should pause after each slice of about 2 ms", longest)
			}
		})
	}
}

// TestPacerDoesNotPayBackAGap: work unpaced between calls (the write
// between two chunks, a long wait) does not make the next pause long: the
// demand writer appends no searches while it sleeps.
func TestPacerDoesNotPayBackAGap(t *testing.T) {
	clock := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	var longest time.Duration
	p := newPacer(0.25, 500*time.Microsecond, func() bool { return false })
	p.now = func() time.Time { return clock }
	p.sleep = func(d time.Duration) { longest = max(longest, d); clock = clock.Add(d) }
	for i := range 10_000 {
		p.pace()
		clock = clock.Add(10 * time.Microsecond)
		if i == 5_000 {
			clock = clock.Add(300 * time.Millisecond)
		}
	}
	if longest > 6*time.Millisecond {
		t.Fatalf("a pause of %v after a gap; at most three times four slices", longest)
	}
}

// TestDemandWriterHurriesWhenItMust: a paced rollup runs flat out while a
// flush or stop waits, while searches queue up behind it, or while the
// records to count pile up; otherwise it paces.
func TestDemandWriterHurriesWhenItMust(t *testing.T) {
	fresh := func() *demandWriter { return &demandWriter{queue: make(chan kv.SearchRecord, demandQueueLen)} }
	if d := fresh(); d.hurry() {
		t.Fatal("an idle writer hurries")
	}
	d := fresh()
	d.urgent.Add(1)
	if !d.hurry() {
		t.Fatal("does not hurry while a flush waits")
	}
	d = fresh()
	for range demandQueueLen/2 + 1 {
		d.queue <- kv.SearchRecord{}
	}
	if !d.hurry() {
		t.Fatal("does not hurry with the queue half full")
	}
	d = fresh()
	d.toRollup = 2*rollupBacklog + 1
	if !d.hurry() {
		t.Fatal("does not hurry with the backlog piling up")
	}
}
