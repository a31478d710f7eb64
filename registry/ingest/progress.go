package ingest

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how far a long ingest or reindex has got: a bar on a
// terminal, plain lines otherwise, nothing without a writer.
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	label string
	done  int
	total int
	// bySource: the bar counts sourceSteps per source and is moved by
	// entries (an ingest run), not by step. It is drawn at most once per
	// every, the last time always.
	bySource bool
	every    time.Duration
	drawn    time.Time
}

// barEvery is how often a bar is redrawn at most.
const barEvery = 100 * time.Millisecond

// sourceSteps is how many steps of the bar one source of an ingest is
// worth, so that the bar moves within a large source.
const sourceSteps = 1000

// minBarSteps keeps tiny runs from flashing a bar.
const minBarSteps = 2

func newProgress(w io.Writer, total int, label string) *progress {
	p := &progress{w: w, label: label, total: total}
	if w == nil {
		return p
	}
	if isTerminal(w) && total >= minBarSteps {
		p.bar = newBar(w, total, label,
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("it"),
			progressbar.OptionShowIts())
	}
	return p
}

// newIngestProgress is the progress of an ingest run of n sources: its bar
// (shown even for one source, which may be large) is moved by entries.
func newIngestProgress(w io.Writer, n int) *progress {
	p := &progress{w: w, label: "ingest", total: n, bySource: true, every: barEvery}
	if isTerminal(w) && n > 0 {
		p.bar = newIngestBar(w, n)
	}
	return p
}

// newIngestBar is unthrottled: progress.entries throttles, so that the
// description and the position it sets are drawn together.
func newIngestBar(w io.Writer, sources int) *progressbar.ProgressBar {
	return newBar(w, sources*sourceSteps, "ingest", progressbar.OptionThrottle(0))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newBar(w io.Writer, total int, label string, opts ...progressbar.Option) *progressbar.ProgressBar {
	return progressbar.NewOptions(total, append([]progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionThrottle(barEvery),
		progressbar.OptionClearOnFinish(),
	}, opts...)...)
}

// step records one finished source.
func (p *progress) step(r SourceReport) {
	p.done++
	switch {
	case p.bar != nil:
		if !p.bySource {
			_ = p.bar.Add(1)
		}
	case p.w != nil:
		if r.Error != "" {
			fmt.Fprintf(p.w, "%s [%d/%d] %s: error: %s\n", p.label, p.done, p.total, r.Source, r.Error)
			return
		}
		fmt.Fprintf(p.w, "%s [%d/%d] %s: %d stored (+%d ~%d -%d), %d rejected\n",
			p.label, p.done, p.total, r.Source, r.Stored, r.Added, r.Changed, r.Removed, len(r.Rejected))
	}
}

// line records one finished item described by a ready-made line (a
// crawled domain).
func (p *progress) line(s string) {
	p.done++
	switch {
	case p.bar != nil:
		_ = p.bar.Add(1)
	case p.w != nil:
		fmt.Fprintf(p.w, "%s [%d/%d] %s\n", p.label, p.done, p.total, s)
	}
}

// add records n finished items (reindex).
func (p *progress) add(n int) {
	p.done += n
	switch {
	case p.bar != nil:
		_ = p.bar.Add(n)
	case p.w != nil:
		fmt.Fprintf(p.w, "%s %d/%d\n", p.label, p.done, p.total)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// entries moves an ingest bar: finished sources, plus the share of the
// source being indexed (cur entries, curDone of them done).
func (p *progress) entries(pr Progress, cur, curDone int) {
	if p.bar == nil || !p.bySource {
		return
	}
	now := time.Now()
	if now.Sub(p.drawn) < p.every && pr.SourcesDone < pr.Sources {
		return
	}
	p.drawn = now
	v := pr.SourcesDone * sourceSteps
	if cur > 0 {
		v += curDone * sourceSteps / cur
	}
	desc := fmt.Sprintf("ingest %d/%d sources, %d/%d entries", pr.SourcesDone, pr.Sources, pr.EntriesDone, pr.Entries)
	if pr.Entries == 0 {
		desc = fmt.Sprintf("ingest %d/%d sources, reading", pr.SourcesDone, pr.Sources)
	}
	p.bar.Describe(desc)
	_ = p.bar.Set(min(v, pr.Sources*sourceSteps))
}

// runProgress follows an ingest run for Ingester.OnProgress and the bar.
// The writer reports each source as it is stored or fails, the index
// goroutine each index batch: a lock per batch, never per entry.
type runProgress struct {
	mu           sync.Mutex
	p            Progress
	cur, curDone int // entries of the source being indexed; done of them
	fn           func(Progress)
	bar          *progress
}

func (r *runProgress) emit() {
	if r.fn != nil {
		r.fn(r.p)
	}
	r.bar.entries(r.p, r.cur, r.curDone)
}

// stored counts a source's n entries once kv holds them; a source without
// index work is then finished.
func (r *runProgress) stored(n int, indexing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p.Entries += n
	if !indexing {
		r.p.EntriesDone += n
		r.p.SourcesDone++
	}
	r.emit()
}

// failed counts a source that could not be read or stored.
func (r *runProgress) failed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p.SourcesDone++
	r.emit()
}

// indexing starts a source's index work: its unchanged entries are done.
func (r *runProgress) indexing(w *indexWork) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur, r.curDone = w.stored, max(w.stored-len(w.added)-len(w.changed), 0)
	r.p.EntriesDone += r.curDone
	if r.curDone > 0 {
		r.emit()
	}
}

// indexed counts n entries of the current source committed to the index.
func (r *runProgress) indexed(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(n, r.cur-r.curDone)
	r.curDone += n
	r.p.EntriesDone += n
	r.emit()
}

// finished ends the current source's index work, failed or not.
func (r *runProgress) finished() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p.EntriesDone += r.cur - r.curDone
	r.p.SourcesDone++
	r.cur, r.curDone = 0, 0
	r.emit()
}
