package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// TestDriveReadsWholeAnswers runs drive against a server that answers in
// the shapes net/http produces (a sized body, a chunked one, a closed
// connection) and checks every request arrived whole and every answer was
// read to its end.
func TestDriveReadsWholeAnswers(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/search" ||
			r.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"text":"q`) {
			t.Errorf("request %s %s %q: %v", r.Method, r.URL.Path, body, err)
		}
		n := requests.Add(1)
		switch n % 3 {
		case 0: // no length: net/http chunks it
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, strings.Repeat("x", 9000))
		case 1:
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, `{"results":[]}`)
		default:
			_, _ = io.WriteString(w, strings.Repeat("y", 5000))
		}
	}))
	defer srv.Close()

	queries := make([]string, 60)
	for i := range queries {
		queries[i] = "q" + strings.Repeat("w", i)
	}
	res, err := drive(srv.URL, queries, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := requests.Load(); got != int64(len(queries)) {
		t.Errorf("server saw %d requests, want %d", got, len(queries))
	}
	if res.p50 <= 0 || res.p99 < res.p50 || res.wall <= 0 {
		t.Errorf("timings %+v", res)
	}
}

// TestDriveFailsOnAnErrorStatus checks that an answer other than 200 ends
// the run with an error naming it, rather than counting as a search.
func TestDriveFailsOnAnErrorStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	_, err := drive(srv.URL, []string{"a", "b", "c"}, 2)
	if err == nil || !strings.Contains(err.Error(), "status 429") {
		t.Fatalf("err = %v, want status 429", err)
	}
}

// TestDriveAllMeasuresEachServer runs driveAll against two servers at
// once: each must get every query, and each run its own timings.
func TestDriveAllMeasuresEachServer(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var seen [2]atomic.Int64
	var srvs []*server
	for i := range seen {
		h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			seen[i].Add(1)
			_, _ = io.WriteString(w, `{"results":[]}`)
		}))
		defer h.Close()
		// The servers run in this process: its CPU time stands for theirs.
		srvs = append(srvs, &server{cmd: &exec.Cmd{Process: self}, url: h.URL})
	}
	queries := make([]string, 40)
	for i := range queries {
		queries[i] = fmt.Sprintf("q%d", i)
	}
	runs, err := driveAll(srvs, queries, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if got := seen[i].Load(); got != int64(len(queries)) {
			t.Errorf("server %d saw %d requests, want %d", i, got, len(queries))
		}
		if r.p50 <= 0 || r.p99 < r.p50 || r.wall <= 0 || r.server < 0 || r.own < 0 {
			t.Errorf("server %d: run %+v", i, r)
		}
	}
}

// TestCopyDir copies a data dir's tree and refuses what is not a plain
// file or directory.
func TestCopyDir(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]string{"ardx.db": "bolt", "index/store/a": "seg", "index/meta.json": "{}"}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyDir(src, dst); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != body {
			t.Errorf("%s: %q, %v; want %q", name, got, err, body)
		}
	}
	if err := os.Symlink("ardx.db", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := copyDir(src, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a symlink: err = %v, want not a regular file", err)
	}
}

// fakeRegistry writes an executable script standing in for the ardx
// binary: it runs body with the arguments startRegistry passes.
func fakeRegistry(t *testing.T, body string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ardx")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestStartRegistryReadsItsLog starts a stand-in that logs to standard
// error as ardx does, the listening line after others and in a later
// write: the URL is read from the log file, the search readiness probe
// goes to it, and stopping the server removes the log.
func TestStartRegistryReadsItsLog(t *testing.T) {
	var searches atomic.Int64
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/search" {
			searches.Add(1)
		}
		_, _ = io.WriteString(w, `{"results":[]}`)
	}))
	defer h.Close()
	bin := fakeRegistry(t, `echo '{"level":"INFO","msg":"index open"}' >&2
sleep 0.1
echo '{"level":"INFO","msg":"listening","service":"registry","url":"`+h.URL+`"}' >&2
exec sleep 30`)
	s, err := startRegistry(bin, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if s.url != h.URL || searches.Load() == 0 {
		t.Errorf("url %q (want %q), %d searches", s.url, h.URL, searches.Load())
	}
	log := s.log
	if _, err := os.Stat(log); err != nil {
		t.Errorf("log file: %v", err)
	}
	s.stop()
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("log file after stop: %v, want it removed", err)
	}
}

// TestStartRegistryReportsAnEarlyExit: a server that exits before it
// listens fails the start with what it logged.
func TestStartRegistryReportsAnEarlyExit(t *testing.T) {
	bin := fakeRegistry(t, `echo 'open index: no space left on device' >&2
exit 1`)
	_, err := startRegistry(bin, t.TempDir(), false)
	if err == nil || !strings.Contains(err.Error(), "exited before listening") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v, want the exit and its log", err)
	}
}

// TestHandlerTimesReadsTheRunsSearches reads the handler times of the POST
// /search lines past an offset, and only those, leaving a line still being
// written for later.
func TestHandlerTimesReadsTheRunsSearches(t *testing.T) {
	before := `{"level":"INFO","msg":"request","method":"POST","path":"/search","status":200,"ms":9.99}` + "\n"
	during := `{"level":"INFO","msg":"listening","service":"metrics","url":"http://127.0.0.1:1"}
{"level":"INFO","msg":"request","method":"POST","path":"/search","status":200,"ms":0.42}
{"level":"DEBUG","msg":"request","method":"GET","path":"/health","status":200,"ms":0.01}
{"level":"INFO","msg":"request","method":"GET","path":"/search","status":405,"ms":0.02}
not json "/search"
{"level":"INFO","msg":"request","method":"POST","path":"/search","status":200,"ms":1.5}
{"level":"INFO","msg":"request","method":"POST","path":"/search","status":200,"ms":7`
	path := filepath.Join(t.TempDir(), "registry.log")
	if err := os.WriteFile(path, []byte(before+during), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{log: path}
	var got []float64
	next, err := s.logLines(int64(len(before)), func(line []byte) {
		if ms, ok := searchTime(line); ok {
			got = append(got, ms)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0.42, 1.5}; !slices.Equal(got, want) {
		t.Errorf("times %v, want %v", got, want)
	}
	if partial := strings.LastIndexByte(during, '\n') + 1; next != int64(len(before)+partial) {
		t.Errorf("read up to byte %d, want %d (the last whole line)", next, len(before)+partial)
	}
	h, err := s.handlerTimes(int64(len(before)), 2)
	if err != nil || h.p50 != 1.5 || h.p99 != 1.5 {
		t.Errorf("handlerTimes = %+v, %v; want p50 and p99 1.5", h, err)
	}
}
