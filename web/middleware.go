package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"net/http"
	"time"
)

// Middleware wraps a handler.
type Middleware func(http.Handler) http.Handler

// Chain applies middleware so the first listed runs first.
func Chain(h http.Handler, mw ...Middleware) http.Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

type ctxKey int

const requestIDKey ctxKey = iota

// RequestID returns the id that WithRequestID gave the request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithRequestID gives each request a random id, echoed in X-Request-Id.
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// WithLogging logs each request in one compact line: method, path, status,
// bytes, milliseconds and request id; at info, server errors at warn, and
// the polls of monitors (/health, /metrics) at debug. It logs no client
// address or user agent.
func WithLogging(logger *slog.Logger) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			logged := &loggedPath{path: r.URL.Path}
			next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), loggedPathKey{}, logged)))
			if w.Header().Get("Content-Length") != "" {
				// The answer is whole: send it before the log line, which
				// the client need not wait for (net/http sends what is
				// buffered only once the handler chain returns).
				_ = http.NewResponseController(w).Flush()
			}
			level := slog.LevelInfo
			switch {
			case rec.status >= 500:
				level = slog.LevelWarn
			case r.URL.Path == "/health" || r.URL.Path == "/metrics":
				level = slog.LevelDebug
			}
			if !logger.Enabled(r.Context(), level) {
				return
			}
			logger.LogAttrs(r.Context(), level, "request", slog.String("method", r.Method), slog.String("path", logged.path),
				slog.Int("status", rec.status), slog.Int("bytes", rec.bytes), slog.Float64("ms", millis(time.Since(start))),
				slog.String("request_id", RequestID(r.Context())))
		})
	}
}

type loggedPathKey struct{}

// loggedPath is the path WithLogging logs; a handler may replace it.
type loggedPath struct{ path string }

// LogPathAs makes WithLogging log path instead of the request's own: a
// handler whose path holds something that must stay out of logs (a
// private entry's identifier) logs its route pattern instead.
func LogPathAs(r *http.Request, path string) {
	if p, ok := r.Context().Value(loggedPathKey{}).(*loggedPath); ok {
		p.path = path
	}
}

// millis is d in milliseconds with two decimals, as people read latency.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*100) / 100
}

// WithRecover turns a panic into a 500 problem instead of a dropped
// connection.
func WithRecover(ps Problems) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					ps.Panic(w, r, v)
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// WithBodyLimit caps every request body at limit bytes; reading past it
// fails with *http.MaxBytesError (413 through Problems).
func WithBodyLimit(limit int64) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil {
				r.Body = http.MaxBytesReader(w, r.Body, limit)
			}
			next.ServeHTTP(w, r)
		})
	}
}
