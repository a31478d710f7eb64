package ingest

import (
	"fmt"
	"io"
	"os"
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
}

// minBarSteps keeps tiny runs from flashing a bar.
const minBarSteps = 2

func newProgress(w io.Writer, total int, label string) *progress {
	p := &progress{w: w, label: label, total: total}
	if w == nil {
		return p
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && total >= minBarSteps {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("it"),
			progressbar.OptionShowIts(),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// step records one finished source.
func (p *progress) step(r SourceReport) {
	p.done++
	switch {
	case p.bar != nil:
		_ = p.bar.Add(1)
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
