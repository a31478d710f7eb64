package registry

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/web"
)

// Rate limit buckets of the registry. A caller with a key is limited per
// account (so rotating the key gives no fresh quota), a caller without one
// per address; minting a key is limited per address on its own, so keys
// cannot be minted to escape the address limit.
const (
	BucketAddress = "address"
	BucketKey     = "key"
	BucketMint    = "mint"
)

// DefaultRateLimits are the limits `ardx registry` and `ardx serve` apply.
var DefaultRateLimits = []web.Bucket{
	{Name: BucketAddress, Rate: 50, Burst: 200},
	{Name: BucketKey, Rate: 100, Burst: 400},
	{Name: BucketMint, Rate: 1.0 / 60, Burst: 10},
}

// unlimitedRoutes are not rate limited: liveness polls.
var unlimitedRoutes = map[string]bool{"GET /health": true}

// limited wraps a route's handler in the caller's rate limit and counts
// the request in the account's usage. Limits apply after authentication,
// so a bad key is a 401 before it costs anyone's quota.
func (s *Service) limited(route string, h httprouter.Handle) httprouter.Handle {
	if unlimitedRoutes[route] {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		c := s.caller(r)
		var ok bool
		var retry int
		bucket := BucketAddress
		if c != nil {
			bucket = BucketKey
			ok, retry = s.limiter.AllowClient("key:"+c.AccountID, bucket, w)
		} else {
			ok, retry = s.limiter.Allow(r, bucket, w)
		}
		if !ok {
			s.writeTooMany(w, r, bucket, retry)
			return
		}
		if c != nil {
			s.usage.add(c.AccountID, route, s.cfg.Now())
		}
		h(w, r, ps)
	}
}

// allowMint takes one key mint from r's address, answering 429 when the
// address has minted its share.
func (s *Service) allowMint(w http.ResponseWriter, r *http.Request) bool {
	ok, retry := s.limiter.Allow(r, BucketMint, w)
	if !ok {
		s.writeTooMany(w, r, BucketMint, retry)
	}
	return ok
}

func (s *Service) writeTooMany(w http.ResponseWriter, r *http.Request, bucket string, retry int) {
	p := s.problems.New(web.SlugTooManyRequests, fmt.Sprintf("rate limit %q exceeded; retry in %d s", bucket, retry))
	p.RetryAfter = retry
	s.problems.Write(w, r, p)
}

// usageCounter counts each account's requests per route for the current
// UTC day, in memory: /me reports them. They are a courtesy, not billing
// records, and start again with the process.
type usageCounter struct {
	mu   sync.Mutex
	day  string
	byID map[string]map[string]int
}

func (u *usageCounter) add(account, route string, now time.Time) {
	day := now.UTC().Format(time.DateOnly)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.day != day || u.byID == nil {
		u.day, u.byID = day, map[string]map[string]int{}
	}
	m := u.byID[account]
	if m == nil {
		m = map[string]int{}
		u.byID[account] = m
	}
	m[route]++
}

// routeUsage is one route's count in /me.
type routeUsage struct {
	Route    string `json:"route"`
	Requests int    `json:"requests"`
}

func (u *usageCounter) of(account string, now time.Time) (string, []routeUsage) {
	day := now.UTC().Format(time.DateOnly)
	u.mu.Lock()
	defer u.mu.Unlock()
	out := []routeUsage{}
	if u.day == day {
		for route, n := range u.byID[account] {
			out = append(out, routeUsage{Route: route, Requests: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Route < out[j].Route })
	return day, out
}
