package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Well-known manifest paths: v0.91's ard.json first, then the v0.9
// predecessor that ARD lets consumers consult as an equivalent source.
const (
	WellKnownARD       = "/.well-known/ard.json"
	WellKnownAICatalog = "/.well-known/ai-catalog.json"
)

// manifestAccept is the Accept header of manifest fetches.
const manifestAccept = "application/json, application/ai-catalog+json;q=0.9, */*;q=0.1"

// DefaultMaxFileBytes caps a manifest read from a file or an fs.FS; URL
// fetches are capped by the Fetcher's MaxBytes.
const DefaultMaxFileBytes = 32 << 20

// indexBatch is how many docs go to the index per Put during Reindex (bleve
// advises batches of 100-1000).
const indexBatch = 500

// Ingester reads manifests from sources and keeps kv and the index in step
// with them. Its zero value is not usable: DB is required.
type Ingester struct {
	DB *kv.DB
	// Index is updated after every source's kv commit; nil leaves the index
	// alone (Reindex can catch up later).
	Index *index.Index
	// Fetcher performs every outbound fetch; nil makes URL and domain
	// sources fail with a source error.
	Fetcher *web.Fetcher
	// Logger receives one line per source; nil discards.
	Logger *slog.Logger
	// Progress, when set, receives progress: a bar when it is a terminal
	// (it moves within a large source as its entries are indexed), one
	// plain line per source otherwise.
	Progress io.Writer
	// OnProgress, when set, is told how far an Ingest or IngestFS run has
	// got: at its start, when a source is stored, after each index batch and when a
	// source is finished; never per entry. Calls do not overlap and hold up
	// the run while they last.
	OnProgress func(Progress)
	// Now is the clock; nil means time.Now. It is called from concurrent
	// loads, so it must be safe for concurrent use.
	Now func() time.Time
	// MaxFileBytes caps a manifest file; zero means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Concurrency is how many sources are read or fetched at once (stores
	// stay in source order, so a later source's claim on an identifier
	// always wins), and how many domains Crawl works on at once; zero
	// means 4.
	Concurrency int
	// CrawlDelay is the pause between two requests of a crawl to one host
	// (requests to one host never overlap); zero means DefaultCrawlDelay, a
	// negative value means no pause.
	CrawlDelay time.Duration
	// Decorate, when set, completes each doc before it is indexed with what
	// the running registry knows beside the entry (the payment terms its
	// probes saw: registry.Service.DecorateDoc). Safe for concurrent use.
	Decorate func(*index.Doc)

	crawlerOnce sync.Once
	crawler     *politeClient
	domainLocks sync.Map // domain -> *sync.Mutex: one crawl of a domain at a time
}

// Progress is how far an ingest run has got. An entry is done once it is
// stored and, when it was added or changed and there is an index, indexed.
type Progress struct {
	Sources     int // sources in the run
	SourcesDone int // sources finished: stored and indexed, or failed
	Entries     int // valid entries of the sources stored so far
	EntriesDone int // of Entries, those done
}

// Report is what an ingest did, source by source.
type Report struct {
	Sources  []SourceReport `json:"sources"`
	Duration time.Duration  `json:"duration"`
}

// SourceReport is the outcome for one source (one replace-by-source key).
type SourceReport struct {
	Source    string    `json:"source"`              // the replace-by-source key
	Documents []string  `json:"documents,omitempty"` // manifests read: paths or final URLs
	Stored    int       `json:"stored"`              // valid entries now held for the source
	Added     int       `json:"added"`
	Changed   int       `json:"changed"`
	Removed   int       `json:"removed"`
	Rejected  []Problem `json:"rejected,omitempty"` // entries skipped, with the reason
	Warnings  []Problem `json:"warnings,omitempty"` // kept, but worth fixing
	// Error is set when the source could not be read or stored at all; its
	// previously stored entries are then left untouched.
	Error string `json:"error,omitempty"`
}

// Rejected returns how many entries were rejected over all sources.
func (r *Report) Rejected() int {
	n := 0
	for _, s := range r.Sources {
		n += len(s.Rejected)
	}
	return n
}

