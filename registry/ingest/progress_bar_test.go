package ingest

import (
	"bytes"
	"strings"
	"testing"
)

// TestIngestBarMovesWithinSource: the terminal bar of an ingest (here on a
// buffer) moves as a single source's entries are indexed, not only when
// the source ends. Unthrottled (every is zero), so every step is drawn.
func TestIngestBarMovesWithinSource(t *testing.T) {
	var buf bytes.Buffer
	prog := &progress{w: &buf, label: "ingest", total: 1, bySource: true, bar: newIngestBar(&buf, 1)}
	track := &runProgress{p: Progress{Sources: 1}, bar: prog}
	track.stored(6000, true)
	track.indexing(&indexWork{stored: 6000, added: make([]string, 6000)})
	track.indexed(2500)
	if got := prog.bar.State().CurrentNum; got != sourceSteps*2500/6000 {
		t.Fatalf("bar at %d after 2500 of 6000 entries", got)
	}
	if !strings.Contains(buf.String(), "ingest 0/1 sources, 2500/6000 entries") {
		t.Fatalf("bar output %q", buf.String())
	}
	track.indexed(2500)
	track.indexed(1000)
	track.finished()
	if got := prog.bar.State().CurrentNum; got != sourceSteps {
		t.Fatalf("bar at %d at the end", got)
	}
	for _, want := range []string{"2500/6000 entries  41%", "5000/6000 entries  83%"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("bar output lacks %q: %q", want, buf.String())
		}
	}
	prog.finish()
}
