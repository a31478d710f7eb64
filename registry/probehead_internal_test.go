package registry

import (
	"testing"

	"github.com/ardx-dev/ardx/kv"
)

// TestEntryHeadEndpoints checks what the probe scan reads of an entry from
// its one decoded head: the endpoint, the MCP server a tool is probed
// through, and a paid endpoint from terms stated in metadata.
func TestEntryHeadEndpoints(t *testing.T) {
	x402 := `"pay.protocol":"x402","pay.scheme":"exact","pay.network":"eip155:8453",` +
		`"pay.asset":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913","pay.amount":"1000",` +
		`"pay.payTo":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C"`
	cases := []struct {
		name    string
		body    string
		want    string // endpoint name, "" for none
		server  string
		paid    string // paid endpoint name, "" for none
		malform bool
	}{
		{name: "mcp server, endpoint in metadata",
			body: `{"type":"application/mcp-server-card+json","url":"https://a.example/card.json","metadata":{"mcp.endpoint":"https://a.example/mcp"}}`,
			want: probeKindMCP + " https://a.example/mcp"},
		{name: "mcp server, endpoint not a string: the card is read",
			body: `{"type":"application/mcp-server-card+json","url":"https://a.example/card.json","metadata":{"mcp.endpoint":7}}`,
			want: probeKindMCP + " https://a.example/card.json"},
		{name: "mcp server, remotes",
			body: `{"type":"application/mcp-server-card+json","url":"https://a.example/card.json","data":{"remotes":[{"type":"sse","url":"https://a.example/sse"},{"type":"streamable-http","url":"https://a.example/mcp2"}]}}`,
			want: probeKindMCP + " https://a.example/mcp2"},
		{name: "mcp tool: probed through its server",
			body:   `{"type":"application/mcp-tool+json","data":{"server":{"identifier":"urn:air:a.example:srv","tool":"t"}}}`,
			server: "urn:air:a.example:srv"},
		{name: "plain url with x402 terms in metadata",
			body: `{"type":"application/json","url":"https://b.example/paid","metadata":{` + x402 + `}}`,
			want: probeKindURL + " https://b.example/paid", paid: probeKindPay + " GET https://b.example/paid"},
		{name: "plain url without terms",
			body: `{"type":"application/json","url":"https://b.example/free","metadata":{"pay.protocol":7}}`,
			want: probeKindURL + " https://b.example/free"},
		{name: "metadata not an object", body: `{"type":"application/json","url":"https://b.example/x","metadata":"no"}`, malform: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := kv.Entry{ID: "urn:air:a.example:x", Body: []byte(c.body)}
			h, ok := headOf(e)
			if ok == c.malform {
				t.Fatalf("headOf ok = %v", ok)
			}
			if c.malform {
				if _, _, ok := endpointOf(e); ok {
					t.Error("endpointOf found an endpoint in a malformed body")
				}
				return
			}
			ep, server, ok := h.endpoint()
			got := ""
			if ok {
				got = ep.name()
			}
			if got != c.want || server != c.server {
				t.Errorf("endpoint %q server %q, want %q %q", got, server, c.want, c.server)
			}
			if ep2, server2, ok2 := endpointOf(e); ok2 != ok || ep2 != ep || server2 != server {
				t.Errorf("endpointOf differs from the head's endpoint")
			}
			pe, claim, paid := h.payEndpoint(ep, ok)
			gotPaid := ""
			if paid {
				gotPaid = pe.name()
				if len(claim.terms) == 0 {
					t.Error("a paid endpoint without terms")
				}
			}
			if gotPaid != c.paid {
				t.Errorf("paid endpoint %q, want %q", gotPaid, c.paid)
			}
		})
	}
}