// Stored returns how many valid entries the ingested sources now hold.
func (r *Report) Stored() int {
	n := 0
	for _, s := range r.Sources {
		n += s.Stored
	}
	return n
}

// Errors returns the sources that failed as a whole.
func (r *Report) Errors() []SourceReport {
	var out []SourceReport
	for _, s := range r.Sources {
		if s.Error != "" {
			out = append(out, s)
		}
	}
	return out
}

// maxPrintedRejections keeps a summary readable for a badly broken source.
const maxPrintedRejections = 20

// Print writes a human summary: totals, then each source with its counts,
// its rejections and its error.
func (r *Report) Print(w io.Writer) {
	var added, changed, removed, warnings int
	for _, s := range r.Sources {
		added, changed, removed, warnings = added+s.Added, changed+s.Changed, removed+s.Removed, warnings+len(s.Warnings)
	}
	fmt.Fprintf(w, "ingested %d source(s) in %s: %d stored (%d added, %d changed, %d removed), %d rejected, %d warning(s), %d source error(s)\n",
		len(r.Sources), r.Duration.Round(time.Millisecond), r.Stored(), added, changed, removed, r.Rejected(), warnings, len(r.Errors()))
	for _, s := range r.Sources {
		if s.Error != "" {
			fmt.Fprintf(w, "  %s: error: %s\n", s.Source, s.Error)
			continue
		}
		fmt.Fprintf(w, "  %s: %d stored (+%d ~%d -%d), %d rejected, %d warning(s)\n",
			s.Source, s.Stored, s.Added, s.Changed, s.Removed, len(s.Rejected), len(s.Warnings))
		for i, p := range s.Rejected {
			if i == maxPrintedRejections {
				fmt.Fprintf(w, "    ... and %d more rejected\n", len(s.Rejected)-i)
				break
			}
			fmt.Fprintf(w, "    rejected %s\n", p.location())
		}
		for i, p := range s.Warnings {
			if i == maxPrintedRejections {
				fmt.Fprintf(w, "    ... and %d more warnings\n", len(s.Warnings)-i)
				break
			}
			fmt.Fprintf(w, "    warning %s\n", p.location())
		}
	}
}

func (p Problem) location() string {
	s := p.Pointer
	if s == "" {
		s = "(document)"
	}
	if p.Document != "" {
		s = p.Document + "#" + s
	}
	if p.Identifier != "" {
		s += " " + p.Identifier
	}
	return s + ": " + p.Message
}

// unit is one replace-by-source key and how to read it.
type unit struct {
	key    string
	file   string // a file path
	fsys   fs.FS  // with fsPath: a file of an fs.FS
	fsPath string
	url    string    // an http(s) URL
	domain string    // a bare domain: well-known paths
	pre    *document // a manifest already fetched (by discovery)
}

// loaded is a unit after reading and parsing, before storing.
type loaded struct {
	report  SourceReport
	entries []kv.Entry
	keep    []string // documents that failed to load: keep their stored entries
	err     error    // the unit failed as a whole
}

// Ingest reads every source (file, directory, http(s) URL or bare domain),
// validates each manifest and stores each source's valid entries with
// replace-by-source semantics, then updates the index. Source failures are
// reported in the Report; the error is for a cancelled context or a store
// that failed.
func (in *Ingester) Ingest(ctx context.Context, sources ...string) (*Report, error) {
	var units []unit
	var pre []SourceReport // sources that failed before reading
	for _, s := range sources {
		us, err := in.expand(s)
		if err != nil {
			pre = append(pre, SourceReport{Source: s, Error: err.Error()})
			continue
		}
		units = append(units, us...)
	}
	rep, err := in.run(ctx, units)
	if rep != nil {
		rep.Sources = append(pre, rep.Sources...)
	}
	return rep, err
}

