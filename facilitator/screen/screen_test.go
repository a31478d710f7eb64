package screen_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ardx-dev/ardx/facilitator/screen"
)

// Addresses from the published OFAC list (Tornado Cash and friends), as
// the list spells them: mixed-case EIP-55.
const (
	addrA = "0x8589427373D6D84E98730D7795D8f6f8731FDA16"
	addrB = "0x722122dF12D4e14e13Ac3b6895a86e84145b6967"
	addrC = "0xDD4c48C0B24039969fC16D1cdF626eaB821d3384"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// writeList writes content to path and moves its modification time to
// mtime, so a rewrite within the file system's time granularity still
// shows as a change.
func writeList(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t *testing.T, content string) (*screen.List, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sanctioned.txt")
	writeList(t, path, content, time.Now().Add(-time.Hour))
	l, err := screen.Open(path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, path
}

func TestOpenFormats(t *testing.T) {
	tests := []struct {
		name        string
		content     string
		listed      []string
		notListed   []string
		wantSize    int
		wantIgnored int
	}{
		{
			name:      "JSON array as published",
			content:   `["` + addrA + `","` + addrB + `"]`,
			listed:    []string{addrA, strings.ToLower(addrB)},
			notListed: []string{addrC},
			wantSize:  2,
		},
		{
			name: "JSON with other chains and a malformed entry",
			// The real list carries 0xa7e5…b00 next to its corrected form.
			content:     "[\n  \"" + addrA + "\",\n  \"0xa7e5d5a720f06526557c513402f2e6b5fa20b00\",\n  \"bc1qa5wkgaew2dkv56kfvj49j0av5nml45x9ek9hz6\",\n  \"TNa8vMtbTPNWQvFFLqVzB8fD5UPvnM3gUK\",\n  \"" + addrA + "\"\n]\n",
			listed:      []string{addrA},
			notListed:   []string{"0xa7e5d5a720f06526557c513402f2e6b5fa20b00", "bc1qa5wkgaew2dkv56kfvj49j0av5nml45x9ek9hz6"},
			wantSize:    1,
			wantIgnored: 3,
		},
		{
			name:     "empty JSON array",
			content:  "[]",
			wantSize: 0,
		},
		{
			name:      "text with comments, blank lines, CRLF and BOM",
			content:   "\ufeff# OFAC SDN digital currency addresses, ETH\r\n\r\n" + addrA + "\r\n  " + strings.ToUpper(addrB[2:]) + "\n0x" + strings.ToUpper(addrB[2:]) + "   # Tornado Cash router\n\n#" + addrC + "\n",
			listed:    []string{addrA, addrB},
			notListed: []string{addrC},
			// the bare 40 hex digits without 0x is not an address
			wantSize:    2,
			wantIgnored: 1,
		},
		{
			name:     "comments only",
			content:  "# nothing listed today\n",
			wantSize: 0,
		},
		{
			name:        "annotated lines list their first field",
			content:     addrA + " Tornado.Cash\n" + "1Q1pE5vPGEEMqRcVRMbtBK842Y6Pzo6nK9 BTC\n",
			listed:      []string{addrA},
			wantSize:    1,
			wantIgnored: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, path := mustOpen(t, tc.content)
			for _, a := range tc.listed {
				if !l.Listed(a) {
					t.Errorf("Listed(%s) = false", a)
				}
			}
			for _, a := range tc.notListed {
				if l.Listed(a) {
					t.Errorf("Listed(%s) = true", a)
				}
			}
			st := l.State()
			if st.Size != tc.wantSize || st.Ignored != tc.wantIgnored {
				t.Errorf("State size %d ignored %d, want %d and %d", st.Size, st.Ignored, tc.wantSize, tc.wantIgnored)
			}
			if st.Source != path || len(st.SHA256) != 64 || st.LoadedAt.IsZero() || st.FileModTime.IsZero() || st.LastError != "" {
				t.Errorf("State = %+v", st)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct{ name, content string }{
		{"empty file", ""},
		{"only whitespace", " \n\t\n"},
		{"JSON object", `{"addresses":["` + addrA + `"]}`},
		{"array of numbers", `[1,2,3]`},
		{"array of objects", `[{"wallet":"` + addrA + `"}]`},
		{"truncated JSON", `["` + addrA + `","0x72`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "list")
			writeList(t, path, tc.content, time.Now())
			if l, err := screen.Open(path, nil); err == nil {
				l.Close()
				t.Fatalf("Open accepted %q: %+v", tc.content, l.State())
			}
		})
	}
	if _, err := screen.Open(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Fatal("Open of a missing file succeeded")
	}
}

func TestListedInputs(t *testing.T) {
	l := screen.FromAddresses("test", addrA, "not-an-address")
	tests := []struct {
		addr string
		want bool
	}{
		{addrA, true},
		{strings.ToLower(addrA), true},
		{"0X" + strings.ToUpper(addrA[2:]), true},
		{"  " + addrA + "\n", true},
		{addrB, false},
		{addrA[2:], false},          // no 0x
		{addrA[:41], false},         // short
		{addrA + "0", false},        // long
		{"0xZZ" + addrA[4:], false}, // not hex
		{"", false},
		{"0x", false},
		{"not-an-address", false},
	}
	for _, tc := range tests {
		if got := l.Listed(tc.addr); got != tc.want {
			t.Errorf("Listed(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if st := l.State(); st.Size != 1 || st.Ignored != 1 || st.Source != "test" {
		t.Errorf("State = %+v", st)
	}
	if err := l.Reload(); err != nil {
		t.Errorf("Reload of a fixed list: %v", err)
	}
}

func TestNilAndEmptyListNothing(t *testing.T) {
	var nilList *screen.List
	empty := screen.FromAddresses("empty")
	for name, l := range map[string]*screen.List{"nil": nilList, "empty": empty} {
		if l.Listed(addrA) {
			t.Errorf("%s list lists %s", name, addrA)
		}
		if st := l.State(); st.Size != 0 {
			t.Errorf("%s: State = %+v", name, st)
		}
		if err := l.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
}

func TestReloadOnChange(t *testing.T) {
	l, path := mustOpen(t, addrA+"\n")
	before := l.State()

	// Unchanged file: nothing is read again.
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); !st.LoadedAt.Equal(before.LoadedAt) {
		t.Fatalf("unchanged file reloaded: %+v", st)
	}

	mtime := time.Now().Truncate(time.Second)
	writeList(t, path, `["`+addrB+`","`+addrC+`"]`, mtime)
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if l.Listed(addrA) || !l.Listed(addrB) || !l.Listed(addrC) {
		t.Fatal("reload did not replace the list")
	}
	st := l.State()
	if st.Size != 2 || st.SHA256 == before.SHA256 || !st.FileModTime.Equal(mtime) || st.LoadedAt.Before(before.LoadedAt) {
		t.Fatalf("State after reload = %+v (before %+v)", st, before)
	}
}

func TestBadReloadKeepsPreviousList(t *testing.T) {
	l, path := mustOpen(t, addrA+"\n"+addrB+"\n")
	good := l.State()
	bad := []struct {
		name  string
		write func()
	}{
		{"broken JSON", func() { writeList(t, path, `["`+addrC, time.Now()) }},
		{"emptied", func() { writeList(t, path, "", time.Now().Add(time.Second)) }},
		{"removed", func() { _ = os.Remove(path) }},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			b.write()
			if err := l.Reload(); err == nil {
				t.Fatal("Reload succeeded")
			}
			if !l.Listed(addrA) || !l.Listed(addrB) || l.Listed(addrC) {
				t.Fatal("a failed reload changed the list")
			}
			st := l.State()
			if st.LastError == "" || st.SHA256 != good.SHA256 || st.Size != 2 {
				t.Fatalf("State = %+v", st)
			}
		})
	}
	writeList(t, path, addrC+"\n", time.Now().Add(2*time.Second))
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := l.State(); st.LastError != "" || !l.Listed(addrC) || l.Listed(addrA) {
		t.Fatalf("after a good reload: %+v", st)
	}
}

// TestWatcherPicksUpChange runs the watcher on a fake clock: the change is
// seen on the first poll after it, without waiting in real time.
func TestWatcherPicksUpChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	writeList(t, path, `["`+addrA+`"]`, time.Now().Add(-time.Hour))
	synctest.Test(t, func(t *testing.T) {
		l, err := screen.Open(path, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		writeList(t, path, `["`+addrB+`"]`, time.Now().Add(time.Hour))
		if l.Listed(addrB) {
			t.Fatal("changed before a poll")
		}
		time.Sleep(screen.PollInterval + time.Second)
		synctest.Wait()
		if !l.Listed(addrB) || l.Listed(addrA) {
			t.Fatalf("watcher missed the change: %+v", l.State())
		}
	})
}
