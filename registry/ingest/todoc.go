package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/bench"
	"github.com/ardx-dev/ardx/registry/pay"
)

// Bounds on the text ToDoc lifts out of an entry's inline data, so that one
// publisher's huge card cannot dominate the index or its memory.
const (
	maxDataTexts     = 200
	maxDataTextBytes = 32 << 10
	maxDataDepth     = 6
)

// entryFields are the members of a stored entry body that the index reads.
type entryFields struct {
	Identifier            string                     `json:"identifier"`
	DisplayName           string                     `json:"displayName"`
	Description           string                     `json:"description"`
	Type                  string                     `json:"type"`
	Version               string                     `json:"version"`
	Tags                  []string                   `json:"tags"`
	Capabilities          []string                   `json:"capabilities"`
	RepresentativeQueries []string                   `json:"representativeQueries"`
	Metadata              map[string]json.RawMessage `json:"metadata"`
	TrustManifest         *struct {
		IdentityType string `json:"identityType"`
		Attestations []struct {
			Type string `json:"type"`
		} `json:"attestations"`
	} `json:"trustManifest"`
	Data json.RawMessage `json:"data"`
}

// ToDoc converts a stored entry into what the index holds: the URN's name
// and publisher, the searchable text, normalised tags and capabilities
// (lower-case, trimmed, deduplicated: Bleve keyword fields are
// case-sensitive), metadata scalars as strings, trust facets, and text
// lifted from inline data (operation method and path, tool and skill names
// and descriptions). Representative queries frozen as benchmark queries of
// the entry are held out (bench.HoldOut).
func ToDoc(e kv.Entry) (index.Doc, error) {
	var f entryFields
	if err := json.Unmarshal(e.Body, &f); err != nil {
		return index.Doc{}, fmt.Errorf("ingest: entry %q: body: %w", e.ID, err)
	}
	id := e.ID
	if id == "" {
		id = f.Identifier
	}
	d := index.Doc{
		ID:           id,
		Name:         urnName(id),
		DisplayName:  f.DisplayName,
		Description:  f.Description,
		Capabilities: keywords(f.Capabilities),
		Tags:         keywords(f.Tags),
		Queries:      bench.HoldOut(id, nonEmpty(f.RepresentativeQueries)),
		Publisher:    urnPublisher(id),
		Type:         f.Type,
		Version:      f.Version,
		Owner:        e.Owner,
		CreatedAt:    e.CreatedAt,
		UpdatedAt:    e.UpdatedAt,
	}
	if len(f.Metadata) > 0 {
		d.Metadata = make(map[string]string, len(f.Metadata))
		for k, raw := range f.Metadata {
			if v, ok := scalarString(raw); ok {
				d.Metadata[k] = v
			}
		}
	}
	d.PayProtocols, d.PayNetworks, d.PayPrices = pay.Summary(pay.FromEntry(f.Type, f.Data, f.Metadata))
	if tm := f.TrustManifest; tm != nil {
		d.IdentityType = tm.IdentityType
		var types []string
		for _, a := range tm.Attestations {
			types = append(types, a.Type)
		}
		d.AttestationTypes = keywords(types)
	}
	var v any
	if len(f.Data) > 0 {
		t := &textCollector{}
		dec := json.NewDecoder(bytes.NewReader(f.Data))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			t.walk(v, 0)
		}
		d.Text = t.out
		// Identifiers of callables are written get_forecast or listPets;
		// their words are what a capability query says.
		switch f.Type {
		case TypeMCPTool, TypeOpenAPIOperation:
			if m, ok := v.(map[string]any); ok {
				for _, k := range []string{"name", "operationId"} {
					if s, ok := m[k].(string); ok {
						if w := SplitIdentifier(s); w != "" && w != s {
							d.Text = append(d.Text, w)
						}
					}
				}
			}
		}
	}
	return d, nil
}

// SplitIdentifier splits a code identifier into lower-case words:
// "get_forecast", "getForecast", "get-forecast" and "HTTPGetForecast2"
// give "get forecast" (the last "http get forecast 2").
func SplitIdentifier(s string) string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if i > 0 && len(cur) > 0 {
				prev := rs[i-1]
				lowerToUpper := unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev))
				acronymEnd := unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1])
				digitEdge := unicode.IsDigit(r) != unicode.IsDigit(prev)
				if lowerToUpper || acronymEnd || digitEdge {
					flush()
				}
			}
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return strings.Join(words, " ")
}

// urnName is the last segment of a URN (the entry's name).
func urnName(id string) string {
	if i := strings.LastIndexByte(id, ':'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// urnPublisher is the publisher segment of a urn:air: identifier.
func urnPublisher(id string) string {
	rest, ok := strings.CutPrefix(id, "urn:air:")
	if !ok {
		return ""
	}
	pub, _, _ := strings.Cut(rest, ":")
	return pub
}

func keywords(in []string) []string {
	seen := make(map[string]bool, len(in))
	var out []string
	for _, s := range in {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

func nonEmpty(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// scalarString stringifies a JSON scalar; null, objects and arrays give false.
func scalarString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case 't', 'f':
		return string(raw), string(raw) == "true" || string(raw) == "false"
	case 'n', '{', '[':
		return "", false
	default:
		return string(raw), true // a number, kept as written
	}
}

// textCollector gathers the strings of inline data that describe what an
// entry does: names, titles, summaries, descriptions, operation ids, and an
// operation's "METHOD path" (the path alone would only repeat it).
type textCollector struct {
	out   []string
	bytes int
}

var textKeys = map[string]bool{
	"name": true, "title": true, "summary": true, "description": true,
	"operationid": true, "displayname": true, "examples": true,
	"tags": true,
}

func (t *textCollector) add(s string) {
	s = strings.TrimSpace(s)
	if s == "" || len(t.out) >= maxDataTexts || t.bytes+len(s) > maxDataTextBytes {
		return
	}
	t.out = append(t.out, s)
	t.bytes += len(s)
}

func (t *textCollector) walk(v any, depth int) {
	if depth > maxDataDepth {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if m, ok := v["method"].(string); ok {
			if p, ok := v["path"].(string); ok {
				t.add(strings.ToUpper(m) + " " + p)
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic docs for identical bodies
		for _, k := range keys {
			switch c := v[k].(type) {
			case string:
				if textKeys[strings.ToLower(k)] {
					t.add(c)
				}
			case []any:
				if textKeys[strings.ToLower(k)] {
					for _, s := range c {
						if s, ok := s.(string); ok {
							t.add(s)
						}
					}
				}
				t.walk(c, depth+1)
			case map[string]any:
				t.walk(c, depth+1)
			}
		}
	case []any:
		for _, c := range v {
			t.walk(c, depth+1)
		}
	}
}
