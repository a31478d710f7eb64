package facilitator_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator"
)

// snippetParams are the values the snippet tests render with: the dev
// chain's test USDC and the test facilitator URL.
func snippetParams(tb testing.TB) facilitator.SnippetParams {
	dc := mustDevChain(tb)
	return facilitator.SnippetParams{
		FacilitatorURL: publicURL, Network: dc.Network.ID(), Asset: dc.Network.Asset(),
		TokenName: dc.Network.TokenName(), TokenVersion: dc.Network.TokenVersion(),
		Decimals: dc.Network.Decimals(), Amount: "1000", PriceUSD: "0.001",
	}
}

func TestIntegrationSnippets(t *testing.T) {
	p := snippetParams(t)
	tests := []struct {
		framework string
		want      []string
	}{
		{"express", []string{`from "@x402/express"`, "paymentMiddleware", "app.get(\"/paid\""}},
		{"hono", []string{`from "@x402/hono"`, "paymentMiddleware", "new Hono()"}},
		{"next", []string{`from "@x402/next"`, "withX402", "export const GET"}},
		{"go", []string{"package main", `"/verify"`, `"/settle"`, "PAYMENT-SIGNATURE", "PAYMENT-RESPONSE"}},
		{" Express ", []string{`from "@x402/express"`}},
	}
	for _, tc := range tests {
		t.Run(tc.framework, func(t *testing.T) {
			sn, err := facilitator.IntegrationSnippet(tc.framework, p)
			if err != nil {
				t.Fatal(err)
			}
			common := []string{publicURL, p.Network, p.Asset, `"1000"`, p.TokenName}
			for _, s := range append(common, tc.want...) {
				if !strings.Contains(sn.Code, s) {
					t.Errorf("snippet lacks %q:\n%s", s, sn.Code)
				}
			}
			if sn.Install == "" || sn.Filename == "" || sn.Title == "" {
				t.Errorf("snippet metadata %+v", sn)
			}
		})
	}
	if _, err := facilitator.IntegrationSnippet("rails", p); err == nil {
		t.Fatal("unknown framework accepted")
	}
}

// TestGoSnippetVets writes the Go snippet into a module of its own (stdlib
// only, no replace) and runs go vet on it.
func TestGoSnippetVets(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	sn, err := facilitator.IntegrationSnippet("go", snippetParams(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module paid\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(sn.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet on the Go snippet: %v\n%s\n%s", err, out, sn.Code)
	}
}

func TestIntegratePage(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name, accept, query string
		wantStatus          int
		wantType            string
		want                []string
	}{
		{"json by default", "", "", 200, "application/json", []string{`"framework":"express"`, `"framework":"go"`, publicURL, `"network":"eip155:1337"`}},
		{"html for browsers", "text/html,application/xhtml+xml,*/*;q=0.8", "", 200, "text/html; charset=utf-8",
			[]string{"<h2>Express</h2>", "<h2>Hono</h2>", "<h2>Next.js</h2>", "<h2>Go net/http</h2>", "@x402/next", "&#34;/settle&#34;"}},
		{"markdown", "text/markdown", "", 200, "text/markdown; charset=utf-8", []string{"## Express", "```ts", "```go", "npm install"}},
		{"by v1 name", "", "?network=dev", 200, "application/json", []string{`"network":"eip155:1337"`}},
		{"unknown network", "", "?network=eip155:1", 422, "application/problem+json", []string{`"field":"network"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.accept != "" {
				hdr["Accept"] = tc.accept
			}
			a := do(t, "GET", env.URL+"/integrate"+tc.query, nil, hdr)
			if a.Status != tc.wantStatus || a.Header.Get("Content-Type") != tc.wantType {
				t.Fatalf("status %d type %q, want %d %q: %s", a.Status, a.Header.Get("Content-Type"), tc.wantStatus, tc.wantType, a.Body)
			}
			for _, s := range tc.want {
				if !strings.Contains(string(a.Body), s) {
					t.Errorf("body lacks %q", s)
				}
			}
		})
	}
}
