package kv

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit shares one fsynced commit among the writers that arrive while
// another commit is under way. Unlike bbolt's Batch it never waits on a
// timer: a lone writer commits at once, and under load each fsync carries
// every write queued behind the previous one.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupWrite
	running bool
}

type groupWrite struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// group runs fn in a read-write transaction, possibly shared with other
// writers, and returns once that transaction is committed. fn may run more
// than once (alone, when another writer's function failed the shared
// transaction), so it must compute everything from the transaction it is
// given.
func (db *DB) group(fn func(*bolt.Tx) error) error {
	w := &groupWrite{fn: fn, done: make(chan error, 1)}
	g := &db.writes
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if lead {
		db.commitQueued()
	}
	return <-w.done
}

// commitQueued commits the queued writes as one transaction. If more queued
// up meanwhile, a new leader goroutine takes them, so this caller returns
// with its own write committed rather than serving others indefinitely.
func (db *DB) commitQueued() {
	g := &db.writes
	g.mu.Lock()
	ws := g.queue
	g.queue = nil
	g.mu.Unlock()

	failed := false
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for _, w := range ws {
			if err := w.fn(tx); err != nil {
				failed = true
				return err
			}
		}
		return nil
	})
	switch {
	case failed && len(ws) > 1:
		// One write's failure undid them all: give each its own answer.
		for _, w := range ws {
			w.done <- db.bolt.Update(w.fn)
		}
	default:
		for _, w := range ws {
			w.done <- err
		}
	}

	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go db.commitQueued()
}
