//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestIntegrateSnippetsTypeCheck fetches the TypeScript snippets that a
// running facilitator's /integrate page hands out and runs tsc --noEmit
// over them against the pinned @x402 packages of e2e/integrate. It lives in
// this tier because it installs about 375 MB of npm packages.
func TestIntegrateSnippetsTypeCheck(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s is not installed: cannot type-check the /integrate snippets (install Node.js >= 20 with npm)", tool)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip("SKIPPING (not CI): " + msg)
		}
	}
	p := startArdx(t, []string{"facilitator"}, "facilitator", "--data", t.TempDir(),
		"--facilitator-addr", "127.0.0.1:0", "--network", "dev")
	status, body := getURL(t, p.url("facilitator")+"/integrate")
	if status != 200 {
		t.Fatalf("GET /integrate: %d %s", status, body)
	}
	var page struct {
		Snippets []struct {
			Framework, Language, Code string
		}
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("GET /integrate: %v: %s", err, body)
	}

	dir := filepath.Join(moduleRoot(), "e2e", "integrate")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if stale(filepath.Join(dir, "package-lock.json"), filepath.Join(dir, "node_modules", ".package-lock.json")) {
		// npm install from the committed lock, not npm ci: next's
		// platform-specific optional packages reach the lock without versions
		// here, and npm ci refuses the lock for them even with
		// --omit=optional. --no-save keeps the lock file as committed.
		cmd := exec.CommandContext(ctx, "npm", "install", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund", "--no-save")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install: %v\n%s", err, tailOf(string(out), 4000))
		}
	}
	gen := filepath.Join(dir, "gen")
	if err := os.RemoveAll(gen); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, sn := range page.Snippets {
		if sn.Language != "typescript" {
			continue
		}
		if err := os.WriteFile(filepath.Join(gen, sn.Framework+".ts"), []byte(sn.Code), 0o644); err != nil {
			t.Fatal(err)
		}
		written++
	}
	if written < 3 {
		t.Fatalf("/integrate gave %d TypeScript snippets, want express, hono and next: %s", written, body)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "tsc"), "--noEmit", "-p", dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit: %v\n%s", err, out)
	}
}

// stale reports whether the installed tree (npm's hidden lock file) is
// missing or older than the committed lock file.
func stale(lock, installed string) bool {
	li, err := os.Stat(lock)
	if err != nil {
		return true
	}
	ii, err := os.Stat(installed)
	return err != nil || ii.ModTime().Before(li.ModTime())
}
