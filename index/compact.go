package index

import (
	"context"
	"fmt"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
)

// Compaction.
//
// Bleve's tiered merging leaves an index of 100k entries in about ten
// segments, and a search pays for every dictionary look-up, term reader
// and posting list once per segment: the word pairs' look-ups (pairs.go),
// most of which find nothing, cost three times as much over eleven
// segments as over two (docs/decisions.md, issue 19). A registry is
// written in bursts (an ingest, a crawl, a rebuild at start) and read in
// between, so once writes have stopped for compactQuiet a disk index is
// merged into one segment in the background. Searches go on meanwhile on
// the segments they hold; the merged one takes over when it is ready.
// `ardx ingest` and `ardx reindex` compact before they exit. Merging
// rewrites the whole index (about 2 s of CPU at 100k entries), so after a
// trickle of small writes (payment probes flipping an entry every 30 s)
// it runs at most every compactGap.
const (
	compactQuiet = 10 * time.Second // no Put or Delete for this long
	compactCheck = 2 * time.Second
	compactGap   = 10 * time.Minute
	// compactMinSegments: fewer, and a merge is not worth its writes.
	compactMinSegments = 3
)

// Compact merges the index into one segment and waits for it; an index in
// memory is left as it is.
func (ix *Index) Compact(ctx context.Context) error {
	if !ix.onDisk {
		return nil
	}
	adv, err := ix.bleve.Advanced()
	if err != nil {
		return fmt.Errorf("index: compact: %w", err)
	}
	s, ok := adv.(*scorch.Scorch)
	if !ok {
		return nil
	}
	if err := s.ForceMerge(ctx, nil); err != nil {
		return fmt.Errorf("index: compact: %w", err)
	}
	return nil
}

// segments is how many segments the index's root holds now.
func (ix *Index) segments() int {
	m, _ := ix.bleve.StatsMap()["index"].(map[string]any)
	get := func(k string) uint64 { v, _ := m[k].(uint64); return v }
	return int(get("num_root_filesegments") + get("num_root_memorysegments"))
}

// compactWhenQuiet compacts the index once writes have stopped for quiet,
// once per quiet spell and at most every gap, looking every so often,
// until stop is closed.
func (ix *Index) compactWhenQuiet(quiet, every, gap time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	gen, since := ix.gen.Load(), time.Now()
	compacted := false // since the last write
	var last time.Time // the last compaction's start
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if g := ix.gen.Load(); g != gen || ix.writing.Load() > 0 {
			gen, since, compacted = g, time.Now(), false
			continue
		}
		if compacted || time.Since(since) < quiet || (!last.IsZero() && time.Since(last) < gap) {
			continue
		}
		compacted = true
		before := ix.segments()
		if before < compactMinSegments {
			continue
		}
		start := time.Now()
		last = start
		err := ix.Compact(ctx)
		select {
		case <-stop:
			return // the index is closing: the merge was cut short
		default:
		}
		if err != nil {
			ix.log.Warn("index: compaction failed", "err", err)
			continue
		}
		ix.log.Info("index: compacted", "segments_before", before, "segments", ix.segments(), "took", time.Since(start).Round(time.Millisecond))
	}
}
