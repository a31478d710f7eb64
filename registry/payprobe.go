package registry

// pay:verified (issue 18). A paid resource (an entry stating x402 terms,
// with a URL to call) is probed with the unpaid request its 402 answers;
// the probe records the terms the 402 stated (kv.ProbeResult.PayTerms).
// An entry is live while the last 402 seen, within payLiveWindow, states
// every x402 option the entry claims: a catalogue or manifest that lies
// about the terms never makes its entry live. The index holds "live" as a
// keyword (index.FieldPayVerified), so the filter, facets and caches work
// as for any other field; reconcilePay re-puts the docs whose state
// changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/index"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/probe"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/pay"
	"github.com/ardx-dev/ardx/web"
)

// payLiveWindow is how recent the 402 that verifies an entry must be, at
// least; with a longer probe interval it is three intervals, so one missed
// probe does not drop a live entry.
const payLiveWindow = time.Hour

// payReconcileEvery is how often the index's live marks are brought in
// line with the probes (also after each ProbeRound).
const payReconcileEvery = 30 * time.Second

// payClaim is what one paid entry states: the probe target that checks it
// and its x402 options.
type payClaim struct {
	target string
	terms  []pay.Option
}

// payEndpoint returns the paid-resource endpoint of the entry: for a bazaar
// catalogue entry its resource and method, for any other entry that states
// x402 terms and has no more specific check (MCP, A2A, API base), its url.
func (h *entryHead) payEndpoint(ep endpoint, ok bool) (endpoint, payClaim, bool) {
	if ok && ep.kind != probeKindURL {
		return endpoint{}, payClaim{}, false
	}
	opts := pay.X402(pay.FromEntry(h.Type, h.Data, h.Metadata))
	if len(opts) == 0 {
		return endpoint{}, payClaim{}, false
	}
	target, method := h.URL, http.MethodGet
	if h.Type == pay.TypeX402Resource {
		var it pay.CatalogueItem
		if json.Unmarshal(h.Data, &it) != nil || it.Type == "mcp" {
			return endpoint{}, payClaim{}, false // MCP tools are paid inside the protocol
		}
		target = firstOf(it.Resource, h.URL)
		if m := strings.ToUpper(it.Method); m != "" {
			method = m
		}
	}
	u, err := url.Parse(target)
	if target == "" || len(target) > maxProbeURL || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return endpoint{}, payClaim{}, false
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		method = http.MethodGet
	}
	claim := payClaim{terms: opts}
	return endpoint{kind: probeKindPay, url: target, method: method, transport: u.Scheme}, claim, true
}

