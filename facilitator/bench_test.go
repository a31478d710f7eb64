package facilitator_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/internal/procstat"
)

// BenchmarkVerifyHTTP measures POST /verify over loopback HTTP with 8
// concurrent clients on the dev chain (full verification: signature,
// balance, simulated transfer). Target: at least 2,000 verifications/s.
func BenchmarkVerifyHTTP(b *testing.B) {
	env := newTestEnv(b)
	body := env.payment(b, 2, 10_000)
	const clients = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	post := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(env.URL+"/verify", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	if _, err := post(); err != nil { // warm the connection and caches
		b.Fatal(err)
	}

	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := procstat.CPUTime()
	start := time.Now()
	for c := range clients {
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				d, err := post()
				if err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], d)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := procstat.CPUTime() - cpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "verify/s")
	// CPU per verification (server, chain and clients together) is what
	// the throughput would be bounded by on an otherwise idle machine;
	// wall-clock verify/s drops when other processes share the cores.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/verify")
	reportPercentiles(b, all)
}

// BenchmarkSettleReplayHTTP measures replaying an already settled body
// (the recorded outcome, Idempotency-Replayed: true) over loopback HTTP from
// one client. Target: p99 at most 2 ms.
func BenchmarkSettleReplayHTTP(b *testing.B) {
	env := newTestEnv(b)
	body := env.payment(b, 2, 1)
	client := &http.Client{}
	settle := func() (time.Duration, http.Header) {
		start := time.Now()
		resp, err := client.Post(env.URL+"/settle", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start), resp.Header
	}
	settle() // the one real settlement
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		d, h := settle()
		if h.Get("Idempotency-Replayed") != "true" {
			b.Fatal("not a replay")
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := int(float64(len(lat)-1) * p)
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
