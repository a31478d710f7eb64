package web_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/web"
)

// limiterClock is a settable clock for the limiter.
type limiterClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *limiterClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *limiterClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestLimiter(t *testing.T, buckets []web.Bucket, opts web.LimiterOptions) (*web.Limiter, *limiterClock) {
	t.Helper()
	clock := &limiterClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	opts.Now = clock.Now
	l, err := web.NewLimiter(buckets, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l, clock
}

var limiterProblems = web.Problems{BaseURL: "https://pay.example"}

func limitedHandler(l *web.Limiter, bucket string) http.Handler {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	return l.Middleware(limiterProblems, func(*http.Request) string { return bucket })(ok)
}

func callLimited(h http.Handler, remote string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestLimiterHeaderSequence checks the draft-11 headers request by request
// at 1 per second with bursts of 3.
func TestLimiterHeaderSequence(t *testing.T) {
	l, clock := newTestLimiter(t, []web.Bucket{{Name: "default", Rate: 1, Burst: 3}}, web.LimiterOptions{})
	h := limitedHandler(l, "default")
	steps := []struct {
		advance    time.Duration
		wantStatus int
		wantLimit  string
		wantRetry  string
	}{
		{0, 200, `"default";r=2;t=1`, ""},
		{0, 200, `"default";r=1;t=2`, ""},
		{0, 200, `"default";r=0;t=3`, ""},
		{0, 429, `"default";r=0;t=3`, "1"},
		{500 * time.Millisecond, 429, `"default";r=0;t=3`, "1"},
		{500 * time.Millisecond, 200, `"default";r=0;t=3`, ""},
		{10 * time.Second, 200, `"default";r=2;t=1`, ""},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		rec := callLimited(h, "198.51.100.7:5000")
		if rec.Code != st.wantStatus {
			t.Fatalf("step %d: status %d, want %d", i, rec.Code, st.wantStatus)
		}
		if got := rec.Header().Get("RateLimit-Policy"); got != `"default";q=3;w=3` {
			t.Errorf("step %d: RateLimit-Policy = %q", i, got)
		}
		if got := rec.Header().Get("RateLimit"); got != st.wantLimit {
			t.Errorf("step %d: RateLimit = %q, want %q", i, got, st.wantLimit)
		}
		if got := rec.Header().Get("Retry-After"); got != st.wantRetry {
			t.Errorf("step %d: Retry-After = %q, want %q", i, got, st.wantRetry)
		}
		if st.wantStatus == 429 {
			var p web.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Type != "https://pay.example/developers#too-many-requests" || p.Status != 429 ||
				rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("step %d: problem %+v, content type %q", i, p, rec.Header().Get("Content-Type"))
			}
		}
	}
}

func TestLimiterSpecBuckets(t *testing.T) {
	tests := []struct {
		spec       string
		wantPolicy string
		wantFirst  string
	}{
		{"settle=50:100", `"settle";q=100;w=2`, `"settle";r=99;t=1`},
		{"payments-read=30:60", `"payments-read";q=60;w=2`, `"payments-read";r=59;t=1`},
		{"discovery=10:20", `"discovery";q=20;w=2`, `"discovery";r=19;t=1`},
		{"slow=0.5:1", `"slow";q=1;w=2`, `"slow";r=0;t=2`},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			b, err := web.ParseBucketSpec(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := newTestLimiter(t, []web.Bucket{b}, web.LimiterOptions{})
			rec := callLimited(limitedHandler(l, b.Name), "192.0.2.1:1")
			if got := rec.Header().Get("RateLimit-Policy"); got != tc.wantPolicy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tc.wantPolicy)
			}
			if got := rec.Header().Get("RateLimit"); got != tc.wantFirst {
				t.Errorf("RateLimit = %q, want %q", got, tc.wantFirst)
			}
			// Exactly Burst requests pass at one instant, the next is refused
			// with Retry-After of at least a second.
			for i := 1; i < b.Burst; i++ {
				if rec := callLimited(limitedHandler(l, b.Name), "192.0.2.1:1"); rec.Code != 200 {
					t.Fatalf("request %d refused", i+1)
				}
			}
			rec = callLimited(limitedHandler(l, b.Name), "192.0.2.1:1")
			if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); rec.Code != 429 || ra < 1 {
				t.Fatalf("over burst: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
			}
		})
	}
}

