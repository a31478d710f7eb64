package ingest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/registry/ingest"
)

// The discovery parsers read what any web server sends: they must never
// panic, and must only ever return absolute http(s) URLs, a bounded number.

func checkPointers(t *testing.T, urls []string) {
	t.Helper()
	if len(urls) > 5 {
		t.Fatalf("%d pointers", len(urls))
	}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			t.Fatalf("returned %q", s)
		}
	}
}

func FuzzAgentmapURLs(f *testing.F) {
	f.Add("User-agent: *\nAgentmap: /ard.json\nagentmap:https://x.test/a.json # c\n")
	f.Add("Agentmap: javascript:alert(1)\nAgentmap: //evil.test/x\nAgentmap: http://u:p@x.test/\n")
	f.Fuzz(func(t *testing.T, body string) {
		checkPointers(t, ingest.AgentmapURLs([]byte(body), "https://d.test/robots.txt"))
	})
}

func FuzzHTMLLinks(f *testing.F) {
	f.Add(`<html><head><base href="/sub/"><link rel="ARD alternate" href="a.json"><link rel=ai-catalog href=/c.json></head></html>`)
	f.Add(`<link rel="ard" href="data:text/plain,x"><body><link rel="ard" href="/b.json">`)
	f.Fuzz(func(t *testing.T, body string) {
		ard, legacy := ingest.HTMLLinks([]byte(body), "https://d.test/")
		checkPointers(t, ard)
		checkPointers(t, legacy)
	})
}

func FuzzHeaderLinks(f *testing.F) {
	f.Add(`</a.json>; rel="ard", <https://x.test/b,c.json>; rel="ai-catalog"; title="a, b"`)
	f.Add(`<>; rel=ard, <ftp://x.test/>; rel=ard, <"quoted">; rel="ard ai-catalog"`)
	f.Fuzz(func(t *testing.T, v string) {
		ard, legacy := ingest.HeaderLinks(http.Header{"Link": {v}}, "https://d.test/")
		checkPointers(t, ard)
		checkPointers(t, legacy)
	})
}

func TestDiscoveryParsers(t *testing.T) {
	cases := []struct {
		name      string
		got, want []string
	}{
		{"agentmap relative, case-insensitive, comments", ingest.AgentmapURLs([]byte("User-agent: *\nAGENTMAP: /ard/a.json # here\nSitemap: /s.xml\nAgentmap: https://cdn.test/b.json\n"), "https://d.test/robots.txt"),
			[]string{"https://d.test/ard/a.json", "https://cdn.test/b.json"}},
		{"agentmap drops non-http", ingest.AgentmapURLs([]byte("Agentmap: javascript:x\nAgentmap: ftp://d.test/a\n"), "https://d.test/robots.txt"), nil},
		{"html head only, base honoured", first(ingest.HTMLLinks([]byte(`<head><base href="https://d.test/v/"><link rel="alternate ARD" href="m.json"></head><body><link rel="ard" href="/no.json"></body>`), "https://d.test/")),
			[]string{"https://d.test/v/m.json"}},
		{"header link with commas inside", first(ingest.HeaderLinks(http.Header{"Link": {`<https://d.test/a,b.json>; rel="ard"; title="x, y", </c.json>; rel="next"`}}, "https://d.test/")),
			[]string{"https://d.test/a,b.json"}},
		{"header legacy", second(ingest.HeaderLinks(http.Header{"Link": {`</ai.json>; rel=ai-catalog`}}, "https://d.test/")),
			[]string{"https://d.test/ai.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Join(tc.got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func first(a, _ []string) []string  { return a }
func second(_, b []string) []string { return b }

func TestSplitIdentifier(t *testing.T) {
	for in, want := range map[string]string{
		"get_forecast":     "get forecast",
		"getForecast":      "get forecast",
		"get-forecast":     "get forecast",
		"HTTPGetForecast2": "http get forecast 2",
		"XMLHttpRequest":   "xml http request",
		"":                 "",
	} {
		if got := ingest.SplitIdentifier(in); got != want {
			t.Errorf("SplitIdentifier(%q) = %q, want %q", in, got, want)
		}
	}
}
