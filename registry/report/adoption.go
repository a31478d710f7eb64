package report

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/sources"
)

// kindAdoption keys the daily adoption snapshots: a day → JSON.
const kindAdoption = 'a'

// Adoption counts what the public entries of the index publish.
type Adoption struct {
	Date       string         `json:"date"`
	TakenAt    time.Time      `json:"takenAt"`
	Entries    int            `json:"entries"`
	Publishers AdoptionPubs   `json:"publishers"`
	MCP        AdoptionMCP    `json:"mcpServers"`
	A2ACards   int            `json:"a2aCards"`
	OpenAPI    int            `json:"openapiOperations"`
	LLMsTxt    AdoptionCount  `json:"llmsTxt"`
	Trust      AdoptionCount  `json:"trustManifests"`
	RepQueries AdoptionCount  `json:"representativeQueries"`
	ByType     map[string]int `json:"byType"`
}

// AdoptionPubs counts publishers by where their manifest was read.
type AdoptionPubs struct {
	Total int `json:"total"`
	// ARD publish /.well-known/ard.json; LegacyOnly only the older
	// /.well-known/ai-catalog.json; Other neither (an llms.txt, an MCP
	// card, an API description, a file given to ingest).
	ARD        int `json:"ardJson"`
	LegacyOnly int `json:"legacyOnly"`
	Other      int `json:"other"`
}

// AdoptionMCP counts MCP servers by transport and authentication.
type AdoptionMCP struct {
	Total       int            `json:"total"`
	ByTransport map[string]int `json:"byTransport"`
	ByAuth      map[string]int `json:"byAuth"`
}

// AdoptionCount counts entries and the publishers they belong to.
type AdoptionCount struct {
	Entries    int `json:"entries"`
	Publishers int `json:"publishers"`
}

type entryFacts struct {
	Type                  string          `json:"type"`
	URL                   string          `json:"url"`
	TrustManifest         json.RawMessage `json:"trustManifest"`
	RepresentativeQueries []string        `json:"representativeQueries"`
	Metadata              map[string]any  `json:"metadata"`
	Data                  json.RawMessage `json:"data"`
}

// ComputeAdoption counts the public entries of db as of now.
func ComputeAdoption(db *kv.DB, now time.Time) (Adoption, error) {
	a := Adoption{Date: DayOf(now).String(), TakenAt: now.UTC(), ByType: map[string]int{},
		MCP: AdoptionMCP{ByTransport: map[string]int{}, ByAuth: map[string]int{}}}
	type pubFacts struct{ ard, legacy, llms, trust, rq bool }
	pubs := map[string]*pubFacts{}
	err := db.ForEachEntry(func(e kv.Entry) error {
		if e.Owner != "" {
			return nil // private entries are their owner's business
		}
		var f entryFacts
		if json.Unmarshal(e.Body, &f) != nil {
			return nil
		}
		a.Entries++
		a.ByType[f.Type]++
		pub := PublisherOf(e.ID)
		p := pubs[pub]
		if p == nil {
			p = &pubFacts{}
			pubs[pub] = p
		}
		if u, err := url.Parse(e.Source); err == nil {
			switch u.Path {
			case "/.well-known/ard.json":
				p.ard = true
			case "/.well-known/ai-catalog.json":
				p.legacy = true
			}
		}
		if kind, _ := f.Metadata["source.kind"].(string); kind == "llms.txt" {
			a.LLMsTxt.Entries++
			p.llms = true
		}
		if len(f.TrustManifest) > 0 && string(f.TrustManifest) != "null" {
			a.Trust.Entries++
			p.trust = true
		}
		if len(f.RepresentativeQueries) > 0 {
			a.RepQueries.Entries++
			p.rq = true
		}
		switch f.Type {
		case sources.TypeMCPServer:
			a.MCP.Total++
			a.MCP.ByTransport[mcpTransport(f)]++
			a.MCP.ByAuth[mcpAuth(f)]++
		case sources.TypeA2AAgent:
			a.A2ACards++
		case sources.TypeOpenAPIOperation:
			a.OpenAPI++
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	for _, p := range pubs {
		a.Publishers.Total++
		switch {
		case p.ard:
			a.Publishers.ARD++
		case p.legacy:
			a.Publishers.LegacyOnly++
		default:
			a.Publishers.Other++
		}
		if p.llms {
			a.LLMsTxt.Publishers++
		}
		if p.trust {
			a.Trust.Publishers++
		}
		if p.rq {
			a.RepQueries.Publishers++
		}
	}
	return a, nil
}

// mcpTransport is the transport an MCP server entry offers: what a live
// exchange saw, else the first remote of its card, else "unknown".
func mcpTransport(f entryFacts) string {
	if t, _ := f.Metadata["mcp.transport"].(string); t != "" {
		return t
	}
	var d struct {
		Remotes []struct {
			Type string `json:"type"`
		} `json:"remotes"`
	}
	if json.Unmarshal(f.Data, &d) == nil && len(d.Remotes) > 0 && d.Remotes[0].Type != "" {
		return strings.ToLower(d.Remotes[0].Type)
	}
	return "unknown"
}

// mcpAuth is whether a live exchange with the server needed a key:
// required, none, or unknown when no exchange was made.
func mcpAuth(f entryFacts) string {
	if req, _ := f.Metadata["mcp.authRequired"].(bool); req {
		return "required"
	}
	if _, ok := f.Metadata["mcp.handshake"]; ok {
		return "none"
	}
	return "unknown"
}

func adoptionKey(d Day) []byte {
	return binary.BigEndian.AppendUint32([]byte{kindAdoption}, uint32(d))
}

// SaveAdoption stores a as the snapshot of its day, replacing an earlier
// one of the same day.
func SaveAdoption(db *kv.DB, a Adoption) error {
	t, err := time.Parse("2006-01-02", a.Date)
	if err != nil {
		return err
	}
	val, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return db.UpdateReports(func(rb kv.Reports) error { return rb.Put(adoptionKey(DayOf(t)), val) })
}

// AdoptionHistory returns the stored snapshots of the window, oldest first.
func AdoptionHistory(db *kv.DB, w Window) ([]Adoption, error) {
	var out []Adoption
	err := db.ViewReports(func(rb kv.Reports) error {
		return rb.Scan([]byte{kindAdoption}, adoptionKey(w.From), func(k, v []byte) (bool, error) {
			if len(k) != 5 || Day(binary.BigEndian.Uint32(k[1:])) > w.To {
				return false, nil
			}
			var a Adoption
			if err := json.Unmarshal(v, &a); err != nil {
				return false, fmt.Errorf("report: adoption snapshot: %w", err)
			}
			out = append(out, a)
			return true, nil
		})
	})
	return out, err
}