func TestParseBucketSpecErrors(t *testing.T) {
	for _, s := range []string{"", "settle", "settle=50", "settle=x:1", "settle=1:x", "settle=0:10", "settle=-1:10",
		"settle=1:0", "=1:1", `se"ttle=1:1`, "settle=NaN:1", "settle=Inf:1", "set tle=1:1"} {
		if b, err := web.ParseBucketSpec(s); err == nil {
			t.Errorf("ParseBucketSpec(%q) = %+v, want an error", s, b)
		}
	}
	if _, err := web.NewLimiter([]web.Bucket{{"a", 1, 1}, {"a", 2, 2}}, web.LimiterOptions{}); err == nil {
		t.Error("duplicate bucket accepted")
	}
}

func TestLimiterKeysPerClient(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	l, _ := newTestLimiter(t, []web.Bucket{{Name: "b", Rate: 1, Burst: 1}}, web.LimiterOptions{TrustedProxies: proxies})
	h := limitedHandler(l, "b")
	tests := []struct {
		name       string
		remote     string
		hdr        []string
		wantStatus int
	}{
		{"first client", "203.0.113.1:1000", nil, 200},
		{"same client, other port", "203.0.113.1:2000", nil, 429},
		{"other client", "203.0.113.2:1000", nil, 200},
		{"spoofed XFF from untrusted peer is ignored", "203.0.113.1:3000", []string{"X-Forwarded-For", "198.51.100.99"}, 429},
		{"via trusted proxy", "10.1.1.1:80", []string{"X-Forwarded-For", "198.51.100.50"}, 200},
		{"same client via another proxy", "10.2.2.2:80", []string{"X-Forwarded-For", "198.51.100.50"}, 429},
		{"client's own XFF entry is not believed", "10.1.1.1:80", []string{"X-Forwarded-For", "1.2.3.4, 198.51.100.50"}, 429},
		{"IPv6 client", "[2001:4860:1:2::1]:443", nil, 200},
		{"same /64", "[2001:4860:1:2:ffff::9]:443", nil, 429},
		{"other /64", "[2001:4860:1:3::1]:443", nil, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if rec := callLimited(h, tc.remote, tc.hdr...); rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tc.wantStatus)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"plain v4", "192.0.2.1:1234", nil, "192.0.2.1"},
		{"plain v6", "[2001:db8::1]:1234", nil, "2001:db8::1"},
		{"mapped", "[::ffff:192.0.2.1]:1234", nil, "192.0.2.1"},
		{"no port", "192.0.2.1", nil, "192.0.2.1"},
		{"garbage", "not-an-address", nil, "invalid IP"},
		{"untrusted peer ignores XFF", "192.0.2.1:1", []string{"198.51.100.1"}, "192.0.2.1"},
		{"trusted peer, one hop", "10.0.0.1:1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"trusted chain", "10.0.0.1:1", []string{"198.51.100.1, 10.0.0.2, 10.0.0.3"}, "198.51.100.1"},
		{"rightmost untrusted wins", "10.0.0.1:1", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},
		{"several header lines", "10.0.0.1:1", []string{"6.6.6.6", "198.51.100.2, 10.9.9.9"}, "198.51.100.2"},
		{"all trusted", "10.0.0.1:1", []string{"10.0.0.7"}, "10.0.0.7"},
		{"malformed hop stops", "10.0.0.1:1", []string{"198.51.100.1, bogus"}, "10.0.0.1"},
		{"hop with port", "[::1]:9", []string{"198.51.100.3:4444"}, "198.51.100.3"},
		{"bracketed v6 hop", "[::1]:9", []string{"[2001:db8::5]"}, "2001:db8::5"},
		{"trusted, no XFF", "10.0.0.1:1", nil, "10.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := web.ClientIP(r, trusted).String(); got != tc.want {
				t.Fatalf("ClientIP = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLimiterEvictsIdleClients(t *testing.T) {
	l, clock := newTestLimiter(t, []web.Bucket{{Name: "b", Rate: 1, Burst: 2}}, web.LimiterOptions{IdleTTL: time.Minute})
	h := limitedHandler(l, "b")
	for i := range 5 {
		callLimited(h, "192.0.2."+strconv.Itoa(i+1)+":1")
	}
	if n := l.Clients(); n != 5 {
		t.Fatalf("Clients = %d, want 5", n)
	}
	clock.Advance(50 * time.Second)
	callLimited(h, "192.0.2.1:1") // keeps client 1 fresh
	if n := l.Clients(); n != 5 {
		t.Fatalf("evicted before the TTL: Clients = %d", n)
	}
	clock.Advance(40 * time.Second) // 90 s after the others, 40 s after client 1
	callLimited(h, "192.0.2.1:1")
	if n := l.Clients(); n != 1 {
		t.Fatalf("after the TTL: Clients = %d, want 1", n)
	}
}

func TestLimiterDisabledAndUnknown(t *testing.T) {
	off, _ := newTestLimiter(t, []web.Bucket{{Name: "b", Rate: 1, Burst: 1}}, web.LimiterOptions{Disabled: true})
	on, _ := newTestLimiter(t, []web.Bucket{{Name: "b", Rate: 1, Burst: 1}}, web.LimiterOptions{})
	var nilLimiter *web.Limiter
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"disabled", limitedHandler(off, "b")},
		{"no bucket", limitedHandler(on, "")},
		{"unknown bucket", limitedHandler(on, "nope")},
		{"nil limiter", limitedHandler(nilLimiter, "b")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 50 {
				rec := callLimited(tc.h, "192.0.2.1:1")
				if rec.Code != 200 || rec.Header().Get("RateLimit") != "" || rec.Header().Get("RateLimit-Policy") != "" {
					t.Fatalf("request %d: %d %v", i, rec.Code, rec.Header())
				}
			}
		})
	}
}

