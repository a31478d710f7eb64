package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bucket is one named rate limit: Rate requests per second sustained, with
// bursts of up to Burst. Each client has its own token bucket per Bucket.
type Bucket struct {
	Name  string
	Rate  float64 // per second
	Burst int
}

// LimiterOptions configures a Limiter.
type LimiterOptions struct {
	// TrustedProxies are the peers whose X-Forwarded-For is believed. Leave
	// empty unless a reverse proxy sits in front: otherwise any client can
	// pick its own key and escape its limit.
	TrustedProxies []netip.Prefix
	// Disabled turns every check into a pass-through without headers.
	Disabled bool
	// IdleTTL is how long a client's limiter is kept after its last
	// request. Zero means 10 minutes. It never drops below the time a
	// bucket takes to refill, so eviction cannot hand out a fresh burst.
	IdleTTL time.Duration
	// Now is the clock; nil means time.Now. Tests inject one.
	Now func() time.Time
}

// DefaultIdleTTL is how long an idle client's limiter is kept.
const DefaultIdleTTL = 10 * time.Minute

// maxClientsPerBucket bounds memory when many addresses spray requests:
// past it idle clients are swept at once, then the longest-idle one goes.
const maxClientsPerBucket = 100_000

// Limiter keeps per-client token buckets and answers with the IETF
// RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers-11).
// Clients are keyed by ClientIP; IPv6 clients by their /64, which is what
// one subscriber is usually given. It is safe for concurrent use.
type Limiter struct {
	opts    LimiterOptions
	buckets map[string]*limitBucket
}

type limitBucket struct {
	Bucket
	policy string        // the RateLimit-Policy value, fixed per bucket
	ttl    time.Duration // idle time after which a client is forgotten
	sweep  time.Duration // how often idle clients are looked for

	mu        sync.Mutex
	clients   map[string]*clientLimiter // by client key: an address, or a caller's own key
	nextSweep time.Time
}

type clientLimiter struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter returns a Limiter for buckets. Bucket names must be unique
// tokens (letters, digits, '-', '_', '.'); rates positive; bursts at least 1.
func NewLimiter(buckets []Bucket, opts LimiterOptions) (*Limiter, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.IdleTTL <= 0 {
		opts.IdleTTL = DefaultIdleTTL
	}
	l := &Limiter{opts: opts, buckets: make(map[string]*limitBucket, len(buckets))}
	for _, b := range buckets {
		if err := b.valid(); err != nil {
			return nil, err
		}
		if _, dup := l.buckets[b.Name]; dup {
			return nil, fmt.Errorf("rate bucket %q defined twice", b.Name)
		}
		refill := time.Duration(float64(b.Burst) / b.Rate * float64(time.Second))
		ttl := max(opts.IdleTTL, refill)
		l.buckets[b.Name] = &limitBucket{
			Bucket: b,
			// w is the time the whole quota takes to refill; q per w is
			// then exactly the sustained rate.
			policy:  fmt.Sprintf(`"%s";q=%d;w=%d`, b.Name, b.Burst, max(1, ceilSeconds(float64(b.Burst)/b.Rate))),
			ttl:     ttl,
			sweep:   min(ttl/2, time.Minute),
			clients: make(map[string]*clientLimiter),
		}
	}
	return l, nil
}

func (b Bucket) valid() error {
	if b.Name == "" {
		return errors.New("rate bucket without a name")
	}
	for _, c := range b.Name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("rate bucket %q: name may hold only letters, digits, '-', '_' and '.'", b.Name)
		}
	}
	if !(b.Rate > 0) || math.IsInf(b.Rate, 0) {
		return fmt.Errorf("rate bucket %q: rate must be a positive number of requests per second", b.Name)
	}
	if b.Burst < 1 {
		return fmt.Errorf("rate bucket %q: burst must be at least 1", b.Name)
	}
	return nil
}

// ParseBucketSpec parses "name=rate:burst", e.g. "settle=50:100" (50 per
// second, bursts of 100), as given on the command line.
func ParseBucketSpec(s string) (Bucket, error) {
	name, spec, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return Bucket{}, fmt.Errorf("rate bucket %q: want name=rate:burst, e.g. settle=50:100", s)
	}
	rs, bs, ok := strings.Cut(spec, ":")
	if !ok {
		return Bucket{}, fmt.Errorf("rate bucket %q: want name=rate:burst, e.g. settle=50:100", s)
	}
	r, err := strconv.ParseFloat(rs, 64)
	if err != nil {
		return Bucket{}, fmt.Errorf("rate bucket %q: rate %q is not a number", s, rs)
	}
	burst, err := strconv.Atoi(bs)
	if err != nil {
		return Bucket{}, fmt.Errorf("rate bucket %q: burst %q is not an integer", s, bs)
	}
	b := Bucket{Name: name, Rate: r, Burst: burst}
	return b, b.valid()
}

// Clients returns how many client limiters are held across all buckets.
func (l *Limiter) Clients() int {
	if l == nil {
		return 0
	}
	n := 0
	for _, b := range l.buckets {
		b.mu.Lock()
		n += len(b.clients)
		b.mu.Unlock()
	}
	return n
}

