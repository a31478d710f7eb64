package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
}

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

// Close stops accepting connections and waits for in-flight requests until
// ctx is done.
func (s *Server) Close(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}
