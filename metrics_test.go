package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs url and parses it with Prometheus's own text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s: %.300s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s does not parse as Prometheus text: %v", url, err)
	}
	return fams
}

// sample finds the first sample of family name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestMetricsParseAndCoverBothServices(t *testing.T) {
	p := startSelf(t, []string{"registry", "facilitator"}, "serve", "--data", t.TempDir(),
		"--registry-addr", "127.0.0.1:0", "--facilitator-addr", "127.0.0.1:0", "--probe-interval", "20ms")
	reg, fac := p.url("registry"), p.url("facilitator")
	resp, err := http.Post(reg+"/search", "application/json", strings.NewReader(`{"query":{"text":"weather"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /search: %d %s", resp.StatusCode, body)
	}
	resp.Body.Close()
	for _, u := range []string{fac + "/supported", reg + "/no-such-page"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	// The first probe runs in the background a jittered interval after
	// start, and a request's duration is observed after its answer has
	// left (a loaded machine can run the scrape first): scrape until both
	// have been counted (bounded), then check all.
	fams := scrape(t, fac+"/metrics")
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if sample(fams, "ardx_probe_results_total", map[string]string{"path": "rpc", "outcome": "ok"}) != nil &&
			sample(fams, "ardx_http_request_duration_seconds", map[string]string{"service": "registry", "method": "POST", "route": "/search", "code": "200"}) != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		fams = scrape(t, fac+"/metrics")
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"ardx_http_request_duration_seconds", map[string]string{"service": "registry", "method": "POST", "route": "/search", "code": "200"}},
		{"ardx_http_request_duration_seconds", map[string]string{"service": "facilitator", "method": "GET", "route": "/supported", "code": "200"}},
		{"ardx_http_request_duration_seconds", map[string]string{"service": "registry", "route": "other", "code": "404"}},
		{"ardx_registry_searches_total", map[string]string{"federation": "auto", "results": "some"}},
		{"ardx_index_documents", nil},
		{"ardx_kv_file_bytes", nil},
		{"ardx_ingest_sources_total", map[string]string{"outcome": "ok"}},
		{"ardx_ingest_entries_total", map[string]string{"change": "added"}},
		{"ardx_settlements_total", map[string]string{"network": "eip155:1337", "outcome": "succeeded"}},
		{"ardx_settle_in_flight", nil},
		{"ardx_settle_pending", nil},
		{"ardx_settle_pending_oldest_age_seconds", nil},
		{"ardx_rpc_request_duration_seconds", map[string]string{"network": "eip155:1337", "method": "eth_chainId"}},
		{"ardx_probe_results_total", map[string]string{"path": "rpc", "outcome": "ok"}},
		{"go_goroutines", nil},
	} {
		if sample(fams, tc.name, tc.labels) == nil {
			t.Errorf("no %s sample with %v", tc.name, tc.labels)
		}
	}
	if m := sample(fams, "ardx_index_documents", nil); m != nil && m.GetGauge().GetValue() < 50 {
		t.Errorf("ardx_index_documents = %v, want the default corpus", m.GetGauge().GetValue())
	}
	if m := sample(fams, "ardx_http_request_duration_seconds", map[string]string{"route": "/search"}); m != nil && m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("one search observed %d times", m.GetHistogram().GetSampleCount())
	}
	// The registry's listener serves the same process's metrics.
	if fams := scrape(t, reg+"/metrics"); fams["ardx_registry_searches_total"] == nil {
		t.Error("registry /metrics lacks the registry's counters")
	}
}

func TestMetricsOnTheirOwnListener(t *testing.T) {
	p := startSelf(t, []string{"registry", "metrics"}, "registry", "--data", t.TempDir(), "--no-default-corpus",
		"--registry-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	if fams := scrape(t, p.url("metrics")+"/metrics"); fams["ardx_index_documents"] == nil {
		t.Error("metrics listener lacks ardx_index_documents")
	}
	resp, err := http.Get(p.url("registry") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("registry listener /metrics = %d, want 404 with --metrics-addr", resp.StatusCode)
	}
	// Go's profiler is on the operator's listener only.
	for url, want := range map[string]int{
		p.url("metrics") + "/debug/pprof/":  http.StatusOK,
		p.url("registry") + "/debug/pprof/": http.StatusNotFound,
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, want)
		}
	}
}