// IngestFS ingests every *.json file under root in fsys (recursively), each
// file as its own source keyed "fs:<path>". main uses it for the embedded
// default corpus.
func (in *Ingester) IngestFS(ctx context.Context, fsys fs.FS, root string) (*Report, error) {
	var units []unit
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(path.Ext(p), ".json") {
			units = append(units, unit{key: "fs:" + p, fsys: fsys, fsPath: p})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: walk %s: %w", root, err)
	}
	return in.run(ctx, units)
}

// expand turns one command-line source into units. An existing path wins
// over a bare domain of the same spelling.
func (in *Ingester) expand(s string) ([]unit, error) {
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		if msg := checkHTTPURL(s); msg != "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return []unit{{key: s, url: s}}, nil
	}
	if st, err := os.Stat(s); err == nil {
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return []unit{{key: abs, file: abs}}, nil
		}
		var units []unit
		err = filepath.WalkDir(abs, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".json") {
				units = append(units, unit{key: p, file: p})
			}
			return nil
		})
		return units, err
	}
	if d := strings.TrimSuffix(lower, "."); !strings.HasSuffix(d, ".json") && !strings.ContainsAny(d, "/\\ :") && checkPublisher(d) == "" {
		// Keyed by the v0.91 path whichever path answers, so switching
		// between them does not strand entries under two keys.
		return []unit{{key: "https://" + d + WellKnownARD, domain: d}}, nil
	}
	if strings.HasSuffix(lower, ".json") {
		return nil, fmt.Errorf("no such file")
	}
	return nil, fmt.Errorf("not a file, directory, http(s) URL or domain")
}

func (in *Ingester) now() time.Time {
	if in.Now != nil {
		return in.Now().UTC()
	}
	return time.Now().UTC()
}

