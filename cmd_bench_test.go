package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/bench"
)

// TestBenchCommand: `ardx bench` measures the data dir's index and an
// upstream, prints the report and stores it for the server's /bench.
func TestBenchCommand(t *testing.T) {
	data := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"ingest", "--data", data, "--log-format", "text", "testdata/corpus"}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out.String())
	}
	asked := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results":[]}`))
	}))
	defer up.Close()

	out.Reset()
	var logs bytes.Buffer
	err := run(context.Background(), []string{"bench", "--data", data, "--log-format", "text", "--json", "--upstream", up.URL}, envOf(nil), nil, &out, &logs)
	if err != nil {
		t.Fatalf("bench: %v\n%s%s", err, out.String(), logs.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	tasks := len(bench.Frozen().Tasks)
	if rep.Trigger != "on demand" || rep.Registry.Measures == nil || rep.Registry.Measures.Tasks != tasks || rep.Registry.Measures.Recall10 < 0.5 {
		t.Fatalf("registry part %+v", rep.Registry)
	}
	if len(rep.Upstreams) != 1 || rep.Upstreams[0].Measures == nil || rep.Upstreams[0].Measures.Recall10 != 0 || asked != tasks {
		t.Fatalf("upstream part %+v, asked %d", rep.Upstreams, asked)
	}

	out.Reset()
	if err := run(context.Background(), []string{"bench", "--data", data, "--log-format", "text"}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "R@10") || !strings.Contains(out.String(), "http://127.0.0.1:8080") {
		t.Fatalf("table: %s", out.String())
	}
	db, err := kv.Open(data, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs, err := db.BenchRuns(0); err != nil || len(runs) != 2 {
		t.Fatalf("stored runs %d, %v", len(runs), err)
	}
}
