package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks contrib/systemd/ardx.service: the hardening the
// README promises is there, and systemd-analyze verify accepts the unit
// (with ExecStart pointed at an executable that exists here).
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("contrib", "systemd", "ardx.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=ardx", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"Restart=on-failure", "ExecStart=/usr/local/bin/ardx serve --data ${STATE_DIRECTORY}"} {
		if !strings.Contains(unit, "\n"+want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing in CI; .ci/run installs it")
		}
		t.Skip("systemd-analyze not installed (Debian: apt-get install systemd); the unit's directives were checked, not the unit")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ardx.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/ardx", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
