package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/ardx-dev/ardx/registry/pay"
	"github.com/ardx-dev/ardx/web"
)

// An x402 facilitator's bazaar catalogue (GET /discovery/resources) lists
// the paid resources settled through it. Each item becomes an entry of
// pay.TypeX402Resource published by the facilitator's domain (it is the
// facilitator that vouches for the listing; the resource itself lives on
// the merchant's host), with the item as data (ARD allows url or data, not
// both: the resource URL is data.resource) and the page fetch cited.

// BazaarPath is where a facilitator serves its catalogue.
const BazaarPath = "/discovery/resources"

// Bounds on what one catalogue may add.
const (
	MaxBazaarItems     = 1000
	maxBazaarItemBytes = 16 << 10
)

// ErrNotBazaar means a document is not a bazaar catalogue page.
var ErrNotBazaar = errors.New("not an x402 bazaar catalogue")

// BazaarPage is one decoded page of a catalogue.
type BazaarPage struct {
	Items      []json.RawMessage
	Total      int // pagination.total; -1 when the page does not say
	Provenance Provenance
}

// ParseBazaarPage decodes a fetched catalogue page.
func ParseBazaarPage(res *web.FetchResult) (*BazaarPage, error) {
	var doc struct {
		X402Version int               `json:"x402Version"`
		Items       []json.RawMessage `json:"items"`
		Pagination  *struct {
			Total *int `json:"total"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(res.Body, &doc); err != nil || doc.Items == nil {
		return nil, fmt.Errorf("%s: %w", res.URL, ErrNotBazaar)
	}
	p := &BazaarPage{Items: doc.Items, Total: -1, Provenance: ProvenanceOf(res, "GET")}
	if doc.Pagination != nil && doc.Pagination.Total != nil {
		p.Total = *doc.Pagination.Total
	}
	return p, nil
}

// BazaarEntries turns catalogue pages of the facilitator at domain into
// entries. Items without a usable resource URL or x402 terms, and items
// over 16 KiB, are skipped with a warning.
func BazaarEntries(domain string, pages []*BazaarPage) (*Result, error) {
	domain, ok := normalizeDomain(domain)
	if !ok {
		return nil, fmt.Errorf("%q cannot anchor urn:air identifiers", domain)
	}
	res := &Result{}
	ids := idSet{}
	prefix := "urn:air:" + domain + ":x402:"
	skipped := 0
	for _, p := range pages {
		for _, raw := range p.Items {
			if len(res.Entries) >= MaxBazaarItems {
				skipped++
				continue
			}
			e, ok := bazaarEntry(raw, p.Provenance, domain)
			if !ok {
				skipped++
				continue
			}
			e.Identifier = ids.unique(prefix, e.Identifier)
			res.Entries = append(res.Entries, e)
		}
	}
	if skipped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d catalogue item(s) skipped: no http(s) resource, no readable x402 terms, over 16 KiB, or past %d items", skipped, MaxBazaarItems))
	}
	return res, nil
}

func bazaarEntry(raw json.RawMessage, prov Provenance, domain string) (Entry, bool) {
	if len(raw) > maxBazaarItemBytes {
		return Entry{}, false
	}
	var it pay.CatalogueItem
	if json.Unmarshal(raw, &it) != nil {
		return Entry{}, false
	}
	u, err := url.Parse(it.Resource)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return Entry{}, false
	}
	version := it.X402Version
	if version == 0 {
		version = 2
	}
	if _, err := pay.FromAccepts(version, it.Accepts); err != nil {
		return Entry{}, false
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return Entry{}, false
	}
	what := strings.ToUpper(it.Method)
	if it.Type == "mcp" {
		what = "MCP tool " + it.ToolName + " at"
	} else if what == "" {
		what = "GET"
	}
	name := slug(strings.ToLower(firstNonEmptyString(it.Method, it.ToolName)) + "-" + u.Host + u.EscapedPath())
	display := clip(collapseSpace(it.Description), 120)
	if display == "" {
		display = what + " " + u.Host + u.EscapedPath()
	}
	desc := clip(collapseSpace(it.Description), maxDescriptionLen)
	listed := fmt.Sprintf("Paid resource (x402): %s %s, listed by the facilitator %s.", what, it.Resource, domain)
	if desc == "" {
		desc = listed
	} else {
		desc += " " + listed
	}
	meta := prov.metadata("x402-bazaar")
	meta["x402.resource"] = it.Resource
	return Entry{
		Identifier:            name,
		DisplayName:           display,
		Type:                  pay.TypeX402Resource,
		Data:                  json.RawMessage(compact.Bytes()),
		Description:           desc,
		Tags:                  []string{"x402", "paid"},
		RepresentativeQueries: queries(firstSentence(it.Description)),
		Metadata:              meta,
	}, true
}

func firstNonEmptyString(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
