package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server runs one listener. Open listens synchronously so the bound address
// is known before it returns (port 0 picks a free port); Close drains
// in-flight requests until its context ends.
type Server struct {
	Name    string
	Addr    string // host:port to listen on
	Handler http.Handler
	Logger  *slog.Logger

	// WriteTimeout bounds a whole response. Zero means 60 s; a facilitator
	// that waits ~25 s for a settlement needs more than the usual default.
	WriteTimeout time.Duration

	// Listener, when set, is served instead of listening on Addr: callers
	// that must know the bound address before building the handler (to
	// derive a public URL from port 0) listen first with Listen.
	Listener net.Listener

	ln  net.Listener
	srv *http.Server

	// fresh holds the connections no request has come in on yet, with
	// when they were accepted. Shutdown counts them busy until they are
	// 5 s old, so a client that connected and sent nothing (a browser's
	// preconnect, an HTTP client's spare dial) held a stop for up to 5 s;
	// Close closes them once they are freshGrace old.
	mu    sync.Mutex
	fresh map[net.Conn]time.Time
}

// freshGrace is how long Close leaves a connection without a request open:
// a client that has just connected is sending its request now.
const freshGrace = 250 * time.Millisecond

// Open binds the listener and starts serving in a goroutine.
func (s *Server) Open() error {
	ln := s.Listener
	if ln == nil {
		var err error
		if ln, err = Listen(s.Name, s.Addr); err != nil {
			return err
		}
	}
	wt := s.WriteTimeout
	if wt <= 0 {
		wt = 60 * time.Second
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      wt,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ConnState:         s.track,
	}
	if s.Logger != nil {
		s.srv.ErrorLog = slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn)
		s.Logger.Info("listening", "service", s.Name, "addr", ln.Addr().String(), "url", s.URL())
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && s.Logger != nil {
			s.Logger.Error("serve failed", "service", s.Name, "err", err)
		}
	}()
	return nil
}

// Listen binds a TCP listener on addr, naming the service in the error.
func Listen(name, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	return ln, nil
}

// ListenAddr returns the bound address (host:port), valid after Open.
func (s *Server) ListenAddr() string {
	if s.ln == nil {
		return s.Addr
	}
	return s.ln.Addr().String()
}

// URL returns http://<bound address>.
func (s *Server) URL() string { return "http://" + s.ListenAddr() }

// Close stops accepting connections, closes those no request has come in
// on, and waits for in-flight requests until ctx is done.
func (s *Server) Close(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.srv.Shutdown(ctx) }()
	// Shutdown closes the listener, then waits for the connections; the
	// fresh ones would hold it (see fresh), so they are closed as they
	// pass freshGrace.
	tick := time.NewTicker(freshGrace / 10)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case now := <-tick.C:
			s.mu.Lock()
			for c, since := range s.fresh {
				if now.Sub(since) >= freshGrace {
					_ = c.Close()
					delete(s.fresh, c)
				}
			}
			s.mu.Unlock()
		}
	}
}

// track keeps fresh up to date (http.Server.ConnState).
func (s *Server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != http.StateNew {
		delete(s.fresh, c)
		return
	}
	if s.fresh == nil {
		s.fresh = make(map[net.Conn]time.Time)
	}
	s.fresh[c] = time.Now()
}
