package web_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

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