// Middleware limits each request in the bucket bucketFor names. A request
// over its limit gets a 429 too-many-requests problem with Retry-After; every
// limited response carries RateLimit-Policy and RateLimit. bucketFor
// returning "" or an unknown name leaves the request unlimited.
func (l *Limiter) Middleware(ps Problems, bucketFor func(r *http.Request) string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			bucket := bucketFor(r)
			ok, retry := l.Allow(r, bucket, w)
			if !ok {
				p := ps.New(SlugTooManyRequests, fmt.Sprintf("rate limit %q exceeded for this client; retry in %d s", bucket, retry))
				p.RetryAfter = retry
				ps.Write(w, r, p)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Allow takes one request from r's client in bucket and sets the RateLimit
// headers on w; when it refuses, it also sets Retry-After and reports the
// seconds to wait. It writes no body, so /verify and /settle can answer in
// their payment shape. An unknown bucket, a nil or disabled Limiter allow.
func (l *Limiter) Allow(r *http.Request, bucket string, w http.ResponseWriter) (ok bool, retryAfter int) {
	if l == nil || l.opts.Disabled || l.buckets[bucket] == nil {
		return true, 0
	}
	return l.AllowClient(clientKey(ClientIP(r, l.opts.TrustedProxies)).String(), bucket, w)
}

// AllowClient is Allow for a client named by the caller rather than by its
// address: an account, for limits per key. Address keys and named ones
// share a bucket's table, so a name must not look like an address (prefix
// it, e.g. "key:").
func (l *Limiter) AllowClient(client, bucket string, w http.ResponseWriter) (ok bool, retryAfter int) {
	if l == nil || l.opts.Disabled {
		return true, 0
	}
	b := l.buckets[bucket]
	if b == nil {
		return true, 0
	}
	now := l.opts.Now()
	lim := b.limiter(client, now)
	ok = lim.AllowN(now, 1)
	tokens := lim.TokensAt(now)

	// A hair of slack absorbs float error from refill arithmetic, so two
	// whole tokens never show as r=1.
	const eps = 1e-9
	remaining := max(0, int(math.Floor(tokens+eps)))
	reset := max(0, ceilSeconds((float64(b.Burst)-tokens)/b.Rate-eps))
	h := w.Header()
	h.Set("RateLimit-Policy", b.policy)
	h.Set("RateLimit", `"`+b.Name+`";r=`+strconv.Itoa(remaining)+";t="+strconv.Itoa(reset))
	if ok {
		return true, 0
	}
	rateLimitRefusals.WithLabelValues(b.Name).Inc()
	retryAfter = max(1, ceilSeconds((1-tokens)/b.Rate-eps))
	h.Set("Retry-After", strconv.Itoa(retryAfter))
	return false, retryAfter
}

// limiter returns key's limiter, creating it, and sweeps idle clients now
// and then: inline, so no goroutine needs stopping.
func (b *limitBucket) limiter(key string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.nextSweep) || len(b.clients) >= maxClientsPerBucket {
		b.sweepLocked(now)
	}
	c := b.clients[key]
	if c == nil {
		if len(b.clients) >= maxClientsPerBucket {
			b.evictOldestLocked()
		}
		c = &clientLimiter{lim: rate.NewLimiter(rate.Limit(b.Rate), b.Burst)}
		b.clients[key] = c
	}
	if now.After(c.seen) {
		c.seen = now
	}
	return c.lim
}

func (b *limitBucket) sweepLocked(now time.Time) {
	for k, c := range b.clients {
		if now.Sub(c.seen) > b.ttl {
			delete(b.clients, k)
		}
	}
	b.nextSweep = now.Add(b.sweep)
}

func (b *limitBucket) evictOldestLocked() {
	var oldest string
	var seen time.Time
	found := false
	for k, c := range b.clients {
		if !found || c.seen.Before(seen) {
			oldest, seen, found = k, c.seen, true
		}
	}
	delete(b.clients, oldest)
}

// clientKey groups an IPv6 client by its /64: a subscriber gets a whole /64
// and could otherwise rotate through it to dodge its limit.
func clientKey(ip netip.Addr) netip.Addr {
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// ClientIP returns the address of the client that sent r: the peer address,
// or, when the peer is one of the trusted proxies, the right-most address in
// X-Forwarded-For that is not itself a trusted proxy. Entries further left
// were written by the client and prove nothing. An unparsable peer yields
// the zero Addr.
func ClientIP(r *http.Request, trusted []netip.Prefix) netip.Addr {
	client := parseHostAddr(r.RemoteAddr)
	if !client.IsValid() || !inPrefixes(client, trusted) {
		return client
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := parseHostAddr(strings.TrimSpace(hops[i]))
		if !hop.IsValid() {
			// A hop we cannot read ends the chain we can vouch for: the
			// last trusted proxy is the best key we have.
			break
		}
		client = hop
		if !inPrefixes(hop, trusted) {
			break
		}
	}
	return client
}

// parseHostAddr reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port".
func parseHostAddr(s string) netip.Addr {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a = ap.Addr()
	} else if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		a = ip
	}
	return a.Unmap().WithZone("")
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ceilSeconds rounds up to whole seconds, saturating instead of overflowing.
func ceilSeconds(s float64) int {
	c := math.Ceil(s)
	if c > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(c)
}
