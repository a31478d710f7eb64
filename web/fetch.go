package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// Errors of the outbound client. Returned errors wrap them together with the
// host or address at fault, so callers test with errors.Is.
var (
	// ErrForbiddenAddress means a host resolved to (or was) an address the
	// client refuses to connect to: loopback, private, link-local, CGNAT,
	// multicast, reserved, documentation or a cloud metadata address.
	ErrForbiddenAddress = errors.New("forbidden address")
	// ErrTooLarge means a response body was larger than FetchOptions.MaxBytes.
	ErrTooLarge = errors.New("response body too large")
	// ErrTooManyRedirects means a fetch followed more than
	// FetchOptions.MaxRedirects redirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrBadURL means a URL the client will not fetch: a scheme other than
	// http or https, user information, or no host.
	ErrBadURL = errors.New("unfetchable URL")
)

// Defaults of FetchOptions.
const (
	DefaultFetchMaxBytes     = 5 << 20
	DefaultFetchTimeout      = 10 * time.Second
	DefaultFetchMaxRedirects = 5
)

// FetchOptions configures a Fetcher. The zero value is the safe production
// configuration.
type FetchOptions struct {
	// AllowPrivate lifts the address check, so loopback and private
	// networks can be fetched. It is for tests and local development only:
	// in production it turns every publisher-supplied URL into a way to
	// reach the operator's internal network. Cloud metadata addresses stay
	// refused even then.
	AllowPrivate bool
	// MaxBytes caps a response body; a larger body fails with ErrTooLarge.
	// Zero means 5 MiB.
	MaxBytes int64
	// Timeout bounds a whole request including redirects and reading the
	// body. Zero means 10 s.
	Timeout time.Duration
	// MaxRedirects is how many redirects a fetch follows. Zero means 5; a
	// negative value follows none.
	MaxRedirects int
	// UserAgent is sent with every request. Empty means
	// "ardx/<version> (+ARD registry)".
	UserAgent string
	// Resolve pins domains to loopback addresses, like curl --resolve:
	// "example.com" -> "127.0.0.1:8080". A pinned domain is fetched over plain
	// http at that address whatever the URL's scheme and port, and the
	// address check is lifted for it alone; the URL and Host header keep the
	// domain name. Meant for tests and local development.
	Resolve map[string]string
	// LookupNetIP resolves host names; nil means net.DefaultResolver. Tests
	// use it to make a name resolve to a chosen address.
	LookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// FetchResult is one completed fetch. Non-2xx statuses are results, not
// errors: the caller decides what a 404 means.
type FetchResult struct {
	URL       string // the final URL, after redirects
	Status    int
	Header    http.Header
	Body      []byte
	FetchedAt time.Time
	SHA256    string // hex SHA-256 of Body
}

// Fetcher is the SSRF-safe outbound HTTP client. Every fetch of a URL that a
// publisher controls goes through one: it resolves the host itself, refuses
// addresses inside the operator's network, dials exactly the address it
// checked (so DNS rebinding cannot swap it), re-checks every redirect, and
// caps size and time. It is safe for concurrent use.
type Fetcher struct {
	opts    FetchOptions
	resolve map[string]string // lower-cased host -> host:port
	client  *http.Client
}

// NewFetcher returns a Fetcher with opts, defaults filled in.
func NewFetcher(opts FetchOptions) *Fetcher {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultFetchMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultFetchTimeout
	}
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = DefaultFetchMaxRedirects
	} else if opts.MaxRedirects < 0 {
		opts.MaxRedirects = 0
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "ardx/" + moduleVersion() + " (+ARD registry)"
	}
	if opts.LookupNetIP == nil {
		opts.LookupNetIP = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	f := &Fetcher{opts: opts, resolve: make(map[string]string, len(opts.Resolve))}
	for host, addr := range opts.Resolve {
		f.resolve[strings.ToLower(strings.TrimSuffix(host, "."))] = addr
	}

	tr := &http.Transport{
		// Never a proxy from the environment: the proxy would do the
		// connecting and our address check would guard nothing.
		Proxy:                  nil,
		DialContext:            f.dialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  opts.Timeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        30 * time.Second,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    2,
		MaxResponseHeaderBytes: 64 << 10,
	}
	f.client = &http.Client{
		Transport:     &guardedTransport{f: f, next: tr},
		Timeout:       opts.Timeout,
		CheckRedirect: f.checkRedirect,
	}
	return f
}

