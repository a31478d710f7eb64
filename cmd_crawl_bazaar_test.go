package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator/evm"
	"github.com/ardx-dev/ardx/facilitator/x402"
	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
	"github.com/ardx-dev/ardx/registry/pay"
)

// TestCrawlIngestsOurFacilitatorsCatalogue: a payment to our own echo
// merchant (v2, with its bazaar declaration) catalogues it on our
// facilitator; `ardx crawl` of the facilitator's domain then ingests the
// catalogue as entries that cite the fetch and carry the echo's terms,
// normalised.
func TestCrawlIngestsOurFacilitatorsCatalogue(t *testing.T) {
	dir := t.TempDir()
	rf, base := startDevFacilitator(t, filepath.Join(dir, "facilitator"), facilitatorConfig{})
	defer closeFacilitator(t, rf)

	// Pay /echo as the official v2 client does.
	res, err := http.Get(base + "/echo")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("unpaid /echo: %d", res.StatusCode)
	}
	pr, err := x402.DecodePaymentRequired(res.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		t.Fatal(err)
	}
	req, err := evm.PaymentV2(rf.dev.PayerKey, pr.Resource, pr.Accepts[0], evm.PayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req.PaymentPayload.Extensions = pr.Extensions
	sig, err := x402.EncodeHeader(req.PaymentPayload)
	if err != nil {
		t.Fatal(err)
	}
	paid, _ := http.NewRequest(http.MethodGet, base+"/echo", nil)
	paid.Header.Set(x402.HeaderPaymentSignature, sig)
	res, err = http.DefaultClient.Do(paid)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("paid /echo: %d", res.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rf.catalog.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the paid /echo was never catalogued")
		}
		time.Sleep(20 * time.Millisecond)
	}

	u, _ := url.Parse(base)
	regDir := filepath.Join(dir, "registry")
	var stdout, stderr bytes.Buffer
	args := []string{"crawl", "--data", regDir, "--log-level", "error", "--delay", "0", "--json",
		"--resolve", "facilitator.test=" + u.Host, "facilitator.test"}
	if err := run(context.Background(), args, envOf(nil), nil, &stdout, &stderr); err != nil {
		t.Logf("crawl: %v (the facilitator's own manifest names another host)\n%s", err, stderr.String())
	}
	var rep struct {
		Domains []struct {
			Documents []struct {
				Kind   string `json:"kind"`
				URL    string `json:"url"`
				Stored int    `json:"stored"`
				SHA256 string `json:"sha256"`
			} `json:"documents"`
		} `json:"domains"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Domains) != 1 {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	found := false
	for _, d := range rep.Domains[0].Documents {
		if d.Kind == ingest.DocBazaar {
			found = d.Stored == 1 && d.SHA256 != "" && d.URL == "https://facilitator.test/discovery/resources?limit=100"
			if !found {
				t.Errorf("bazaar document %+v", d)
			}
		}
	}
	if !found {
		t.Fatalf("no x402-bazaar document in the report:\n%s", stdout.String())
	}

	db, err := kv.Open(regDir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []kv.Entry
	if err := db.ForEachEntry(func(e kv.Entry) error {
		var h struct{ Type string }
		_ = json.Unmarshal(e.Body, &h)
		if h.Type == pay.TypeX402Resource {
			got = append(got, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d x402 resource entries, want 1", len(got))
	}
	e := got[0]
	var body struct {
		Data     pay.CatalogueItem `json:"data"`
		Metadata map[string]any    `json:"metadata"`
	}
	_ = json.Unmarshal(e.Body, &body)
	if body.Data.Resource != base+"/echo" || body.Metadata["source.url"] != "https://facilitator.test/discovery/resources?limit=100" || body.Metadata["source.sha256"] == "" {
		t.Errorf("entry %s does not point at the echo or cite the fetch: %s", e.ID, e.Body)
	}
	if e.Provenance.Source == "" || e.Provenance.SHA256 == "" {
		t.Errorf("provenance %+v", e.Provenance)
	}
	d, err := ingest.ToDoc(e)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.PayProtocols, []string{"x402"}) || !slices.Equal(d.PayNetworks, []string{"dev"}) || !slices.Equal(d.PayPrices, []string{"0.001"}) {
		t.Errorf("terms of the echo entry: %v %v %v", d.PayProtocols, d.PayNetworks, d.PayPrices)
	}
}
