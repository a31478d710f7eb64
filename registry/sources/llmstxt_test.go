package sources_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ardx-dev/ardx/registry/sources"
)

func TestReadLLMsTxtGolden(t *testing.T) {
	r := newTestReader(t, hostMux{"acme.example": serveFile(t, "llms.txt", "text/plain; charset=utf-8")})
	doc, res, err := r.ReadLLMsTxt(context.Background(), "https://acme.example/llms.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	if doc.Title != "Acme Tools" || doc.Summary == "" || doc.Details == "" || len(doc.Sections) != 4 || !doc.Sections[3].Optional {
		t.Errorf("doc %+v", doc)
	}
	kinds := map[string]string{}
	for _, s := range doc.Sections {
		for _, l := range s.Links {
			kinds[l.Name] = l.Kind
		}
	}
	want := map[string]string{
		"Quickstart": sources.LinkDoc, "Guides": sources.LinkDoc, "Invoices API": sources.LinkOpenAPI,
		"Support MCP server": sources.LinkMCPEndpoint, "Support server card": sources.LinkMCPCard,
		"Agent catalog": sources.LinkCatalog, "Release notes": sources.LinkSkill, "Changelog pack": sources.LinkSkill,
		"Triage agent": sources.LinkA2ACard, "Company history": sources.LinkDoc,
	}
	for name, k := range want {
		if kinds[name] != k {
			t.Errorf("%s: kind %q, want %q", name, kinds[name], k)
		}
	}
	if _, ok := kinds["Bad link"]; ok {
		t.Error("a javascript: link was kept")
	}
	if got := len(doc.Follow()); got != 3 {
		t.Errorf("%d links to follow, want 3 (API, MCP endpoint, catalog)", got)
	}
	if len(res.Entries) != 4 {
		t.Errorf("%d entries, want 4 (two skills, an MCP card, an A2A card)", len(res.Entries))
	}
	checkARD(t, res.Entries)
	scrub(res.Entries)
	checkGolden(t, "llms.txt.golden.json", res)
}

func TestParseLLMsTxt(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    bool
		title      string
		links      int
	}{
		{"title only", "# Just a title\n", false, "Just a title", 0},
		{"crlf and bom", "\ufeff# T\r\n\r\n> s\r\n\r\n## S\r\n- [a](https://x.example/a): n\r\n", false, "T", 1},
		{"relative link", "# T\n## S\n- [a](/a.md)\n", false, "T", 1},
		{"item styles", "# T\n## S\n* [a](https://x.example/a)\n+ [b](<https://x.example/b>)\n- [c](https://x.example/c \"title\"): notes\n- not a link\n", false, "T", 3},
		{"no title", "> summary\n## S\n", true, "", 0},
		{"h2 first", "## S\n", true, "", 0},
		{"html", "<!doctype html><h1>404</h1>", true, "", 0},
		{"empty", "", true, "", 0},
		{"not utf-8", "# T\xff\n", true, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := sources.ParseLLMsTxt([]byte(tc.body), "https://x.example/llms.txt")
			if tc.wantErr {
				if !errors.Is(err, sources.ErrNotLLMsTxt) {
					t.Errorf("error %v, want ErrNotLLMsTxt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, s := range doc.Sections {
				n += len(s.Links)
			}
			if doc.Title != tc.title || n != tc.links {
				t.Errorf("title %q links %d, want %q %d", doc.Title, n, tc.title, tc.links)
			}
		})
	}
}
