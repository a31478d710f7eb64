package registry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ardx-dev/ardx/index"
)

// FuzzUpstreamResults feeds arbitrary upstream answers through the checks
// and the projection a search writes: every result must come out as one
// JSON object with exactly one score, source and visibility (ours), a
// type the filter allows, and no escaped member names.
func FuzzUpstreamResults(f *testing.F) {
	f.Add([]byte(`{"results":[{"identifier":"urn:air:a.test:x","displayName":"X","type":"application/mcp-server-card+json","url":"https://a.test","scor\u0065":999,"source":"s","source":"t"}]}`))
	f.Add([]byte(`{"results":[{"identifier":"urn:air:a.test:x","displayName":"X","type":"application/a2a-agent-card+json","data":{"a":1,"a":2,"\u0061":3}}]}`))
	f.Add([]byte(`{"results":[{"identifier":"urn:ai:A.test:x","displayName":"X","type":"Application/MCP-Server-Card+JSON; q=1","url":"http://a.test","metadata":{"k":"v"},"tags":["t",1]}]}`))
	f.Add([]byte(`{"results":"nope"}`))
	f.Add([]byte(`[]`))
	up := upstream{base: "https://up.test", sourceJSON: []byte(`"https://up.test"`)}
	filter := index.Filter{"type": {"application/mcp-server-card+json"}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		items, _, err := parseUpstreamResults(raw, up, 100, filter)
		if err != nil {
			return
		}
		for _, it := range items {
			out, err := appendProjected(nil, it.body, projection{score: it.score, withScore: true, source: it.source, visibility: it.visibility})
			if err != nil {
				t.Fatalf("checked item does not project: %v: %s", err, it.body)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("result is not an object: %v: %s", err, out)
			}
			for _, name := range []string{"score", "source", "visibility"} {
				if n := bytes.Count(out, []byte(`"`+name+`"`)); n != 1 {
					t.Fatalf("%q appears %d times: %s", name, n, out)
				}
			}
			if string(m["source"]) != `"https://up.test"` || string(m["visibility"]) != `"public"` {
				t.Fatalf("our members forged: %s", out)
			}
			var typ string
			_ = json.Unmarshal(m["type"], &typ)
			if typ != "application/mcp-server-card+json" {
				t.Fatalf("filter not applied: %s", out)
			}
			for k := range m {
				if strings.ContainsAny(k, `\"`) {
					t.Fatalf("odd member name %q: %s", k, out)
				}
			}
		}
	})
}

// BenchmarkUpstreamResults measures checking a full upstream page (100
// results) against a type filter: the cost federation adds per upstream.
func BenchmarkUpstreamResults(b *testing.B) {
	var items []string
	for i := range 100 {
		items = append(items, `{"identifier":"urn:air:up.test:tool-`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+`","displayName":"Tool","type":"application/mcp-server-card+json","url":"https://up.test/card.json","description":"A tool that forecasts the weather for any city, hourly and daily.","tags":["weather","forecast"],"capabilities":["get_forecast"],"metadata":{"region":"eu"},"score":`+strings.Repeat("9", 1+i%2)+`}`)
	}
	raw := []byte(`{"results":[` + strings.Join(items, ",") + `]}`)
	up := upstream{base: "https://up.test", sourceJSON: []byte(`"https://up.test"`)}
	filter := index.Filter{"type": {"application/mcp-server-card+json"}}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseUpstreamResults(raw, up, 100, filter); err != nil {
			b.Fatal(err)
		}
	}
}
