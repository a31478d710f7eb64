package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// TestReportRollupsSurviveAKill: searches are logged at once and counted
// into the publisher reports' rollups later, in batches; a kill -9 between
// the two must not lose them from the reports. After a restart on the same
// data dir, /demand counts every search the log holds (/stats counts the
// log in the transaction that appends it), not one more or less. A
// graceful stop then counts everything before it exits.
func TestReportRollupsSurviveAKill(t *testing.T) {
	data := t.TempDir()
	args := []string{"registry", "--data", data, "--registry-addr", "127.0.0.1:0", "--registry-rate-limit", "off"}
	p := startSelf(t, []string{"registry"}, args...)
	reg := p.url("registry")

	var first struct {
		Results []struct {
			Identifier string `json:"identifier"`
		} `json:"results"`
	}
	search(t, reg, &first)
	if len(first.Results) == 0 {
		t.Fatal("the default corpus has no weather forecast entry")
	}
	domain := strings.SplitN(strings.TrimPrefix(first.Results[0].Identifier, "urn:air:"), ":", 2)[0]
	const n = 120
	for range n - 1 {
		search(t, reg, nil)
	}
	// Every search is in the log (within the writer's 25 ms commit gap),
	// then the kill, well inside the 5 s the rollups trail the log by.
	deadline := time.Now().Add(5 * time.Second)
	for logged(t, reg) < n {
		if time.Now().After(deadline) {
			t.Fatalf("/stats counts %d searches of %d after 5 s", logged(t, reg), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	counted := demandSearches(t, reg, domain)
	p.stop(t, syscall.SIGKILL)
	t.Logf("before the kill: %d logged, %d counted in the rollups", n, counted)

	p = startSelf(t, []string{"registry"}, args...)
	reg = p.url("registry")
	if got := logged(t, reg); got != n {
		t.Fatalf("after the restart /stats counts %d searches, want %d", got, n)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		got := demandSearches(t, reg, domain)
		if got == n {
			break
		}
		if got > n || time.Now().After(deadline) {
			t.Fatalf("after the restart /demand?domain=%s counts %d searches, the log %d", domain, got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A stop counts what it has not counted yet (the rollups are paced
	// only while the server runs): after a SIGTERM no record is left
	// listed to count, and after a restart /demand counts every search.
	for range n {
		search(t, reg, nil)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	db, err := kv.Open(data, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A rollup that counts nothing reports how many records were listed.
	left, err := db.RollupSearches(1<<20, func([]kv.SearchRecord, kv.Reports) error { return nil }, nil)
	db.Close()
	if err != nil || left != 0 {
		t.Fatalf("after the stop %d records are left to count (%v)", left, err)
	}
	p = startSelf(t, []string{"registry"}, args...)
	defer p.stop(t, syscall.SIGTERM)
	reg = p.url("registry")
	if got := logged(t, reg); got != 2*n {
		t.Fatalf("after the stop /stats counts %d searches, want %d", got, 2*n)
	}
	if got := demandSearches(t, reg, domain); got != 2*n {
		t.Fatalf("after the stop /demand?domain=%s counts %d searches, want %d", domain, got, 2*n)
	}
}

func search(t *testing.T, reg string, v any) {
	t.Helper()
	if status, _ := call(t, http.MethodPost, reg+"/search", "", `{"query":{"text":"weather forecast"},"federation":"none"}`, nil, v); status != 200 {
		t.Fatalf("search: %d", status)
	}
}

func logged(t *testing.T, reg string) int {
	var s struct {
		Searches struct {
			Total int `json:"total"`
		} `json:"searches"`
	}
	getJSON(t, reg+"/stats?days=7", &s)
	return s.Searches.Total
}

func demandSearches(t *testing.T, reg, domain string) int {
	var d struct {
		Searches int `json:"searches"`
	}
	getJSON(t, reg+"/demand?domain="+domain+"&days=7", &d)
	return d.Searches
}
