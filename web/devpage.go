package web

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
)

// DevPage is a service's /developers page: every problem type its answers
// point at ({base}/developers#<slug>) and any other codes it answers with,
// each with what to do about it. Both services serve one; the anchors are
// the slugs and codes themselves, so a problem's type URI lands on its
// entry.
type DevPage struct {
	Title    string
	Intro    string
	Sections []DevSection
}

// DevSection is one table of the page.
type DevSection struct {
	ID      string
	Title   string
	Intro   string
	Entries []DevEntry
}

// DevEntry documents one slug or code.
type DevEntry struct {
	// ID is the slug or code; it is the entry's anchor.
	ID string
	// Status is the HTTP status it comes with ("" when it varies).
	Status string
	// Meaning says when it happens; Action what the caller should do.
	Meaning string
	Action  string
}

//go:embed templates/developers.html
var devPageHTML string

var devPageTemplate = template.Must(template.New("developers").Parse(devPageHTML))

// ServeDevPage writes page as HTML to browsers and as Markdown to everyone
// else (curl, agents, Accept: text/markdown).
func ServeDevPage(w http.ResponseWriter, r *http.Request, page DevPage) {
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Cache-Control", "public, max-age=300")
	if !WantsHTML(r) {
		w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
		_, _ = w.Write([]byte(page.Markdown()))
		return
	}
	var buf bytes.Buffer
	if err := devPageTemplate.Execute(&buf, page); err != nil {
		// The template and the page are both ours: a failure is a bug.
		panic(fmt.Sprintf("web: render developers page: %v", err))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	_, _ = w.Write(buf.Bytes())
}

// Markdown renders the page as Markdown: one table per section, each entry
// with an HTML anchor so #<slug> links work in rendered Markdown too.
func (p DevPage) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n", p.Title, p.Intro)
	for _, s := range p.Sections {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		if s.Intro != "" {
			fmt.Fprintf(&b, "%s\n\n", s.Intro)
		}
		b.WriteString("| Code | Status | When | What to do |\n|---|---|---|---|\n")
		for _, e := range s.Entries {
			status := e.Status
			if status == "" {
				status = "-"
			}
			fmt.Fprintf(&b, "| <a id=\"%s\"></a>`%s` | %s | %s | %s |\n", e.ID, e.ID, status, cell(e.Meaning), cell(e.Action))
		}
	}
	return b.String()
}

// cell keeps text inside one Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
