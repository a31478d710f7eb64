//go:build e2e

// Package e2e holds the end-to-end tier: it starts the built ardx binary as a
// real process (and, for the facilitator, a real chain node and the official
// clients) and talks to it over HTTP only. Run it with `make e2e`; it never
// skips silently: a component that cannot start fails the run.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary returns the ardx binary under test: $ARDX_BIN, or one built now.
func binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ARDX_BIN"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	out := filepath.Join(t.TempDir(), "ardx")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build ardx: %v\n%s", err, b)
	}
	return out
}

// proc is a running ardx process whose JSON log is watched for the
// addresses it listens on.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	urls    map[string]string
	logs    bytes.Buffer
	ready   chan struct{}
	want    []string
	once    sync.Once
}

// startArdx runs `ardx args...` and waits until every service in want logs
// its listening URL.
func startArdx(t *testing.T, want []string, args ...string) *proc {
	t.Helper()
	return startArdxEnv(t, nil, want, args...)
}

// startArdxEnv is startArdx with extra environment variables.
func startArdxEnv(t *testing.T, env []string, want []string, args ...string) *proc {
	t.Helper()
	p := &proc{urls: map[string]string{}, ready: make(chan struct{}), want: want}
	p.cmd = exec.Command(binary(t), append(args, "--log-format", "json")...)
	// Tests reach loopback only: no built-in public registry is asked and
	// the default corpus's (public) endpoints are not probed.
	p.cmd.Env = append(append(os.Environ(), "ARDX_LOG_LEVEL=info", "ARDX_PUBLIC_REGISTRIES=none", "ARDX_ENDPOINT_PROBE_INTERVAL=0", "ARDX_BENCH_INTERVAL=0"), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start ardx: %v", err)
	}
	go p.watch(stderr)
	t.Cleanup(func() { p.stop(t) })
	select {
	case <-p.ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("ardx did not report listening within 60s; log:\n%s", p.log())
	}
	return p
}

func (p *proc) watch(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		p.mu.Lock()
		p.logs.Write(line)
		p.logs.WriteByte('\n')
		var rec struct {
			Msg     string `json:"msg"`
			Service string `json:"service"`
			URL     string `json:"url"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
			p.urls[rec.Service] = rec.URL
			all := true
			for _, w := range p.want {
				if p.urls[w] == "" {
					all = false
				}
			}
			if all {
				p.once.Do(func() { close(p.ready) })
			}
		}
		p.mu.Unlock()
	}
}

func (p *proc) url(service string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.urls[service]
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// stopProcess sends sig to cmd, whose waiter closes done when it exits,
// and kills it if it has not exited within grace; it reports whether it
// had to kill. A process that has already exited is left alone.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}, sig os.Signal, grace time.Duration) (killed bool) {
	select {
	case <-done:
		return false
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return false
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return true
	}
}

// stop ends the process with SIGTERM (SIGKILL after 10 s) and checks it
// exited cleanly.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.stopWithin(t, 10*time.Second)
}

// stopWithin sends SIGTERM and fails unless the process exits cleanly
// within d (then it is killed).
func (p *proc) stopWithin(t *testing.T, d time.Duration) {
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ardx exited with %v; log:\n%s", err, p.log())
		}
		t.Logf("ardx stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("ardx did not stop within %v of SIGTERM; log tail:\n%s", d, tailOf(p.log(), 4000))
	}
}

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
