package ingest

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/ardx-dev/ardx/registry/sources"
)

// DocBazaar is the crawl report's kind for an x402 facilitator's catalogue.
const DocBazaar = "x402-bazaar"

// bazaarPageSize is the page size a crawl asks a catalogue for (the most
// the x402 specification allows).
const bazaarPageSize = 100

// readBazaar reads the domain's x402 bazaar catalogue, when it serves one
// (an x402 facilitator: ours, or anyone's), page by page up to
// sources.MaxBazaarItems items, and stages its items as entries of the
// domain. A domain without one (404, not JSON, not a catalogue) is the
// common case and no error.
func (dc *domainCrawl) readBazaar(ctx context.Context, client *politeClient) {
	base := "https://" + dc.domain + sources.BazaarPath
	first := base + "?limit=" + strconv.Itoa(bazaarPageSize)
	var pages []*sources.BazaarPage
	seen := 0
	for offset := 0; seen < sources.MaxBazaarItems; offset += bazaarPageSize {
		u := first
		if offset > 0 {
			u += "&offset=" + strconv.Itoa(offset)
		}
		res, err := client.Get(ctx, u, "application/json")
		if err != nil || res.Status != http.StatusOK {
			if len(pages) > 0 && ctx.Err() == nil {
				// A later page failed: the listing is incomplete, so the
				// document keeps what it had (nothing is removed).
				e := err
				if e == nil {
					e = errors.New("HTTP " + strconv.Itoa(res.Status))
				}
				dc.fail(ctx, DocBazaar, base, u, e)
			}
			return
		}
		p, err := sources.ParseBazaarPage(res)
		if err != nil {
			if len(pages) > 0 {
				dc.fail(ctx, DocBazaar, base, u, err)
			}
			return
		}
		pages = append(pages, p)
		seen += len(p.Items)
		if len(p.Items) < bazaarPageSize || (p.Total >= 0 && offset+len(p.Items) >= p.Total) {
			break
		}
	}
	r, err := sources.BazaarEntries(dc.domain, pages)
	if err != nil {
		dc.fail(ctx, DocBazaar, base, first, err)
		return
	}
	if len(r.Entries) == 0 && len(pages) == 1 && len(pages[0].Items) == 0 {
		return // an empty catalogue: nothing to store, nothing to report
	}
	st := dc.stage(ctx, DocBazaar, base, first, r.Entries, r.Warnings)
	st.doc.URL = first
}
