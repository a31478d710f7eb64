package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

const goodManifest = `{"specVersion":"1.0","host":{"displayName":"Inbox"},"entries":[{"identifier":"urn:air:inbox.test:tool","displayName":"Inbox Tool","type":"application/mcp-server-card+json","url":"https://inbox.test/card.json","representativeQueries":["inbox tool","drop a file"]}]}`

// TestIngestExitCodes: every source error fails the command.
func TestIngestExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	notJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(goodManifest), 0o600)
	os.WriteFile(notJSON, []byte("not json"), 0o600)
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"good file", []string{good}, ""},
		{"missing file", []string{filepath.Join(dir, "missing.json")}, "1 source(s) failed"},
		{"not JSON", []string{notJSON}, "1 source(s) failed"},
		{"refused by the fetch guard", []string{srv.URL + "/ard.json"}, "1 source(s) failed"},
		{"404", []string{"--unsafe-allow-private-fetch", srv.URL + "/ard.json"}, "1 source(s) failed"},
		{"one good one bad", []string{good, notJSON}, "1 source(s) failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"ingest", "--data", t.TempDir(), "--log-format", "text"}, tc.args...)
			err := run(context.Background(), args, envOf(nil), nil, &out, &out)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q; output:\n%s", err, tc.wantErr, out.String())
			}
		})
	}
}

// TestIngestWhileServing: ingest and reindex against a held data dir say
// why and what to do; the running server ingests what lands in its inbox.
func TestIngestWhileServing(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var serverOut bytes.Buffer
	go func() {
		done <- run(ctx, []string{"registry", "--data", data, "--registry-addr", "127.0.0.1:0", "--no-default-corpus",
			"--public-registries", "none", "--log-format", "json"}, envOf(nil), nil, &serverOut, &serverOut)
	}()
	inbox := filepath.Join(data, "inbox")
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(inbox, "done")); err == nil {
			break
		}
		if i == 1000 {
			t.Fatalf("server did not start: %s", serverOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, cmd := range [][]string{{"ingest", "x.json"}, {"reindex"}} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{cmd[0], "--data", data}, cmd[1:]...), envOf(nil), nil, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "another ardx process") || strings.Contains(err.Error(), "timeout") {
			t.Errorf("%s: %v", cmd[0], err)
		}
		if cmd[0] == "ingest" && (err == nil || !strings.Contains(err.Error(), inbox)) {
			t.Errorf("ingest does not name the inbox: %v", err)
		}
	}
	tmp := filepath.Join(data, ".drop.json")
	os.WriteFile(tmp, []byte(goodManifest), 0o600)
	if err := os.Rename(tmp, filepath.Join(inbox, "drop.json")); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(inbox, "done", "drop.json.report.txt")); err == nil {
			break
		}
		if i == 1000 {
			t.Fatalf("inbox file not ingested: %s", serverOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(data, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.GetEntries([]string{"urn:air:inbox.test:tool"})
	if err != nil || len(got) != 1 {
		t.Fatalf("entry not stored: %v %v", got, err)
	}
}
