package registry

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/report"
)

// The demand log must not slow a search down, so a search only enqueues its
// record; one goroutine commits whatever has queued up in a single fsynced
// bbolt transaction. A commit costs two fsyncs whatever its size, so
// commits are at least demandCommitGap apart and the next group fills
// meanwhile: committing each few records as they came cost the searches
// themselves. The writer sleeps out the gap; a flush or a stop waits at
// most that long. 25 ms: at 5 ms the commits (200 a second under load,
// an fdatasync each) were 6% of the server's CPU; a crash loses the
// records of the last gap either way, and they are counts for reports,
// not money.
//
// The publisher reports' rollups are counted from the log behind it, not in
// the commits searches wait on the cheapest of: every rollupEvery, or
// sooner once rollupBacklog records wait, the writer hands the records
// appended since the last count to report.Rollup (kv.RollupSearches), up
// to rollupChunk per transaction. A rollup costs dozens of keys per
// search; counted in batches, the keys that repeat (an entry's day, a
// domain's day) are written once per batch, and the appends stay small.
// Records appended but not yet counted are listed in the store, so after
// a crash the next start counts them: the rollups never diverge from the
// log, they trail it by at most rollupEvery (and the pacing below). Every
// 5 s rather than every second: a batch of 4,096 costs about 56 µs of CPU
// a search against 77 at 1,000 (BenchmarkRollup, unique texts), and
// reports count days. A flush or a stop counts everything.
//
// A batch of 4,096 is a quarter of a second of CPU, and run flat out it
// took one of a small server's two cores from the searches in bursts (the
// 8-client loadgen's p99 was 17-19 ms with the rollups, 13-15 without
// them). So the counting, which kv.RollupSearches does before it takes the
// write lock, is paced (pacer): it takes about rollupDuty of the time it
// runs, sleeping between slices of work, unless it must hurry: the queue
// of searches to append is half full, the records to count pile up, or a
// flush or stop waits. The writing of the counts and the commit, under
// the write lock, are not paced.
//
// The writer also keeps the log bounded: search records older than the retention
// (90 days unless configured, the longest window /stats shows) are deleted
// at start and every hour, in bounded transactions, with the searches
// queued meanwhile committed between them. The daily aggregates stay.

const (
	demandQueueLen  = 8192
	maxDemandGroup  = 512
	demandCommitGap = 25 * time.Millisecond

	defaultDemandRetention = 90 * 24 * time.Hour
	demandPruneEvery       = time.Hour
	demandPruneChunk       = 10000

	rollupEvery   = 5 * time.Second
	rollupBacklog = 8192
	rollupChunk   = 4096
	rollupDuty    = 0.25
	rollupSlice   = 500 * time.Microsecond
)

type demandWriter struct {
	db        *kv.DB
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	queue     chan kv.SearchRecord
	flushes   chan chan struct{}
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	closed    atomic.Bool
	// dropped counts records lost to a full queue or a failed commit; a
	// search is never made to wait for the log.
	dropped atomic.Int64
	// urgent counts the flushes and stops waiting: a paced rollup then
	// runs flat out.
	urgent atomic.Int32
	// rollupsPruned is the day report rollups were last pruned.
	rollupsPruned report.Day
	// toRollup counts the records appended since the last rollup.
	toRollup int
}

