package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
)

// IndexPage is what a service answers at "/": the pages a person can open
// and the API documents and endpoints a program can use.
type IndexPage struct {
	Service  string         `json:"service"`
	Version  string         `json:"version,omitempty"`
	Intro    string         `json:"description"`
	Sections []IndexSection `json:"sections"`
	Self     string         `json:"-"` // the page's own URL, for the curl hint
}

// IndexSection is a titled group of links.
type IndexSection struct {
	Title string      `json:"title"`
	Links []IndexLink `json:"links"`
}

// IndexLink is one page or endpoint. Method is set for endpoints that a
// browser cannot simply open (POST), which the HTML shows as code.
type IndexLink struct {
	Href   string `json:"href"`
	Title  string `json:"title"`
	Method string `json:"method,omitempty"`
}

//go:embed templates/index.html
var indexFS embed.FS

var indexTemplate = template.Must(template.ParseFS(indexFS, "templates/index.html"))

// WriteIndex answers GET / with p: HTML to a browser, JSON otherwise.
func WriteIndex(w http.ResponseWriter, r *http.Request, ps Problems, p IndexPage) {
	w.Header().Set("Vary", "Accept")
	if !WantsHTML(r) {
		WriteJSON(w, http.StatusOK, p)
		return
	}
	var buf bytes.Buffer
	if err := indexTemplate.Execute(&buf, p); err != nil {
		ps.Write(w, r, fmt.Errorf("render index: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// OpenAPIWithServer returns an embedded OpenAPI document with its servers
// list set to publicURL, as GET /openapi.json serves it.
func OpenAPIWithServer(doc []byte, publicURL string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, fmt.Errorf("embedded openapi.json: %w", err)
	}
	m["servers"] = []map[string]string{{"url": publicURL}}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
