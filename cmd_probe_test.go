package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/facilitator"
)

// TestFacilitatorProbesFeedStatus starts the facilitator on the dev chain
// with a fast probe schedule and waits until /status.json shows an observed
// availability for both paths of the dev network.
func TestFacilitatorProbesFeedStatus(t *testing.T) {
	c := &cli{getenv: envOf(nil), stdout: io.Discard, stderr: io.Discard}
	c.global.dataDir = t.TempDir()
	fc := &facilitatorConfig{
		addr: "127.0.0.1:0", settleTimeout: 5 * time.Second, probeInterval: 10 * time.Millisecond,
		echoNetwork: "dev", echoCapPerAddress: 1, echoCapPerDay: 1,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rf, err := c.startFacilitator(ctx, fc, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		if err := rf.close(cctx); err != nil {
			t.Error(err)
		}
	})
	url := "http://" + rf.srv.ListenAddr() + "/status.json"
	deadline := time.Now().Add(20 * time.Second)
	var doc facilitator.StatusDocument
	for {
		doc = facilitator.StatusDocument{}
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ready(doc) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !ready(doc) {
		t.Fatalf("no observed availability after 20 s: %+v", doc.Networks)
	}
	for _, p := range doc.Networks[0].Observed {
		if *p.LowerBound <= 0 || p.Successes != p.Probes || p.LastOK == nil || !*p.LastOK {
			t.Errorf("path %s: %+v (the dev chain never fails its probes)", p.Path, p)
		}
	}
}

func ready(doc facilitator.StatusDocument) bool {
	if len(doc.Networks) != 1 || len(doc.Networks[0].Observed) != 2 {
		return false
	}
	for _, p := range doc.Networks[0].Observed {
		if p.LowerBound == nil {
			return false
		}
	}
	return true
}
