package facilitator

import (
	"bytes"
	"embed"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"text/template"

	"github.com/ardx-dev/ardx/web"
)

// Frameworks are the names IntegrationSnippet and the integration_snippet
// tool accept, in the order /integrate shows them.
var Frameworks = []string{"express", "hono", "next", "go"}

// snippetMeta describes one framework's snippet; the code itself lives in
// snippets/<name>.tmpl, the one place /integrate and the MCP tool read.
var snippetMeta = map[string]Snippet{
	"express": {Title: "Express", Language: "typescript", Filename: "server.ts",
		Install: "npm install express @x402/express @x402/core @x402/evm"},
	"hono": {Title: "Hono", Language: "typescript", Filename: "server.ts",
		Install: "npm install hono @hono/node-server @x402/hono @x402/core @x402/evm"},
	"next": {Title: "Next.js", Language: "typescript", Filename: "app/api/paid/route.ts",
		Install: "npm install next @x402/next @x402/core @x402/evm"},
	"go": {Title: "Go net/http", Language: "go", Filename: "main.go",
		Install: "go mod init paid && go run main.go"},
}

//go:embed snippets/*.tmpl
var snippetFS embed.FS

var snippetTemplates = template.Must(template.New("").Option("missingkey=error").ParseFS(snippetFS, "snippets/*.tmpl"))

// SnippetParams are what a snippet is filled with: this facilitator's URL
// and one network's terms.
type SnippetParams struct {
	FacilitatorURL string
	Network        string // CAIP-2 id
	Asset          string
	TokenName      string
	TokenVersion   string
	Decimals       uint8
	// Amount is the price in the asset's smallest unit; PriceUSD the same
	// in dollars, for the comment.
	Amount   string
	PriceUSD string
}

// Snippet is the shortest path from nothing to a paid route in one
// framework.
type Snippet struct {
	Framework string `json:"framework"`
	Title     string `json:"title"`
	Language  string `json:"language"`
	Filename  string `json:"filename"`
	Install   string `json:"install"`
	Code      string `json:"code"`
}

// ErrUnknownFramework is returned for a framework not in Frameworks.
var ErrUnknownFramework = fmt.Errorf("unknown framework (known: %s)", strings.Join(Frameworks, ", "))

// IntegrationSnippet renders framework's snippet with p.
func IntegrationSnippet(framework string, p SnippetParams) (Snippet, error) {
	framework = strings.ToLower(strings.TrimSpace(framework))
	meta, ok := snippetMeta[framework]
	if !ok {
		return Snippet{}, fmt.Errorf("%q: %w", framework, ErrUnknownFramework)
	}
	name := framework + ".ts.tmpl"
	if meta.Language == "go" {
		name = "go.go.tmpl"
	}
	var buf bytes.Buffer
	if err := snippetTemplates.ExecuteTemplate(&buf, name, p); err != nil {
		return Snippet{}, fmt.Errorf("render %s snippet: %w", framework, err)
	}
	meta.Framework = framework
	meta.Code = buf.String()
	return meta, nil
}

// snippetPrice is the price the snippets show: a thousandth of the asset's
// unit (0.001 USD for USDC), the price of the echo merchant.
func snippetPrice(decimals uint8) (amount, usd string) {
	if decimals < 3 {
		return "1", new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)).FloatString(int(decimals))
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals-3)), nil).String(), "0.001"
}

// snippetParams fills the snippets for network (a CAIP-2 id or v1 name; ""
// picks the first network that can settle now, else the first configured).
func (s *Service) snippetParams(network string) (SnippetParams, bool) {
	var pick NetworkFacts
	for _, n := range s.cfg.Networks {
		switch {
		case network != "":
			if n.ID() == network || n.V1Name() != "" && n.V1Name() == network {
				pick = n
			}
		case pick == nil:
			pick = n
		default:
			if ok, _ := pick.Available(); !ok {
				if ok, _ := n.Available(); ok {
					pick = n
				}
			}
		}
	}
	if pick == nil {
		return SnippetParams{}, false
	}
	amount, usd := snippetPrice(pick.Decimals())
	return SnippetParams{
		FacilitatorURL: s.cfg.PublicURL,
		Network:        pick.ID(),
		Asset:          pick.Asset(),
		TokenName:      pick.TokenName(),
		TokenVersion:   pick.TokenVersion(),
		Decimals:       pick.Decimals(),
		Amount:         amount,
		PriceUSD:       usd,
	}, true
}

// IntegrateDocument is the JSON body of GET /integrate.
type IntegrateDocument struct {
	Facilitator string    `json:"facilitator"`
	Network     string    `json:"network"`
	Networks    []string  `json:"networks"`
	Snippets    []Snippet `json:"snippets"`
}

// integrate builds the /integrate document for network ("" for the
// default); ok is false when the network is not served here.
func (s *Service) integrate(network string) (IntegrateDocument, bool, error) {
	p, ok := s.snippetParams(network)
	if !ok {
		return IntegrateDocument{}, false, nil
	}
	doc := IntegrateDocument{Facilitator: s.cfg.PublicURL, Network: p.Network}
	for _, n := range s.cfg.Networks {
		doc.Networks = append(doc.Networks, n.ID())
	}
	for _, f := range Frameworks {
		sn, err := IntegrationSnippet(f, p)
		if err != nil {
			return IntegrateDocument{}, false, err
		}
		doc.Snippets = append(doc.Snippets, sn)
	}
	return doc, true, nil
}

// handleIntegrate handles "GET /integrate": HTML for browsers, Markdown for
// Accept: text/markdown, JSON otherwise. ?network= picks the network the
// snippets pay on.
func (s *Service) handleIntegrate(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Vary", "Accept")
	network := r.URL.Query().Get("network")
	doc, ok, err := s.integrate(network)
	if err != nil {
		s.problems.Write(w, r, err)
		return
	}
	if !ok {
		var ids []string
		for _, n := range s.cfg.Networks {
			ids = append(ids, n.ID())
		}
		s.problems.Write(w, r, s.problems.Invalid("network is not served by this facilitator",
			web.FieldError{Field: "network", Message: fmt.Sprintf("%q is not one of %s", network, strings.Join(ids, ", "))}))
		return
	}
	switch {
	case web.WantsHTML(r):
		s.renderPage(w, r, "integrate.html", doc)
	case acceptsMarkdown(r):
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=60")
		_, _ = w.Write([]byte(doc.Markdown()))
	default:
		w.Header().Set("Cache-Control", "public, max-age=60")
		web.WriteJSON(w, http.StatusOK, doc)
	}
}

// acceptsMarkdown reports whether the Accept header names text/markdown.
func acceptsMarkdown(r *http.Request) bool {
	return slices.ContainsFunc(r.Header.Values("Accept"), func(v string) bool {
		return strings.Contains(strings.ToLower(v), "text/markdown")
	})
}

// Markdown renders the document as Markdown, one section per framework.
func (d IntegrateDocument) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# A paid route in four frameworks\n\nEach snippet sells one route through the facilitator at %s on `%s`. Set `PAY_TO` to the address that receives the payments.\n", d.Facilitator, d.Network)
	for _, sn := range d.Snippets {
		lang := sn.Language
		if lang == "typescript" {
			lang = "ts"
		}
		fmt.Fprintf(&b, "\n## %s\n\n```sh\n%s\n```\n\n`%s`:\n\n```%s\n%s```\n", sn.Title, sn.Install, sn.Filename, lang, sn.Code)
	}
	return b.String()
}
