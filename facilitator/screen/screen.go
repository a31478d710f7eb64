// Package screen owns sanctions screening for the facilitator: a list of
// sanctioned EVM addresses loaded from a file the operator keeps current
// (for instance OFAC's digital-currency addresses as published by
// 0xB10C/ofac-sanctioned-digital-currency-addresses), reloaded when the
// file changes, and consulted before any chain call of a settlement.
//
// Two file formats are read: a JSON array of address strings, or text with
// one address per line, blank lines and '#' comments. EVM addresses are
// compared case-insensitively; entries for other chains and malformed
// addresses are skipped and counted, never fatal. Replace the file by
// renaming a complete new one over it: a reload that catches a half-written
// JSON file fails and keeps the previous list, but a half-written text file
// cannot be told from a short one.
package screen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PollInterval is how often an open List checks its file for changes.
const PollInterval = 5 * time.Second

// maxFileBytes bounds what a list file may make us read: the real list is a
// few kilobytes, so anything near this is a wrong file.
const maxFileBytes = 32 << 20

// State describes the list in force, for /status.json and for recording
// which list a screening decision used.
type State struct {
	Size        int       // distinct EVM addresses listed
	Ignored     int       // entries that are not EVM addresses (other chains, malformed)
	LoadedAt    time.Time // when the list in force was read
	FileModTime time.Time // modification time of the file it was read from
	Source      string    // the file's path
	SHA256      string    // hex SHA-256 of the file's content: the list's version
	LastError   string    // why the last reload failed; empty after a good one
}

