package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// devMerchant reads the dev chain's merchant address from the JSON log.
func devMerchant(t *testing.T, p *selfProc) string {
	t.Helper()
	for _, line := range strings.Split(p.logText(), "\n") {
		var rec struct{ Msg, Merchant string }
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "dev chain ready") {
			return rec.Merchant
		}
	}
	t.Fatalf("no dev chain line in the log:\n%s", p.logText())
	return ""
}

// TestBackupDuringLoadOpensAndReindexes is the acceptance check:
// `ardx backup` while the running service answers searches and settles
// payments gives a copy that opens, passes `ardx reindex`, and holds the
// settlements finished before it was taken; `ardx restore` brings it back.
func TestBackupDuringLoadOpensAndReindexes(t *testing.T) {
	data := t.TempDir()
	p := startSelf(t, []string{"registry", "facilitator"}, "serve", "--data", data,
		"--registry-addr", "127.0.0.1:0", "--facilitator-addr", "127.0.0.1:0", "--rate-limit", "off")
	reg, fac := p.url("registry"), p.url("facilitator")
	merchant := devMerchant(t, p)
	keyFile := filepath.Join(data, "dev-payer.key")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var searches, settles atomic.Int64
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := http.Post(reg+"/search", "application/json", strings.NewReader(`{"query":{"text":"weather forecast"}}`))
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					searches.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			var out bytes.Buffer
			err := run(ctx, []string{"pay", "--facilitator", fac, "--network", "dev", "--to", merchant,
				"--amount", "0.01", "--key-file", keyFile}, envOf(nil), nil, &out, &out)
			if err == nil {
				settles.Add(1)
			} else if ctx.Err() == nil {
				t.Errorf("pay: %v\n%s", err, out.String())
				return
			}
		}
	})
	// Let the load run, then back up in the middle of it.
	deadline := time.Now().Add(30 * time.Second)
	for settles.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	settledBefore := settles.Load()
	backup := filepath.Join(t.TempDir(), "ardx-backup.db")
	var out bytes.Buffer
	err := run(context.Background(), []string{"backup", "--data", data, backup}, envOf(nil), nil, &out, &out)
	time.Sleep(200 * time.Millisecond) // load goes on after the copy
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "taken by the running service") {
		t.Errorf("backup did not go through the running service: %s", out.String())
	}
	t.Logf("backup during %d searches and %d settlements: %s", searches.Load(), settles.Load(), strings.TrimSpace(out.String()))
	if searches.Load() == 0 || settledBefore == 0 {
		t.Fatalf("no load: %d searches, %d settlements before the backup", searches.Load(), settledBefore)
	}

	// The copy opens as a store and holds the settlements finished before
	// it was taken.
	copyDir := t.TempDir()
	if err := copyFile(backup, filepath.Join(copyDir, kv.FileName)); err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(copyDir, kv.Options{})
	if err != nil {
		t.Fatalf("the copy does not open: %v", err)
	}
	counts, err := db.SettlementCounts()
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	var succeeded int64
	for _, c := range counts {
		if c.Outcome == "succeeded" {
			succeeded += c.Count
		}
	}
	if succeeded < settledBefore {
		t.Errorf("the copy holds %d succeeded settlements, %d had finished before the backup", succeeded, settledBefore)
	}
	out.Reset()
	if err := run(context.Background(), []string{"reindex", "--data", copyDir, "--log-format", "json"}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("reindex of the copy: %v", err)
	}
	if !strings.HasPrefix(out.String(), "reindexed ") || strings.HasPrefix(out.String(), "reindexed 0 ") {
		t.Errorf("reindex of the copy: %q", out.String())
	}

	// Restore refuses while the service runs, and works once it stopped.
	out.Reset()
	err = run(context.Background(), []string{"restore", "--data", data, "--log-format", "json", backup}, envOf(nil), nil, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stop it") {
		t.Fatalf("restore under a running service: %v", err)
	}
	if code := p.stop(t, os.Interrupt); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out.Reset()
	if err := run(context.Background(), []string{"restore", "--data", data, "--log-format", "json", backup}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatalf("restore: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "index rebuilt") || !strings.Contains(out.String(), "replaced store is kept") {
		t.Errorf("restore said %q", out.String())
	}
}

func TestBackupOfAStoppedDataDir(t *testing.T) {
	data := t.TempDir()
	db, err := kv.Open(data, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Incr("x", 7)
	db.Close()
	backup := filepath.Join(t.TempDir(), "b.db")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"backup", "--data", data, backup}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	// A second backup to the same name replaces the first once it is whole
	// (cron-friendly); nothing is left half-written.
	if err := run(context.Background(), []string{"backup", "--data", data, backup}, envOf(nil), nil, &out, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(backup + ".partial"); !os.IsNotExist(err) {
		t.Errorf("partial file left behind: %v", err)
	}
	if err := run(context.Background(), []string{"backup", "--data", filepath.Join(data, "nope"), backup + "2"}, envOf(nil), nil, &out, &out); err == nil {
		t.Error("backup of a missing data dir succeeded")
	}
	restored := t.TempDir()
	if err := run(context.Background(), []string{"restore", "--data", restored, "--log-format", "json", backup}, envOf(nil), nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	db, err = kv.Open(restored, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.Counter("x"); v != 7 {
		t.Errorf("restored counter = %d, want 7", v)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(bad, []byte("not a bbolt file"), 0o600)
	if err := run(context.Background(), []string{"restore", "--data", t.TempDir(), "--log-format", "json", bad}, envOf(nil), nil, &out, io.Discard); err == nil {
		t.Error("restore accepted a file that is no store")
	}
}
