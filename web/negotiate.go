package web

import (
	"net/http"
	"strconv"
	"strings"
)

// WantsHTML reports whether r's Accept header prefers text/html to
// application/json, so a page that is JSON for machines can be HTML for
// browsers. Each type's weight is taken from its most specific matching
// media range (text/html over text/* over */*), as RFC 9110 §12.5.1 says.
// HTML wins when its weight is higher, or equal and text/html (or
// application/xhtml+xml) is named explicitly; a missing Accept, "*/*" and
// anything unparsable mean JSON, which is what scripts and agents get by
// default.
func WantsHTML(r *http.Request) bool {
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	html := mediaWeight{}
	json := mediaWeight{}
	for _, line := range accept {
		for _, rng := range strings.Split(line, ",") {
			typ, q, ok := parseMediaRange(rng)
			if !ok {
				continue
			}
			html.consider(typ, q, "text/html", "text/*")
			html.consider(typ, q, "application/xhtml+xml", "application/*")
			json.consider(typ, q, "application/json", "application/*")
		}
	}
	hq, jq := html.q(), json.q()
	if hq <= 0 {
		return false
	}
	return hq > jq || hq == jq && html.spec == specExact
}

// Specificity of the range a weight came from.
const (
	specNone    = iota
	specAny     // */*
	specSubtype // type/*
	specExact   // type/subtype
)

type mediaWeight struct {
	spec   int
	weight float64
}

// consider records q if typ matches exact, sub (type/*) or */* more
// specifically than what was seen so far.
func (m *mediaWeight) consider(typ string, q float64, exact, sub string) {
	spec := specNone
	switch typ {
	case exact:
		spec = specExact
	case sub:
		spec = specSubtype
	case "*/*":
		spec = specAny
	}
	if spec == specNone || spec < m.spec {
		return
	}
	if spec > m.spec || q > m.weight {
		m.spec, m.weight = spec, q
	}
}

func (m mediaWeight) q() float64 {
	if m.spec == specNone {
		return 0
	}
	return m.weight
}

// parseMediaRange reads `type/subtype;param=v;q=0.5` into the lower-cased
// type and its weight (1 when absent).
func parseMediaRange(s string) (typ string, q float64, ok bool) {
	parts := strings.Split(s, ";")
	typ = strings.ToLower(strings.TrimSpace(parts[0]))
	if i := strings.IndexByte(typ, '/'); i <= 0 || i == len(typ)-1 {
		return "", 0, false
	}
	q = 1
	for _, p := range parts[1:] {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || w < 0 || w > 1 || w != w {
			return "", 0, false
		}
		q = w
	}
	return typ, q, true
}