// TestLimiterAllow is the path /verify and /settle use: headers set, no
// body written, the caller renders its own 429.
func TestLimiterAllow(t *testing.T) {
	l, _ := newTestLimiter(t, []web.Bucket{{Name: "settle", Rate: 50, Burst: 100}}, web.LimiterOptions{})
	r := httptest.NewRequest(http.MethodPost, "/settle", nil)
	r.RemoteAddr = "192.0.2.9:1"
	for i := range 100 {
		rec := httptest.NewRecorder()
		if ok, ra := l.Allow(r, "settle", rec); !ok || ra != 0 {
			t.Fatalf("request %d refused", i)
		}
	}
	rec := httptest.NewRecorder()
	ok, ra := l.Allow(r, "settle", rec)
	if ok || ra != 1 || rec.Header().Get("Retry-After") != "1" || rec.Body.Len() != 0 || rec.Header().Get("RateLimit") != `"settle";r=0;t=2` {
		t.Fatalf("Allow = %v, %d; headers %v; body %q", ok, ra, rec.Header(), rec.Body)
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l, err := web.NewLimiter([]web.Bucket{{Name: "b", Rate: 1e-3, Burst: 100}}, web.LimiterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := limitedHandler(l, "b")
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if callLimited(h, "192.0.2.1:1").Code == 200 {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 100 {
		t.Fatalf("allowed %d of 400, want exactly the burst of 100", allowed)
	}
}

func FuzzClientIP(f *testing.F) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f.Add("10.0.0.1:1", "198.51.100.1, 10.0.0.2")
	f.Add("[::1]:1", "[2001:db8::1]:80,,")
	f.Add("x", "")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		got := web.ClientIP(r, trusted)
		peer := web.ClientIP(r, nil)
		// Without trust the header never matters; with it, an untrusted
		// peer still decides alone.
		if peer.IsValid() && !trusted[0].Contains(peer) && got != peer {
			t.Fatalf("untrusted peer %s: ClientIP = %s", peer, got)
		}
	})
}
