package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ardx-dev/ardx/kv"
)

// fixturePublisher serves registry/ingest's fixture.test site on loopback,
// with a live MCP server (the official Go SDK) at /mcp.
func fixturePublisher(tb testing.TB) *httptest.Server {
	tb.Helper()
	files := http.FileServer(http.Dir("registry/ingest/testdata/publishers/fixture.test"))
	type args struct {
		City string `json:"city"`
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "fixture-weather", Version: "3.0.0"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "get_forecast", Description: "Get the weather forecast for a city."},
			func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Host, "fixture.test") {
			http.Error(w, "unknown host "+r.Host, http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path == "/mcp" {
			mcpHandler.ServeHTTP(w, r)
			return
		}
		files.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func TestCrawlCommand(t *testing.T) {
	srv := fixturePublisher(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"crawl", "--data", dir, "--log-level", "error", "--delay", "0",
		"--resolve", "fixture.test=" + srv.Listener.Addr().String(), "fixture.test"}
	if err := run(context.Background(), args, envOf(nil), nil, &stdout, &stderr); err != nil {
		t.Fatalf("crawl: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "fixture.test: manifest via robots-agentmap") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "crawl [1/1] fixture.test:") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}

	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The domain keeps its name: its URNs are urn:air:fixture.test:...
	for _, id := range []string{
		"urn:air:fixture.test:api:weather",
		"urn:air:fixture.test:api:getForecast",
		"urn:air:fixture.test:api:getTideTable",
		"urn:air:fixture.test:mcp:weather:get_forecast",
	} {
		e, err := db.GetEntry(id)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if id == "urn:air:fixture.test:api:getForecast" {
			var b struct {
				Data struct {
					Method  string   `json:"method"`
					Servers []string `json:"servers"`
				} `json:"data"`
			}
			json.Unmarshal(e.Body, &b)
			if b.Data.Method != "GET" || len(b.Data.Servers) != 1 {
				t.Errorf("operation body %s", e.Body)
			}
		}
	}
}

func TestCrawlCommandErrors(t *testing.T) {
	srv := fixturePublisher(t)
	cases := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"resolve without an address", []string{"--resolve", "fixture.test", "fixture.test"}, "DOMAIN=127.0.0.1:PORT", ""},
		{"resolve to a non-loopback address", []string{"--resolve", "fixture.test=10.0.0.1:80", "fixture.test"}, "loopback", ""},
		{"a domain that is not pinned and not public", []string{"--resolve", "fixture.test=" + srv.Listener.Addr().String(), "fixture.test", "localhost"},
			"1 of 2 domain(s)", "localhost: error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"crawl", "--data", t.TempDir(), "--log-level", "error", "--delay", "0"}, tc.args...)
			err := run(context.Background(), args, envOf(nil), nil, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout:\n%s", stdout.String())
			}
		})
	}
}

func TestParseResolve(t *testing.T) {
	got, err := parseResolve([]string{"Fixture.Test.=127.0.0.1:8080", "b.test=[::1]:9"})
	if err != nil || got["fixture.test"] != "127.0.0.1:8080" || got["b.test"] != "[::1]:9" {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"x.test=127.0.0.1", "=127.0.0.1:1", "x.test=example.com:80", "x.test=192.168.1.1:80", "http://x.test=127.0.0.1:1"} {
		if _, err := parseResolve([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
