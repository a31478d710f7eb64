package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Third-party figures (/usage) and open-web positions (/web-position) are
// read from interfaces the operator configures: base URLs of the public
// APIs, and a web-search endpoint with its key. They are not publishers'
// domains, so they are called through an ordinary client with timeouts,
// no redirects and a body cap rather than the SSRF-safe fetcher; a test
// points them at loopback fakes.

// maxSourceBody caps what a source may answer; a larger body is refused.
const maxSourceBody = 1 << 20

// errUnexpected is a source answering in a shape it does not document.
var errUnexpected = errors.New("the source answered in an unexpected shape")

// NewSourceClient is the client the sources are called through: bounded
// connect, header and overall times, no redirects.
func NewSourceClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
		TLSHandshakeTimeout:   3 * time.Second,
		ResponseHeaderTimeout: 5 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       60 * time.Second,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       8 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// source is one configured third-party interface with its own rate limit.
type source struct {
	name    string
	base    string // no trailing slash
	header  http.Header
	client  *http.Client
	limiter *rate.Limiter
}

func newSource(name, base string, client *http.Client, perSecond float64, burst int) *source {
	return &source{name: name, base: strings.TrimRight(base, "/"), client: client, header: http.Header{},
		limiter: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// errRateLimited is a call this registry held back to respect a source.
var errRateLimited = errors.New("held back by this registry's rate limit for the source; try again later")

// get calls base+path and returns the body of a 200 answer, at most
// maxSourceBody bytes.
func (s *source) get(ctx context.Context, path string) (string, []byte, error) {
	u := s.base + path
	if !s.limiter.Allow() {
		return u, nil, errRateLimited
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return u, nil, err
	}
	for k, vs := range s.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "ardx-registry-reports")
	resp, err := s.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return u, nil, errors.New("the source did not answer in time")
		}
		return u, nil, errors.New("the source could not be reached")
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return u, nil, errors.New("the source knows no such name (404)")
	}
	if resp.StatusCode != http.StatusOK {
		return u, nil, fmt.Errorf("the source answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSourceBody+1))
	if err != nil {
		return u, nil, errors.New("the source's answer broke off")
	}
	if len(body) > maxSourceBody {
		return u, nil, errors.New("the source's answer is larger than this registry reads")
	}
	return u, body, nil
}

// count reads a JSON value that must be a non-negative integer number (a
// string holding digits is a lie about the type, not a count).
func count(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, errUnexpected
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < 0 {
		return 0, errUnexpected
	}
	return v, nil
}