func (in *Ingester) logger() *slog.Logger {
	if in.Logger != nil {
		return in.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// run loads units concurrently and stores them in order.
func (in *Ingester) run(ctx context.Context, units []unit) (*Report, error) {
	if in.DB == nil {
		return nil, errors.New("ingest: no DB")
	}
	start := time.Now()
	rep := &Report{Sources: make([]SourceReport, 0, len(units))}
	prog := newIngestProgress(in.Progress, len(units))
	defer prog.finish()
	track := &runProgress{p: Progress{Sources: len(units)}, fn: in.OnProgress, bar: prog}
	track.emit() // the bar shows while the first source is read

	workers := in.Concurrency
	if workers <= 0 {
		workers = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]chan loaded, len(units))
	for i := range results {
		results[i] = make(chan loaded, 1)
	}
	// A slot is freed only when the writer has consumed a result, which
	// bounds how many loaded manifests wait in memory.
	slots := make(chan struct{}, workers)
	go func() {
		for i, u := range units {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() { results[i] <- in.load(ctx, u) }()
		}
	}()
	log := in.logger()
	// The index follows kv one unit behind, on its own goroutine: unit i
	// is indexed while unit i+1 commits to kv. Units are indexed in the
	// order they were stored, and every stored unit is indexed before run
	// returns, cancelled or not.
	type indexJob struct {
		unit int
		w    *indexWork
	}
	indexQ := make(chan indexJob, 1)
	indexErrs := make([]error, len(units))
	indexed := make(chan struct{})
	go func() {
		defer close(indexed)
		for j := range indexQ {
			track.indexing(j.w)
			indexErrs[j.unit] = j.w.apply(in, track.indexed)
			track.finished()
		}
	}()
	defer func() {
		close(indexQ)
		<-indexed
		for i, err := range indexErrs {
			if err != nil && i < len(rep.Sources) {
				rep.Sources[i].Error = indexFailed(err).Error()
				log.Error("index update failed; run reindex", "source", units[i].key, "err", err)
			}
		}
		rep.Duration = time.Since(start)
	}()
	for i, u := range units {
		var l loaded
		select {
		case l = <-results[i]:
		case <-ctx.Done():
			return rep, ctx.Err()
		}
		<-slots
		if err := ctx.Err(); err != nil {
			// A result may be ready at the same moment as the cancellation;
			// nothing is stored after cancel.
			return rep, err
		}
		if l.err == nil {
			w, err := in.storeKV(u.key, &l)
			if err != nil {
				rep.Sources = append(rep.Sources, l.report)
				return rep, err
			}
			track.stored(l.report.Stored, w != nil)
			if w != nil {
				indexQ <- indexJob{unit: i, w: w}
			}
		}
		if l.err != nil {
			l.report.Error = l.err.Error()
			track.failed()
			log.Warn("ingest source failed", "source", u.key, "err", l.err)
			sourcesTotal.WithLabelValues(outcomeLabel(true)).Inc()
		} else {
			sourcesTotal.WithLabelValues(outcomeLabel(false)).Inc()
			countEntries(l.report.Added, l.report.Changed, l.report.Removed, len(l.report.Rejected))
			log.Info("ingested source", "source", u.key, "stored", l.report.Stored, "added", l.report.Added,
				"changed", l.report.Changed, "removed", l.report.Removed, "rejected", len(l.report.Rejected))
			for _, p := range l.report.Rejected {
				log.Debug("rejected entry", "source", u.key, "at", p.location())
			}
		}
		rep.Sources = append(rep.Sources, l.report)
		prog.step(l.report)
	}
	return rep, nil
}

// store commits a loaded unit to kv and brings the index in step.
func (in *Ingester) store(key string, l *loaded) error {
	w, err := in.storeKV(key, l)
	if err != nil || w == nil {
		return err
	}
	if err := w.apply(in, nil); err != nil {
		l.err = indexFailed(err)
	}
	return nil
}

func indexFailed(err error) error {
	return fmt.Errorf("stored, but the index update failed (run reindex): %w", err)
}

// indexWork is the index update a unit's kv commit calls for.
type indexWork struct {
	docs                    <-chan builtDocs
	added, changed, removed []string
	now                     time.Time
	stored                  int // entries the unit holds: the unchanged are done when stored
}

type builtDocs struct {
	docs map[string]index.Doc
	err  error
}

// apply brings the index in step; batchDone, when set, is told the size of
// each committed batch of puts.
func (w *indexWork) apply(in *Ingester, batchDone func(n int)) error {
	b := <-w.docs
	if b.err != nil {
		return b.err
	}
	return in.indexChanges(b.docs, w.added, w.changed, w.removed, w.now, batchDone)
}

// storeKV commits a loaded unit to kv and returns the index update it calls
// for (nil without an index).
func (in *Ingester) storeKV(key string, l *loaded) (*indexWork, error) {
	entries := l.entries
	if len(l.keep) > 0 {
		// A nested document that failed this time keeps what it gave last
		// time, rather than a transient error removing its entries.
		old, err := in.DB.EntriesBySource(key)
		if err != nil {
			return nil, err
		}
		have := make(map[string]bool, len(entries))
		for _, e := range entries {
			have[e.ID] = true
		}
		failed := make(map[string]bool, len(l.keep))
		for _, d := range l.keep {
			failed[d] = true
		}
		for _, e := range old {
			if failed[e.Provenance.Source] && !have[e.ID] {
				entries = append(entries, e)
			}
		}
	}
	now := in.now()
	// Docs depend on the body alone (timestamps aside), so they are built
	// while kv commits: on two cores that hides most of the conversion.
	docsDone := make(chan builtDocs, 1)
	if in.Index != nil {
		go func() {
			docs := make(map[string]index.Doc, len(entries))
			for _, e := range entries {
				d, err := ToDoc(e)
				if err != nil {
					docsDone <- builtDocs{err: err}
					return
				}
				if in.Decorate != nil {
					in.Decorate(&d)
				}
				docs[e.ID] = d
			}
			docsDone <- builtDocs{docs: docs}
		}()
	}
	changes, err := in.DB.ReplaceSource(key, entries, now)
	if err != nil {
		if in.Index != nil {
			<-docsDone
		}
		return nil, err
	}
	l.report.Stored = len(entries)
	w := &indexWork{docs: docsDone, now: now, stored: len(entries)}
	for _, c := range changes {
		switch c.Kind {
		case kv.ChangeAdded:
			l.report.Added++
			w.added = append(w.added, c.ID)
		case kv.ChangeChanged:
			l.report.Changed++
			w.changed = append(w.changed, c.ID)
		case kv.ChangeRemoved:
			l.report.Removed++
			w.removed = append(w.removed, c.ID)
		}
	}
	if in.Index == nil {
		return nil, nil
	}
	return w, nil
}

// indexChanges puts added and changed docs and deletes removed ones. Added
// entries were created now; a changed entry keeps its CreatedAt, read back
// from kv.
func (in *Ingester) indexChanges(docs map[string]index.Doc, added, changed, removed []string, now time.Time, batchDone func(n int)) error {
	put := make([]index.Doc, 0, len(added)+len(changed))
	for _, id := range added {
		d := docs[id]
		d.CreatedAt, d.UpdatedAt = now, now
		put = append(put, d)
	}
	if len(changed) > 0 {
		stored, err := in.DB.GetEntries(changed)
		if err != nil {
			return err
		}
		for _, id := range changed {
			d := docs[id]
			d.CreatedAt, d.UpdatedAt = stored[id].CreatedAt, now
			put = append(put, d)
		}
	}
	if len(put) > 0 {
		if err := in.Index.PutReporting(put, batchDone); err != nil {
			return err
		}
	}
	if len(removed) > 0 {
		return in.Index.Delete(removed)
	}
	return nil
}

// Reindex re-puts every entry of kv into the index in batches and returns how
// many it indexed. Docs the index holds that kv no longer has are not found
// by it: rebuild into an empty index for that.
func (in *Ingester) Reindex(ctx context.Context) (int, error) {
	if in.DB == nil || in.Index == nil {
		return 0, errors.New("ingest: reindex needs DB and Index")
	}
	total, err := in.DB.CountEntries()
	if err != nil {
		return 0, err
	}
	prog := newProgress(in.Progress, total, "reindex")
	defer prog.finish()
	batch := make([]index.Doc, 0, indexBatch)
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := in.Index.Put(batch); err != nil {
			return fmt.Errorf("ingest: reindex: %w", err)
		}
		n += len(batch)
		prog.add(len(batch))
		batch = batch[:0]
		return nil
	}
	err = in.DB.ForEachEntry(func(e kv.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := ToDoc(e)
		if err != nil {
			in.logger().Warn("reindex: entry skipped", "id", e.ID, "err", err)
			return nil
		}
		if in.Decorate != nil {
			in.Decorate(&d)
		}
		batch = append(batch, d)
		if len(batch) == indexBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	in.logger().Info("reindexed", "entries", n, "err", err)
	return n, err
}

// document is one manifest body and where it came from.
type document struct {
	name      string   // path or final URL, for reports and provenance
	requested string   // the URL asked for, before redirects
	hosts     []string // hosts an entry's publisher must fall within; nil: no check
	prov      kv.Provenance
	body      []byte
	depth     int // nesting depth of this document
}

// load reads and parses a unit, following nested catalog URLs for web
// sources.
func (in *Ingester) load(ctx context.Context, u unit) loaded {
	l := loaded{report: SourceReport{Source: u.key}}
	var doc document
	var err error
	switch {
	case u.file != "":
		doc, err = in.readFile(u.file)
	case u.fsys != nil:
		doc, err = in.readFS(u.fsys, u.fsPath)
	case u.url != "":
		doc, err = in.fetch(ctx, u.url)
	case u.domain != "":
		doc, err = in.fetchDomain(ctx, u.domain, &l.report)
	case u.pre != nil:
		doc = *u.pre
	}
	if err != nil {
		l.err = err
		return l
	}
	web := u.url != "" || u.domain != "" || u.pre != nil
	seenIDs := map[string]bool{}
	visited := map[string]bool{doc.name: true}
	queue := []document{doc}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		l.report.Documents = append(l.report.Documents, d.name)
		m, problems := ParseManifest(d.body)
		for _, p := range problems {
			p.Document = d.name
			if p.Severity == SeverityError && (p.Pointer == "" || p.Pointer == "/entries") {
				if d.depth == 0 {
					// Not a manifest at all: nothing of the source changes.
					l.err = fmt.Errorf("%s: %s", d.name, p.Message)
					return l
				}
				// A nested document that is broken this time keeps what it
				// gave last time, like one that failed to load.
				l.keep = append(l.keep, d.name, d.requested)
				l.report.Rejected = append(l.report.Rejected, p)
				continue
			}
			if p.Severity == SeverityError {
				l.report.Rejected = append(l.report.Rejected, p)
			} else {
				l.report.Warnings = append(l.report.Warnings, p)
			}
		}
		for _, e := range m.Entries {
			if d.hosts != nil && !PublisherAllowed(e.Publisher, d.hosts...) {
				l.report.Rejected = append(l.report.Rejected, Problem{
					Document: d.name, Pointer: e.Pointer, Identifier: e.ID, Severity: SeverityError,
					Message: fmt.Sprintf("publisher %q is not the manifest host %s or a subdomain of it", e.Publisher, strings.Join(d.hosts, " / ")),
				})
				continue
			}
			if seenIDs[e.ID] {
				l.report.Rejected = append(l.report.Rejected, Problem{
					Document: d.name, Pointer: e.Pointer, Identifier: e.ID, Severity: SeverityError,
					Message: "duplicate identifier; an earlier document of this source already lists it",
				})
				continue
			}
			seenIDs[e.ID] = true
			l.entries = append(l.entries, kv.Entry{ID: e.ID, Body: e.Body, Provenance: d.prov})
		}
		for _, link := range m.Links {
			depth := d.depth + link.Depth
			if !web {
				l.report.Warnings = append(l.report.Warnings, Problem{Document: d.name, Pointer: link.Pointer, Severity: SeverityWarning,
					Message: "nested catalog given by url is followed only when ingesting from the web"})
				continue
			}
			if depth > MaxNestingDepth {
				l.report.Rejected = append(l.report.Rejected, Problem{Document: d.name, Pointer: link.Pointer, Severity: SeverityError,
					Message: fmt.Sprintf("nested catalog deeper than %d levels", MaxNestingDepth)})
				continue
			}
			if visited[link.URL] {
				continue
			}
			visited[link.URL] = true
			nd, err := in.fetch(ctx, link.URL)
			if err != nil {
				if ctx.Err() != nil {
					l.err = ctx.Err()
					return l
				}
				l.report.Rejected = append(l.report.Rejected, Problem{Document: d.name, Pointer: link.Pointer, Severity: SeverityError,
					Message: "nested catalog: " + err.Error() + " (its previously stored entries are kept)"})
				l.keep = append(l.keep, link.URL)
				continue
			}
			nd.depth = depth
			nd.requested = link.URL
			visited[nd.name] = true
			queue = append(queue, nd)
		}
	}
	return l
}

// PublisherAllowed is the anti-squatting rule for web sources: an entry's
// URN publisher must be one of the manifest's hosts or a subdomain of it.
func PublisherAllowed(publisher string, hosts ...string) bool {
	for _, h := range hosts {
		if domainWithin(publisher, h) {
			return true
		}
	}
	return false
}

func (in *Ingester) maxFileBytes() int64 {
	if in.MaxFileBytes > 0 {
		return in.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (in *Ingester) readFile(p string) (document, error) {
	f, err := os.Open(p)
	if err != nil {
		return document{}, err
	}
	defer f.Close()
	return in.readAll(f, p)
}

func (in *Ingester) readFS(fsys fs.FS, p string) (document, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return document{}, err
	}
	defer f.Close()
	return in.readAll(f, "fs:"+p)
}

func (in *Ingester) readAll(r io.Reader, name string) (document, error) {
	max := in.maxFileBytes()
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return document{}, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(body)) > max {
		return document{}, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	sum := sha256.Sum256(body)
	return document{
		name: name,
		body: body,
		prov: kv.Provenance{Source: name, FetchedAt: in.now(), SHA256: hex.EncodeToString(sum[:])},
	}, nil
}

// fetch GETs one manifest URL; anything but 200 is an error.
func (in *Ingester) fetch(ctx context.Context, rawURL string) (document, error) {
	res, err := in.get(ctx, rawURL)
	if err != nil {
		return document{}, err
	}
	if res.Status != http.StatusOK {
		return document{}, fmt.Errorf("GET %s: status %d", rawURL, res.Status)
	}
	return webDocument(rawURL, res), nil
}

func (in *Ingester) get(ctx context.Context, rawURL string) (*web.FetchResult, error) {
	if in.Fetcher == nil {
		return nil, errors.New("no outbound fetcher configured")
	}
	var c fetchClient = in.Fetcher
	if inCrawl(ctx) {
		// Nested catalogs of a crawled manifest are fetched as politely as
		// the rest of the crawl.
		c = in.crawlClient()
	}
	res, err := c.Get(ctx, rawURL, manifestAccept)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", rawURL, err)
	}
	return res, nil
}

// fetchDomain reads a domain's manifest from its well-known paths.
func (in *Ingester) fetchDomain(ctx context.Context, domain string, rep *SourceReport) (document, error) {
	if in.Fetcher == nil {
		return document{}, errors.New("no outbound fetcher configured")
	}
	res, requested, warn, err := FetchWellKnown(ctx, in.Fetcher, domain)
	if err != nil {
		return document{}, err
	}
	if warn != nil {
		rep.Warnings = append(rep.Warnings, *warn)
	}
	return webDocument(requested, res), nil
}

// FetchWellKnown fetches a domain's manifest: https://<domain>/.well-known/ard.json
// and, when that answers with a client error (4xx), the predecessor
// /.well-known/ai-catalog.json, which ARD lets consumers treat as
// equivalent. It returns the successful (200) fetch, the URL that was asked
// for, and a warning when the predecessor path answered.
func FetchWellKnown(ctx context.Context, f *web.Fetcher, domain string) (res *web.FetchResult, requested string, warn *Problem, err error) {
	first := "https://" + domain + WellKnownARD
	res, err = f.Get(ctx, first, manifestAccept)
	if err != nil {
		return nil, first, nil, fmt.Errorf("GET %s: %w", first, err)
	}
	if res.Status == http.StatusOK {
		return res, first, nil, nil
	}
	if res.Status < 400 || res.Status >= 500 {
		return nil, first, nil, fmt.Errorf("GET %s: status %d", first, res.Status)
	}
	second := "https://" + domain + WellKnownAICatalog
	res2, err := f.Get(ctx, second, manifestAccept)
	if err != nil {
		return nil, second, nil, fmt.Errorf("%s answered %d; GET %s: %w", first, res.Status, second, err)
	}
	if res2.Status != http.StatusOK {
		return nil, second, nil, fmt.Errorf("GET %s: status %d; GET %s: status %d", first, res.Status, second, res2.Status)
	}
	warn = &Problem{Document: second, Severity: SeverityWarning,
		Message: fmt.Sprintf("%s answered %d; read the predecessor path %s (publishers should move to ard.json)", first, res.Status, WellKnownAICatalog)}
	return res2, second, warn, nil
}

// webDocument accepts publishers of the requested host and of the final host
// after redirects: both the domain asked and the one that answered vouch for
// the content.
func webDocument(requested string, res *web.FetchResult) document {
	var hosts []string
	for _, s := range []string{requested, res.URL} {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			h := hostOnly(u.Hostname())
			if !contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	sort.Strings(hosts)
	if hosts == nil {
		hosts = []string{} // non-nil: every publisher is checked, and none matches
	}
	return document{
		name:  res.URL,
		hosts: hosts,
		body:  res.Body,
		prov:  kv.Provenance{Source: res.URL, FetchedAt: res.FetchedAt, HTTPStatus: res.Status, SHA256: res.SHA256},
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