// observePay sends the paid request without a payment. An x402 server
// answers 402 before its handler runs, so nothing changes state; a body
// method is sent with an empty JSON object. A 402 with readable terms is
// an answer whose terms are recorded; a 402 without is a protocol error;
// any other status is classed as for other URLs (a 2xx: the resource is no
// longer paid, and its terms are cleared).
func (s *Service) observePay(ctx context.Context, ep endpoint) probe.Observation {
	var body *bytes.Reader
	if ep.method == http.MethodPost || ep.method == http.MethodPut || ep.method == http.MethodPatch {
		body = bytes.NewReader([]byte("{}"))
	}
	var req *http.Request
	var err error
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, ep.method, ep.url, body)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, err = http.NewRequestWithContext(ctx, ep.method, ep.url, nil)
	}
	if err != nil {
		return probe.Observation{Class: probe.ClassProtocolError, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	res, err := s.prober.fetch.Do(req)
	if err != nil {
		return fetchObservation(err)
	}
	if res.Status != http.StatusPaymentRequired {
		obs := statusObservation(res.Status, false)
		obs.Pay = []string{}
		return obs
	}
	r, err := pay.ParseRequired(res.Status, res.Header, res.Body)
	if err != nil {
		return probe.Observation{Class: probe.ClassProtocolError, Err: fmt.Errorf("HTTP 402 without readable x402 terms: %w", err), Pay: []string{}}
	}
	return probe.Observation{Class: probe.ClassOK, Pay: fingerprints(r.Options)}
}

// paidObservation reads a 402 met by a plain URL probe: with readable
// x402 terms the endpoint answered (it is paid, not down) and its terms
// are recorded; without, it is an HTTP error as before.
func paidObservation(res *web.FetchResult) probe.Observation {
	r, err := pay.ParseRequired(res.Status, res.Header, res.Body)
	if err != nil {
		return statusObservation(res.Status, false)
	}
	return probe.Observation{Class: probe.ClassOK, Pay: fingerprints(r.Options)}
}

func fingerprints(opts []pay.Option) []string {
	fps := make([]string, 0, len(opts))
	for _, o := range opts {
		fps = append(fps, o.Fingerprint())
	}
	slices.Sort(fps)
	return fps
}

// liveWindow is payLiveWindow, or three probe intervals when longer.
func (s *Service) liveWindow() time.Duration {
	return max(payLiveWindow, 3*s.cfg.Probe.Interval)
}

// payOverlay is what the probes add to an entry's doc: live, and for an
// entry that states no terms, the terms its endpoint's 402 stated.
type payOverlay struct {
	live    bool
	learned []pay.Option
}

func (o payOverlay) key() string {
	k := strconv.FormatBool(o.live)
	for _, l := range o.learned {
		k += "\n" + l.Fingerprint()
	}
	return k
}

// apply writes the overlay onto d.
func (o payOverlay) apply(d *index.Doc) {
	if len(o.learned) > 0 && len(d.PayProtocols) == 0 {
		d.PayProtocols, d.PayNetworks, d.PayPrices = pay.Summary(o.learned)
	}
	d.PayVerified = o.live
}

// DecorateDoc completes a doc about to be indexed with the payment terms
// the probes saw for its entry (the last reconciliation's view), so an
// ingest does not drop them. Set it as the server's ingest.Ingester's
// Decorate.
func (s *Service) DecorateDoc(d *index.Doc) {
	s.prober.overlayMu.Lock()
	o, ok := s.prober.overlay[d.ID]
	s.prober.overlayMu.Unlock()
	if ok {
		o.apply(d)
	}
}

// overlays computes what the probes say of each entry now: an entry that
// claims x402 terms is live while the last 402 seen, within the window,
// states every option it claims; an entry that claims none learns the
// terms of its endpoint's last 402, live within the window.
func (s *Service) overlays() (map[string]payOverlay, error) {
	if _, err := s.probeTargets(); err != nil {
		return nil, err
	}
	s.prober.targetsMu.Lock()
	claims, learn := s.prober.payClaims, s.prober.payLearn
	s.prober.targetsMu.Unlock()
	now := s.cfg.Now()
	seen := map[string]kv.ProbeResult{}
	last := func(target string) (kv.ProbeResult, error) {
		if r, ok := seen[target]; ok {
			return r, nil
		}
		_, r, err := s.db.ProbeWindow(target, now, now)
		seen[target] = r
		return r, err
	}
	recent := func(r kv.ProbeResult) bool {
		return !r.PayAt.IsZero() && now.Sub(r.PayAt) <= s.liveWindow() && !now.Before(r.PayAt.Add(-time.Minute))
	}
	out := map[string]payOverlay{}
	for id, c := range claims {
		r, err := last(c.target)
		if err != nil {
			return nil, err
		}
		if !recent(r) {
			continue
		}
		var seenOpts []pay.Option
		for _, fp := range r.PayTerms {
			if o, ok := pay.OptionFromFingerprint(fp); ok {
				seenOpts = append(seenOpts, o)
			}
		}
		all := true
		for _, t := range c.terms {
			if !slices.ContainsFunc(seenOpts, t.SatisfiedBy) {
				all = false
				break
			}
		}
		if all {
			out[id] = payOverlay{live: true}
		}
	}
	for id, target := range learn {
		r, err := last(target)
		if err != nil {
			return nil, err
		}
		var o payOverlay
		for _, fp := range r.PayTerms {
			if opt, ok := pay.OptionFromFingerprint(fp); ok {
				o.learned = append(o.learned, opt)
			}
		}
		if len(o.learned) > 0 {
			o.live = recent(r)
			out[id] = o
		}
	}
	return out, nil
}

// ReconcilePay brings the index in line with the probes now: it re-puts
// every doc whose overlay (live mark, learned terms) changed since the last
// run or whose live mark in the index is not the one wanted, and on the
// first run every doc with an overlay.
// StartProbes runs it every 30 s and ProbeRound after its round.
func (s *Service) ReconcilePay(ctx context.Context) error {
	want, err := s.overlays()
	if err != nil {
		return err
	}
	s.prober.overlayMu.Lock()
	prev := s.prober.overlay
	s.prober.overlayMu.Unlock()
	flip := map[string]bool{}
	// The index's live marks are compared on every run: one lost to an
	// ingest without Decorate, or left from before a restart, is mended.
	haveLive := map[string]bool{}
	for from := 0; ; from += 1000 {
		res, err := s.ix.Search(ctx, index.SearchRequest{Filter: index.Filter{index.FieldPayVerified: {index.PayLive}}, From: from, Size: 1000})
		if err != nil {
			return err
		}
		for _, h := range res.Hits {
			haveLive[h.ID] = true
		}
		if !res.More || len(res.Hits) == 0 {
			break
		}
	}
	for id := range haveLive {
		if !want[id].live {
			flip[id] = true
		}
	}
	for id, o := range want {
		if o.live && !haveLive[id] {
			flip[id] = true
		}
	}
	if prev == nil {
		for id := range want {
			flip[id] = true
		}
	} else {
		for id, o := range want {
			if p, ok := prev[id]; !ok || p.key() != o.key() {
				flip[id] = true
			}
		}
		for id := range prev {
			if _, ok := want[id]; !ok {
				flip[id] = true
			}
		}
	}
	// Decorate reads the new overlays from here on.
	s.prober.overlayMu.Lock()
	s.prober.overlay = want
	s.prober.overlayMu.Unlock()
	if len(flip) == 0 {
		return nil
	}
	ids := make([]string, 0, len(flip))
	for id := range flip {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	entries, err := s.db.GetEntries(ids)
	if err != nil {
		return err
	}
	docs := make([]index.Doc, 0, len(ids))
	for _, id := range ids {
		e, ok := entries[id]
		if !ok {
			continue // gone from kv; the ingest that removed it removes the doc
		}
		d, err := ingest.ToDoc(e)
		if err != nil {
			continue
		}
		want[id].apply(&d)
		docs = append(docs, d)
	}
	if err := s.ix.Put(docs); err != nil {
		return err
	}
	s.log.Info("payment terms from probes updated", "entries", len(docs))
	return nil
}

// runPayReconcile reconciles every payReconcileEvery until ctx ends.
func (s *Service) runPayReconcile(ctx context.Context) {
	t := time.NewTicker(payReconcileEvery)
	defer t.Stop()
	for {
		if err := s.ReconcilePay(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("pay:verified reconciliation failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