func newDemandWriter(db *kv.DB, log *slog.Logger, now func() time.Time, retention time.Duration) *demandWriter {
	if retention <= 0 {
		retention = defaultDemandRetention
	}
	d := &demandWriter{
		db:        db,
		log:       log,
		now:       now,
		retention: retention,
		queue:     make(chan kv.SearchRecord, demandQueueLen),
		flushes:   make(chan chan struct{}),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go d.run()
	return d
}

// record enqueues rec without blocking.
func (d *demandWriter) record(rec kv.SearchRecord) {
	if d.closed.Load() {
		return
	}
	select {
	case d.queue <- rec:
	default:
		demandDropsTotal.Inc()
		if n := d.dropped.Add(1); n&(n-1) == 0 { // log at 1, 2, 4, 8... drops
			d.log.Warn("demand log queue full; search not recorded", "dropped_total", n)
		}
	}
}

func (d *demandWriter) run() {
	defer close(d.done)
	group := make([]kv.SearchRecord, 0, maxDemandGroup)
	// Pruning counts first what a crash left appended but not counted.
	d.prune(group)
	tick := time.NewTicker(demandPruneEvery)
	defer tick.Stop()
	roll := time.NewTicker(rollupEvery)
	defer roll.Stop()
	var last time.Time // of the last commit
	for {
		select {
		case <-tick.C:
			d.prune(group)
		case <-roll.C:
			if d.toRollup > 0 {
				d.rollupAll(group, true)
			}
		case rec := <-d.queue:
			if wait := time.Until(last.Add(demandCommitGap)); wait > 0 {
				time.Sleep(wait)
			}
			group = append(group[:0], rec)
			group = d.drain(group, maxDemandGroup)
			d.commit(group)
			last = time.Now()
			if d.toRollup >= rollupBacklog {
				d.rollupAll(group, true)
				roll.Reset(rollupEvery)
			}
		case ack := <-d.flushes:
			d.commitAll(group)
			d.rollupAll(group, false)
			close(ack)
		case <-d.stop:
			d.commitAll(group)
			d.rollupAll(group, false)
			return
		}
	}
}

// rollupAll counts every record appended and not yet rolled up into the
// report rollups, a chunk per transaction, committing the searches queued
// meanwhile between chunks; paced, each chunk's counting is spread out.
func (d *demandWriter) rollupAll(group []kv.SearchRecord, paced bool) {
	var pace func()
	if paced {
		pace = newPacer(rollupDuty, rollupSlice, d.hurry).pace
	}
	for {
		n, err := d.db.RollupSearches(rollupChunk, report.Rollup, pace)
		if err != nil {
			// The records stay listed; the next rollup tries again.
			d.log.Error("report rollup failed; retried at the next one", "err", err)
			return
		}
		if n < rollupChunk {
			d.toRollup = 0
			return
		}
		d.toRollup = max(d.toRollup-n, 0)
		if group = d.drain(group[:0], maxDemandGroup); len(group) > 0 {
			d.commit(group)
		}
	}
}

// hurry reports whether a paced rollup should run flat out: a flush or a
// stop waits for it, searches queue up behind it (it runs on the goroutine
// that appends them), or the records to count pile up faster than it
// counts them.
func (d *demandWriter) hurry() bool {
	return d.urgent.Load() > 0 || len(d.queue) > demandQueueLen/2 || d.toRollup > 2*rollupBacklog
}

// pacer spreads work out over time: called often as the work goes, it
// sleeps after each slice of work so that the work takes about duty of
// the time, unless hurry says not to. Work is measured in wall time, so
// work that waits for a processor counts as work and yields more.
type pacer struct {
	duty  float64
	slice time.Duration
	hurry func() bool
	now   func() time.Time
	sleep func(time.Duration)
	start time.Time // of the current slice
	calls int
}

func newPacer(duty float64, slice time.Duration, hurry func() bool) *pacer {
	return &pacer{duty: duty, slice: slice, hurry: hurry, now: time.Now, sleep: time.Sleep}
}

func (p *pacer) pace() {
	if p.calls++; p.calls&15 != 1 { // the clock every 16 calls
		return
	}
	now := p.now()
	if p.start.IsZero() {
		p.start = now
		return
	}
	worked := now.Sub(p.start)
	if worked < p.slice {
		return
	}
	if !p.hurry() {
		// A long stretch between calls (the write between two chunks)
		// is not paid back: a pause is at most what four slices earn.
		worked = min(worked, 4*p.slice)
		p.sleep(time.Duration(float64(worked) * (1 - p.duty) / p.duty))
		now = p.now()
	}
	p.start = now
}

// drain adds queued records to group without waiting, up to limit.
func (d *demandWriter) drain(group []kv.SearchRecord, limit int) []kv.SearchRecord {
	for len(group) < limit {
		select {
		case rec := <-d.queue:
			group = append(group, rec)
		default:
			return group
		}
	}
	return group
}

// commitAll commits everything queued, group by group.
func (d *demandWriter) commitAll(group []kv.SearchRecord) {
	for {
		group = d.drain(group[:0], maxDemandGroup)
		if len(group) == 0 {
			return
		}
		d.commit(group)
	}
}

func (d *demandWriter) commit(group []kv.SearchRecord) {
	d.toRollup += len(group)
	if err := d.db.AppendSearches(group); err != nil {
		d.dropped.Add(int64(len(group)))
		demandDropsTotal.Add(float64(len(group)))
		d.log.Error("demand log commit failed; searches not recorded", "records", len(group), "err", err)
	}
}

// prune deletes the records older than the retention, a chunk per
// transaction, committing the searches queued meanwhile between chunks.
func (d *demandWriter) prune(group []kv.SearchRecord) {
	// Records are counted before any can be pruned uncounted, and the
	// report blocks that ended are built (within the hour after a UTC day).
	d.rollupAll(group, false)
	d.compact(group)
	cutoff := d.now().Add(-d.retention)
	total := 0
	for {
		n, err := d.db.PruneSearches(cutoff, demandPruneChunk)
		if err != nil {
			d.log.Error("demand log pruning failed", "err", err)
			return
		}
		total += n
		if n < demandPruneChunk {
			break
		}
		if group = d.drain(group[:0], maxDemandGroup); len(group) > 0 {
			d.commit(group)
		}
	}
	if total > 0 {
		d.log.Info("demand log pruned", "records", total, "before", cutoff)
	}
	d.pruneRollups(group)
}

// compact builds the report rollups' blocks that are complete, one per
// transaction, committing the searches queued meanwhile between them.
func (d *demandWriter) compact(group []kv.SearchRecord) {
	for {
		n, err := report.Compact(d.db, d.now(), 1)
		if err != nil {
			d.log.Error("report rollup blocks: build failed; retried within the hour", "err", err)
			return
		}
		if n == 0 {
			return
		}
		if group = d.drain(group[:0], maxDemandGroup); len(group) > 0 {
			d.commit(group)
		}
	}
}

// pruneRollups deletes report rollups past their retention (400 days, not
// the log's), once a UTC day: finding them reads the whole bucket.
func (d *demandWriter) pruneRollups(group []kv.SearchRecord) {
	today := report.DayOf(d.now())
	if d.rollupsPruned == today {
		return
	}
	for {
		n, err := report.Prune(d.db, d.now(), demandPruneChunk)
		if err != nil {
			d.log.Error("report rollup pruning failed", "err", err)
			return
		}
		if n < demandPruneChunk {
			break
		}
		if group = d.drain(group[:0], maxDemandGroup); len(group) > 0 {
			d.commit(group)
		}
	}
	d.rollupsPruned = today
}

func (d *demandWriter) flush(ctx context.Context) error {
	d.urgent.Add(1)
	defer d.urgent.Add(-1)
	ack := make(chan struct{})
	select {
	case d.flushes <- ack:
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *demandWriter) close(ctx context.Context) error {
	d.once.Do(func() {
		d.closed.Store(true)
		d.urgent.Add(1) // for good: nothing is paced after a stop
		close(d.stop)
	})
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
