package web

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func openTestServer(t *testing.T, h http.Handler) *Server {
	t.Helper()
	s := &Server{Name: "test", Addr: "127.0.0.1:0", Handler: h}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCloseDoesNotWaitForSilentConnections: a client that connected and
// sent nothing held http.Server.Shutdown for 5 s; Close ends it within
// freshGrace and a little.
func TestCloseDoesNotWaitForSilentConnections(t *testing.T) {
	s := openTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c, err := net.Dial("tcp", s.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // accepted
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("close took %v with a silent connection open", took)
	}
	// The server closed the silent connection.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on the silent connection: %v, want EOF", err)
	}
}

// TestCloseDrainsARequestInFlight: a request the handler is still serving
// when Close begins gets its whole answer, and Close waits for it.
func TestCloseDrainsARequestInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s := openTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	c, err := net.Dial("tcp", s.ListenAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-started
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a request was in flight", err)
	case <-time.After(600 * time.Millisecond): // past freshGrace: the connection is not fresh
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the drained answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "done") {
		t.Fatalf("drained answer %d %q", resp.StatusCode, body)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
}