// HTTPClient returns the guarded client for libraries that want an
// *http.Client. Its responses carry the same address, redirect, time and
// size checks; reading a body past MaxBytes fails with ErrTooLarge.
func (f *Fetcher) HTTPClient() *http.Client { return f.client }

// Get fetches rawURL with the given Accept header (none when empty).
func (f *Fetcher) Get(ctx context.Context, rawURL, accept string) (*FetchResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return f.Do(req)
}

// Do sends req (a POST to an MCP endpoint, say) with the same checks as Get
// and reads the whole body. A request without a User-Agent gets the
// Fetcher's.
func (f *Fetcher) Do(req *http.Request) (*FetchResult, error) {
	if err := checkURL(req.URL); err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", resp.Request.URL.Redacted(), err)
	}
	sum := sha256.Sum256(body)
	return &FetchResult{
		URL:       resp.Request.URL.String(),
		Status:    resp.StatusCode,
		Header:    resp.Header,
		Body:      body,
		FetchedAt: time.Now().UTC(),
		SHA256:    hex.EncodeToString(sum[:]),
	}, nil
}

// checkRedirect refuses a redirect past the limit or to a URL we would not
// fetch in the first place. Addresses of redirect targets are checked when
// they are dialled, like any other.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.opts.MaxRedirects {
		return fmt.Errorf("%w: more than %d, last to %s", ErrTooManyRedirects, f.opts.MaxRedirects, req.URL.Redacted())
	}
	return checkURL(req.URL)
}

// checkURL allows only absolute http(s) URLs without user information:
// credentials in a publisher's URL would be sent to wherever it redirects.
func checkURL(u *url.URL) error {
	if u == nil {
		return fmt.Errorf("%w: no URL", ErrBadURL)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("%w: scheme %q is not http or https", ErrBadURL, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: URLs with user information are not fetched", ErrBadURL)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%w: no host in %q", ErrBadURL, u.Redacted())
	}
	return nil
}

// guardedTransport sends requests for pinned domains over plain http, sets
// the User-Agent, and caps response bodies.
type guardedTransport struct {
	f    *Fetcher
	next http.RoundTripper
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	out := req
	if _, pinned := t.f.resolve[strings.ToLower(req.URL.Hostname())]; pinned && req.URL.Scheme != "http" {
		// Pinned domains are served by a plain-http test server; the URL
		// handed back to the caller keeps its https scheme.
		out = req.Clone(req.Context())
		out.URL.Scheme = "http"
		if out.Host == "" {
			out.Host = req.URL.Host
		}
	}
	if out.Header.Get("User-Agent") == "" {
		if out == req {
			out = req.Clone(req.Context())
		}
		out.Header.Set("User-Agent", t.f.opts.UserAgent)
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	resp.Request = req
	max := t.f.opts.MaxBytes
	if resp.ContentLength > max {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s declares %d bytes, limit %d", ErrTooLarge, req.URL.Host, resp.ContentLength, max)
	}
	resp.Body = &cappedBody{rc: resp.Body, left: max, max: max, host: req.URL.Host}
	return resp, nil
}

// cappedBody fails with ErrTooLarge instead of silently truncating: a cut
// manifest would parse as a different document.
type cappedBody struct {
	rc   io.ReadCloser
	left int64 // bytes still allowed
	max  int64
	host string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("%w: %s sent more than %d bytes", ErrTooLarge, b.host, b.max)
	}
	// Read one byte past the limit so an exactly-full body still ends with
	// io.EOF, and a longer one is detected.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), fmt.Errorf("%w: %s sent more than %d bytes", ErrTooLarge, b.host, b.max)
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// dialContext resolves the host itself, checks every address, and dials the
// checked address, never the name: a second resolution could return a
// different (internal) address.
func (f *Fetcher) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if target, ok := f.resolve[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return d.DialContext(ctx, network, target)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = f.opts.LookupNetIP(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	// One forbidden address refuses the whole name: a public name that
	// also resolves inside our network is an attack or a mistake.
	for _, ip := range ips {
		if err := f.checkAddr(ip); err != nil {
			return nil, fmt.Errorf("%w (host %s)", err, host)
		}
	}
	// The Control hook re-checks the address actually connected to, as a
	// second line should a future change dial something else.
	d.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: unparsable address %q", ErrForbiddenAddress, address)
		}
		return f.checkAddr(ap.Addr())
	}
	var firstErr error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

func (f *Fetcher) checkAddr(ip netip.Addr) error {
	if reason := metadataAddr(ip); reason != "" {
		return fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, ip, reason)
	}
	if f.opts.AllowPrivate {
		return nil
	}
	if reason := ForbiddenAddr(ip); reason != "" {
		return fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, ip, reason)
	}
	return nil
}