// List is a set of sanctioned addresses. Lookups are lock-free; reloads
// swap the whole set at once. A nil or empty List lists nothing.
type List struct {
	path   string
	logger *slog.Logger

	snap    atomic.Pointer[snapshot]
	lastErr atomic.Pointer[string]

	reloadMu  sync.Mutex // one reload at a time
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type snapshot struct {
	set   map[[20]byte]struct{}
	state State // LastError unused here
	size  int64 // file size, with state.FileModTime the change check
}

// Open reads the list at path and starts watching the file: every
// PollInterval its modification time and size are compared, and a changed
// file is read again. A reload that fails keeps the previous list and is
// logged and reported in State. Close stops the watching.
func Open(path string, logger *slog.Logger) (*List, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &List{path: path, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	snap, err := load(path)
	if err != nil {
		return nil, err
	}
	l.snap.Store(snap)
	l.logger.Info("sanctions list loaded", "source", path, "addresses", snap.state.Size,
		"ignored", snap.state.Ignored, "sha256", snap.state.SHA256)
	go l.watch()
	return l, nil
}

// FromAddresses returns a fixed List of addrs that never reloads, for tests
// and for callers that obtain the list some other way. Entries that are not
// EVM addresses are counted as ignored.
func FromAddresses(source string, addrs ...string) *List {
	set := make(map[[20]byte]struct{}, len(addrs))
	ignored := 0
	for _, a := range addrs {
		if k, ok := parseEVM(a); ok {
			set[k] = struct{}{}
		} else {
			ignored++
		}
	}
	l := &List{path: source}
	l.snap.Store(&snapshot{set: set, state: State{Size: len(set), Ignored: ignored, LoadedAt: time.Now().UTC(), Source: source}})
	return l
}

// Listed reports whether addr, a 0x-prefixed EVM address in any letter
// case, is on the list. Anything that is not an EVM address is not listed.
func (l *List) Listed(addr string) bool {
	if l == nil {
		return false
	}
	s := l.snap.Load()
	if s == nil || len(s.set) == 0 {
		return false
	}
	k, ok := parseEVM(addr)
	if !ok {
		return false
	}
	_, hit := s.set[k]
	return hit
}

// State returns the state of the list in force and of the last reload.
func (l *List) State() State {
	if l == nil {
		return State{}
	}
	var st State
	if s := l.snap.Load(); s != nil {
		st = s.state
	}
	if e := l.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

// Reload reads the file again if its modification time or size changed,
// as the watcher does every PollInterval; call it to pick up a change at
// once (on SIGHUP, say). On failure the previous list stays in force.
func (l *List) Reload() error {
	if l == nil || l.stop == nil {
		return nil // a fixed list has no file
	}
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	cur := l.snap.Load()
	fi, err := os.Stat(l.path)
	if err == nil && cur != nil && fi.ModTime().Equal(cur.state.FileModTime) && fi.Size() == cur.size {
		return nil
	}
	var snap *snapshot
	if err == nil {
		snap, err = load(l.path)
	}
	if err != nil {
		msg := err.Error()
		if prev := l.lastErr.Swap(&msg); prev == nil || *prev != msg {
			// Log a failure once, not every poll while it lasts.
			l.logger.Warn("sanctions list reload failed; keeping the previous list", "source", l.path, "err", err,
				"addresses", cur.state.Size)
		}
		return err
	}
	l.snap.Store(snap)
	l.lastErr.Store(nil)
	l.logger.Info("sanctions list reloaded", "source", l.path, "addresses", snap.state.Size,
		"previous", cur.state.Size, "ignored", snap.state.Ignored, "sha256", snap.state.SHA256)
	return nil
}

// Close stops watching the file. The list stays usable.
func (l *List) Close() error {
	if l == nil || l.stop == nil {
		return nil
	}
	l.closeOnce.Do(func() { close(l.stop) })
	<-l.done
	return nil
}

func (l *List) watch() {
	defer close(l.done)
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			_ = l.Reload() // logged inside
		}
	}
}

// load reads and parses the file at path; the modification time and size
// come from the open file, so they describe the bytes read.
func load(path string) (*snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sanctions list: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sanctions list: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("sanctions list %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("sanctions list %s: larger than %d bytes", path, maxFileBytes)
	}
	set, ignored, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("sanctions list %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return &snapshot{
		set:  set,
		size: fi.Size(),
		state: State{
			Size:        len(set),
			Ignored:     ignored,
			LoadedAt:    time.Now().UTC(),
			FileModTime: fi.ModTime().UTC(),
			Source:      path,
			SHA256:      hex.EncodeToString(sum[:]),
		},
	}, nil
}

var errEmpty = errors.New("the file is empty; a list with no entries is written as [] or as comments only")

// parse reads a JSON array of strings or one address per line.
func parse(data []byte) (set map[[20]byte]struct{}, ignored int, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	trimmed := bytes.TrimSpace(data)
	set = make(map[[20]byte]struct{})
	add := func(entry string) {
		if k, ok := parseEVM(entry); ok {
			set[k] = struct{}{}
		} else {
			ignored++
		}
	}
	switch {
	case len(trimmed) == 0:
		// An empty file is far likelier a failed download or a truncating
		// write in progress than a deliberate empty list.
		return nil, 0, errEmpty
	case trimmed[0] == '[':
		var entries []string
		if err := json.Unmarshal(trimmed, &entries); err != nil {
			return nil, 0, fmt.Errorf("not a JSON array of address strings: %w", err)
		}
		for _, e := range entries {
			add(e)
		}
	case trimmed[0] == '{':
		return nil, 0, errors.New("a JSON object is not a list; want a JSON array of address strings or one address per line")
	default:
		for line := range strings.Lines(string(trimmed)) {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			// An annotated line ("0xabc… Tornado Cash") lists its first field.
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			add(fields[0])
		}
	}
	return set, ignored, nil
}

// parseEVM reads "0x" and 40 hex digits in any case, surrounding space
// allowed, without allocating: Listed is on the settlement path.
func parseEVM(s string) (k [20]byte, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) != 42 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return k, false
	}
	for i := range 20 {
		hi, ok1 := hexNibble(s[2+2*i])
		lo, ok2 := hexNibble(s[3+2*i])
		if !ok1 || !ok2 {
			return k, false
		}
		k[i] = hi<<4 | lo
	}
	return k, true
}

func hexNibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
