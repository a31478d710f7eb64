package main

import (
	"io"
	"net/http"
	"net/http/httptest"
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
