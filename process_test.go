package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator"
)

// TestMain lets a test run this binary as ardx itself (see startSelf): a
// real process, real signals and real exit codes, without building ardx.
func TestMain(m *testing.M) {
	if os.Getenv("ARDX_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfProc is the test binary running as `ardx args...`, with its JSON log
// watched for the services' listening URLs.
type selfProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	log   bytes.Buffer // stderr
	out   bytes.Buffer // stdout, to be read once done is closed
	urls  map[string]string
	ready chan struct{}
	done  chan struct{}
	err   error // from Wait, once done is closed
}

// startSelf runs `ardx args...` and waits until each service in want has
// logged the URL it listens on. The process is stopped (SIGKILL) at cleanup
// if the test has not ended it.
func startSelf(t *testing.T, want []string, args ...string) *selfProc {
	t.Helper()
	p := &selfProc{urls: map[string]string{}, ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], append(args, "--log-format", "json")...)
	// Tests reach loopback only: no built-in public registry is asked and
	// the default corpus's (public) endpoints are not probed.
	p.cmd.Env = append(os.Environ(), "ARDX_TEST_RUN_MAIN=1", "ARDX_PUBLIC_REGISTRIES=none", "ARDX_ENDPOINT_PROBE_INTERVAL=0", "ARDX_BENCH_INTERVAL=0")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var once sync.Once
		for sc.Scan() {
			var rec struct{ Msg, Service, URL string }
			p.mu.Lock()
			p.log.Write(sc.Bytes())
			p.log.WriteByte('\n')
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				p.urls[rec.Service] = rec.URL
				all := true
				for _, w := range want {
					all = all && p.urls[w] != ""
				}
				if all {
					once.Do(func() { close(p.ready) })
				}
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, stderr)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case <-p.ready:
	case <-p.done:
		t.Fatalf("ardx exited before listening (%v):\n%s", p.err, p.logText())
	case <-time.After(2 * time.Minute):
		t.Fatalf("ardx did not listen within 2 minutes:\n%s", p.logText())
	}
	return p
}

func (p *selfProc) url(service string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.urls[service]
}

func (p *selfProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// stop sends sig and returns the exit code.
func (p *selfProc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("ardx did not stop within 45 s of %v:\n%s", sig, p.logText())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// TestSignalsStopCleanlyWithExitZero: Ctrl-C in a terminal and SIGTERM from
// a service manager are both an orderly stop, exit code 0.
func TestSignalsStopCleanlyWithExitZero(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startSelf(t, []string{"registry", "facilitator"}, "serve", "--data", t.TempDir(),
				"--registry-addr", "127.0.0.1:0", "--facilitator-addr", "127.0.0.1:0")
			if code := p.stop(t, sig); code != 0 {
				t.Fatalf("exit code %d after %v, want 0:\n%s", code, sig, p.logText())
			}
			if !bytes.Contains([]byte(p.logText()), []byte(`"msg":"stopped"`)) {
				t.Errorf("no \"stopped\" line:\n%s", p.logText())
			}
			if p.out.Len() != 0 {
				t.Errorf("printed on stdout, which is no terminal (the banner is for terminals only):\n%s", p.out.String())
			}
		})
	}
}

// TestFacilitatorAloneServesEcho: `ardx facilitator` with no flags serves
// /echo on the network it runs (the dev chain), not on Base, which it does
// not serve.
func TestFacilitatorAloneServesEcho(t *testing.T) {
	p := startSelf(t, []string{"facilitator"}, "facilitator", "--data", t.TempDir(), "--facilitator-addr", "127.0.0.1:0")
	resp, err := http.Get(p.url("facilitator") + "/echo/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st facilitator.EchoStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Serving || st.Network != "eip155:1337" {
		t.Fatalf("/echo/status = %+v, want serving on eip155:1337", st)
	}
	resp, err = http.Get(p.url("facilitator") + "/echo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("GET /echo = %d, want 402 with payment terms", resp.StatusCode)
	}
}
