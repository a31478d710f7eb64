//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunExitsZeroOnCtrlC presses Ctrl-C on `make run` as a terminal
// does, by sending SIGINT to the whole process group: ardx stops cleanly
// with exit code 0, so make reports no error. (`go run` itself exits 1 when
// it is interrupted, which is why make run builds the binary and runs it.)
func TestMakeRunExitsZeroOnCtrlC(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "run",
		"ARGS=--data "+t.TempDir()+" --registry-addr 127.0.0.1:0 --facilitator-addr 127.0.0.1:0 --log-format json")
	cmd.Dir = moduleRoot()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	listening := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		seen := 0
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if c := strings.Count(out.String(), `"msg":"listening"`); c >= 2 && seen < 2 {
				seen = c
				close(listening)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-listening:
	case <-copied:
		t.Fatalf("make run ended before both services listened:\n%s", out.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("make run did not listen within 4 minutes")
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	<-copied
	// GNU make, itself interrupted, waits for its recipe and then ends
	// itself with the same signal (status 130 in a shell, no message). What
	// it must not do is report the recipe failed ("make: *** ... Error 1").
	if err != nil {
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("make run after Ctrl-C: %v, want exit 0 or make's own SIGINT:\n%s", err, tailOf(out.String(), 4000))
		}
	}
	if strings.Contains(out.String(), "make: ***") {
		t.Errorf("make reported an error:\n%s", tailOf(out.String(), 4000))
	}
	if !strings.Contains(out.String(), `"msg":"stopped"`) {
		t.Errorf("ardx did not log a clean stop:\n%s", tailOf(out.String(), 4000))
	}
}