// Cloud metadata services answer unauthenticated requests with credentials;
// they are refused even with AllowPrivate.
var metadataAddrs = map[netip.Addr]string{
	netip.MustParseAddr("169.254.169.254"): "a cloud metadata address",
	netip.MustParseAddr("fd00:ec2::254"):   "a cloud metadata address",
	netip.MustParseAddr("100.100.100.200"): "a cloud metadata address",
}

func metadataAddr(ip netip.Addr) string {
	return metadataAddrs[ip.Unmap().WithZone("")]
}

type namedPrefix struct {
	p    netip.Prefix
	name string
}

// The IANA special-purpose ranges the client refuses besides what netip's
// predicates cover; IPv6 outside 2000::/3 is refused wholesale.
var forbiddenV4 = []namedPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), "in \"this network\" (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (10.0.0.0/8)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (172.16.0.0/12)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (192.0.2.0/24)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (192.88.99.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (192.168.0.0/16)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (198.51.100.0/24)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (203.0.113.0/24)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4, including broadcast)"},
}

var (
	globalV6  = netip.MustParsePrefix("2000::/3")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

var forbiddenV6 = []namedPrefix{
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (2001::/23, including Teredo)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (2001:db8::/32)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation (3fff::/20)"},
}

// ForbiddenAddr says why the outbound client refuses to connect to ip, or
// returns "" when ip is a public unicast address. IPv4-mapped IPv6 and the
// IPv4 addresses embedded in NAT64 and 6to4 addresses are judged as IPv4.
func ForbiddenAddr(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not an address"
	}
	ip = ip.WithZone("")
	if reason := metadataAddr(ip); reason != "" {
		return reason
	}
	if ip.Is4In6() {
		if r := ForbiddenAddr(ip.Unmap()); r != "" {
			return r + " (IPv4-mapped)"
		}
		return ""
	}
	if ip.Is4() {
		for _, np := range forbiddenV4 {
			if np.p.Contains(ip) {
				return np.name
			}
		}
		return ""
	}
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	case ip.IsPrivate():
		return "unique local (fc00::/7)"
	case nat64.Contains(ip):
		b := ip.As16()
		if r := ForbiddenAddr(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return r + " (NAT64)"
		}
		return ""
	case !globalV6.Contains(ip):
		return "outside IPv6 global unicast (2000::/3)"
	case sixToFour.Contains(ip):
		b := ip.As16()
		if r := ForbiddenAddr(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return r + " (6to4)"
		}
		return ""
	}
	for _, np := range forbiddenV6 {
		if np.p.Contains(ip) {
			return np.name
		}
	}
	return ""
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return "dev"
}
