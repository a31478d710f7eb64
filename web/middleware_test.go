package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/web"
)

func TestWithLoggingOneCompactLine(t *testing.T) {
	tests := []struct {
		path      string
		status    int
		wantLevel string // "" = not logged at info
	}{
		{"/search", 200, "INFO"},
		{"/nope", 404, "INFO"},
		{"/settle", 502, "WARN"},
		{"/health", 200, ""},
		{"/metrics", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
			h := web.Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte("hello"))
			}), web.WithRequestID, web.WithLogging(logger))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", tc.path, nil))
			if tc.wantLevel == "" {
				if buf.Len() != 0 {
					t.Fatalf("logged at info: %s", buf.Bytes())
				}
				return
			}
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("%v: %q", err, buf.Bytes())
			}
			if rec["level"] != tc.wantLevel || rec["msg"] != "request" || rec["path"] != tc.path ||
				rec["status"] != float64(tc.status) || rec["bytes"] != float64(5) || rec["request_id"] == "" {
				t.Errorf("log line %v", rec)
			}
			if ms, ok := rec["ms"].(float64); !ok || ms < 0 || ms > 1000 {
				t.Errorf("ms = %v, want milliseconds", rec["ms"])
			}
			if _, ok := rec["dur"]; ok {
				t.Errorf("nanosecond dur still logged: %v", rec)
			}
		})
	}
}

// blockingHandler is a slog handler whose Handle waits until release is
// closed: a log line that takes long to write.
type blockingHandler struct {
	slog.Handler
	release chan struct{}
}

func (h blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	<-h.release
	return h.Handler.Handle(ctx, r)
}

// TestWithLoggingSendsTheAnswerFirst: an answer of a declared length
// reaches the client whole while its log line is still being written; one
// without keeps the framing net/http chooses once the handler returns (a
// short one its length, not chunks).
func TestWithLoggingSendsTheAnswerFirst(t *testing.T) {
	long := strings.Repeat("x", 6000) // past net/http's buffers
	release := make(chan struct{})
	logger := slog.New(blockingHandler{Handler: slog.NewJSONHandler(io.Discard, nil), release: release})
	srv := httptest.NewServer(web.Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sized" {
			w.Header().Set("Content-Length", strconv.Itoa(len(long)))
			_, _ = io.WriteString(w, long)
			return
		}
		_, _ = io.WriteString(w, "short")
	}), web.WithRequestID, web.WithLogging(logger)))
	defer srv.Close()
	var once sync.Once
	defer once.Do(func() { close(release) })

	type answer struct {
		resp *http.Response
		body string
		err  error
	}
	get := func(path string) <-chan answer {
		got := make(chan answer, 1)
		go func() {
			var a answer
			if a.resp, a.err = http.Get(srv.URL + path); a.err == nil {
				var b []byte
				b, a.err = io.ReadAll(a.resp.Body)
				a.resp.Body.Close()
				a.body = string(b)
			}
			got <- a
		}()
		return got
	}
	select {
	case a := <-get("/sized"):
		if a.err != nil || a.body != long {
			t.Fatalf("sized answer: %d bytes, %v", len(a.body), a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the answer waited for its log line")
	}
	unsized := get("/unsized")
	once.Do(func() { close(release) })
	a := <-unsized
	if a.err != nil || a.body != "short" {
		t.Fatalf("unsized answer %q, %v", a.body, a.err)
	}
	if a.resp.ContentLength != int64(len("short")) || len(a.resp.TransferEncoding) > 0 {
		t.Errorf("unsized answer framed with length %d, transfer encoding %v: want net/http's own length", a.resp.ContentLength, a.resp.TransferEncoding)
	}
}
