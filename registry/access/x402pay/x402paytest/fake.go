// Package x402paytest is a stand-in facilitator for tests of merchants:
// it answers /supported, /verify and /settle with the shapes a facilitator
// uses, settles one body once (a repeat replays the outcome) and counts what
// it was asked. It checks no signature: a payload whose signature ends in
// "bad" is invalid.
package x402paytest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Addresses of the fake network eip155:1337.
const (
	Asset   = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
	PayTo   = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
	Payer   = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	Network = "eip155:1337"
)

// Facilitator is a running fake facilitator.
type Facilitator struct {
	URL string
	// Pending is how many times a body is answered settlement_pending
	// before its outcome (a transaction that is slow to be final).
	Pending int

	mu        sync.Mutex
	verifies  int
	settles   map[string]int
	transfers int
}

// Counts returns how many /verify calls it answered and how many distinct
// bodies it settled (each a transfer).
func (f *Facilitator) Counts() (verifies, transfers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.verifies, f.transfers
}

// New starts a fake facilitator, closed when the test ends.
func New(tb testing.TB) *Facilitator {
	f := &Facilitator{settles: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	tb.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *Facilitator) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	bad := strings.Contains(string(body), `bad"`)
	switch r.URL.Path {
	case "/supported":
		io.WriteString(w, `{"kinds":[{"x402Version":2,"scheme":"exact","network":"`+Network+`"}],"networks":{"`+Network+`":{"available":true,"network":"`+Network+`","asset":"`+Asset+`","eip712":{"name":"USDC","version":"2"},"decimals":6}}}`)
	case "/verify":
		f.verifies++
		if bad {
			io.WriteString(w, `{"isValid":false,"invalidReason":"invalid_exact_evm_payload_signature"}`)
			return
		}
		io.WriteString(w, `{"isValid":true,"payer":"`+Payer+`"}`)
	case "/settle":
		sum := sha256.Sum256(body)
		k := hex.EncodeToString(sum[:])
		if bad {
			io.WriteString(w, `{"success":false,"errorReason":"invalid_exact_evm_payload_signature","transaction":"","network":"`+Network+`"}`)
			return
		}
		f.settles[k]++
		if f.settles[k] == 1 {
			f.transfers++
		}
		if f.settles[k] <= f.Pending {
			io.WriteString(w, `{"success":false,"errorReason":"settlement_pending","transaction":"0x`+k+`","network":"`+Network+`"}`)
			return
		}
		io.WriteString(w, `{"success":true,"transaction":"0x`+k+`","network":"`+Network+`","payer":"`+Payer+`"}`)
	default:
		http.NotFound(w, r)
	}
}
