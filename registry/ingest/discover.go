package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/ardx-dev/ardx/web"
)

// Discovery mechanisms, in the order Discover tries them (ARD v0.91 §5.1 and
// the Lighthouse "agentic browsing" audit): an Agentmap line in robots.txt,
// <link rel="ard"> in the home page, an HTTP Link header with rel="ard" on
// the home page, /.well-known/ard.json; then the predecessor's
// rel="ai-catalog" links and /.well-known/ai-catalog.json, which are read
// with a warning.
const (
	MechanismAgentmap        = "robots-agentmap"
	MechanismHTMLLink        = "html-link"
	MechanismHTTPLink        = "http-link"
	MechanismWellKnown       = "well-known"
	MechanismLegacyLink      = "legacy-link"
	MechanismLegacyWellKnown = "legacy-well-known"
)

// ErrNoManifest means a domain answered but publishes no ARD manifest by any
// discovery mechanism.
var ErrNoManifest = errors.New("no ARD manifest found")

// Accept headers of the discovery fetches.
const (
	acceptRobots = "text/plain, */*;q=0.1"
	acceptHome   = "text/html, application/xhtml+xml;q=0.9, */*;q=0.1"
)

// maxPointers bounds how many Agentmap lines and link elements are tried, so
// a page of a thousand links cannot turn one discovery into a thousand
// fetches.
const maxPointers = 5

// Discovery is how a domain's manifest was found: the mechanism, the URL and
// the fetch, every location tried on the way, and warnings for the
// publisher (a pointer that leads nowhere, a predecessor path).
type Discovery struct {
	Domain      string    `json:"domain"`
	Mechanism   string    `json:"mechanism,omitempty"` // one of the Mechanism* values; "" when none succeeded
	ManifestURL string    `json:"manifestUrl,omitempty"`
	Status      int       `json:"status,omitempty"`
	SHA256      string    `json:"sha256,omitempty"`
	FetchedAt   time.Time `json:"fetchedAt,omitzero"`
	// Legacy is set when the manifest came from the v0.9 predecessor
	// (rel="ai-catalog" or /.well-known/ai-catalog.json).
	Legacy   bool      `json:"legacy,omitempty"`
	Tried    []Attempt `json:"tried"`
	Warnings []string  `json:"warnings,omitempty"`
	// Result is the manifest fetch (status 200), nil when none was found.
	Result *web.FetchResult `json:"-"`
}

// Attempt is one location Discover looked at.
type Attempt struct {
	Mechanism string `json:"mechanism"`
	URL       string `json:"url"`
	Status    int    `json:"status,omitempty"`
	Error     string `json:"error,omitempty"`
}

// fetchClient is what discovery and crawling fetch through: the polite
// crawler client or a bare Fetcher.
type fetchClient interface {
	Get(ctx context.Context, rawURL, accept string) (*web.FetchResult, error)
	Do(req *http.Request) (*web.FetchResult, error)
}

// Discover finds a domain's ARD manifest by the mechanisms of ARD v0.91 in
// Lighthouse's order and fetches it. The returned Discovery is never nil: on
// error it still lists every location tried. The error wraps ErrNoManifest
// when the domain answered but none of the locations gave a manifest (200),
// and is the transport error when the domain cannot be reached at all.
func Discover(ctx context.Context, f *web.Fetcher, domain string) (*Discovery, error) {
	return discover(ctx, plainClient{f}, domain)
}

func discover(ctx context.Context, c fetchClient, domain string) (*Discovery, error) {
	domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	d := &Discovery{Domain: domain, Tried: []Attempt{}}
	if msg := checkPublisher(domain); msg != "" || strings.ContainsAny(domain, "/:@ ") {
		if msg == "" {
			msg = fmt.Sprintf("%q is not a domain name", domain)
		}
		return d, errors.New(msg)
	}
	base := "https://" + domain

	// try fetches one candidate; it reports whether it is the manifest.
	try := func(mech, rawURL string) (bool, error) {
		res, err := c.Get(ctx, rawURL, manifestAccept)
		a := Attempt{Mechanism: mech, URL: rawURL}
		if err != nil {
			a.Error = err.Error()
			d.Tried = append(d.Tried, a)
			if errors.Is(err, web.ErrTooLarge) {
				// The manifest is there, and unusable: that is the
				// publisher's answer, not a reason to look elsewhere.
				d.Mechanism, d.ManifestURL = mech, rawURL
				return false, &fatalError{fmt.Errorf("manifest %s: %w", rawURL, err)}
			}
			return false, err
		}
		a.Status = res.Status
		d.Tried = append(d.Tried, a)
		if res.Status != http.StatusOK {
			return false, nil
		}
		d.Mechanism, d.ManifestURL, d.Result = mech, rawURL, res
		d.Status, d.SHA256, d.FetchedAt = res.Status, res.SHA256, res.FetchedAt
		return true, nil
	}
	// pointer tries a URL a publisher pointed at, warning when it leads
	// nowhere.
	pointer := func(mech, rawURL, where string) (bool, error) {
		ok, err := try(mech, rawURL)
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return false, fatal.err
		}
		if ok || ctx.Err() != nil {
			return ok, ctx.Err()
		}
		last := d.Tried[len(d.Tried)-1]
		what := fmt.Sprintf("answered %d", last.Status)
		if err != nil {
			what = "failed: " + err.Error()
		}
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s points at %s, which %s", where, rawURL, what))
		return false, nil
	}

	// 1. robots.txt. A transport error here means the host cannot be
	// reached at all: report that rather than five more failures.
	robotsURL := base + "/robots.txt"
	res, err := c.Get(ctx, robotsURL, acceptRobots)
	if err != nil {
		d.Tried = append(d.Tried, Attempt{Mechanism: MechanismAgentmap, URL: robotsURL, Error: err.Error()})
		return d, fmt.Errorf("%s cannot be reached: %w", domain, err)
	}
	d.Tried = append(d.Tried, Attempt{Mechanism: MechanismAgentmap, URL: robotsURL, Status: res.Status})
	if res.Status == http.StatusOK {
		for _, u := range AgentmapURLs(res.Body, res.URL) {
			if ok, err := pointer(MechanismAgentmap, u, "robots.txt Agentmap"); ok || err != nil {
				return d, err
			}
		}
	}

	// 2 and 3. The home page: <link rel="ard"> first, then the Link header.
	var legacy []string
	homeURL := base + "/"
	if res, err := c.Get(ctx, homeURL, acceptHome); err != nil {
		d.Tried = append(d.Tried, Attempt{Mechanism: MechanismHTMLLink, URL: homeURL, Error: err.Error()})
	} else {
		d.Tried = append(d.Tried, Attempt{Mechanism: MechanismHTMLLink, URL: homeURL, Status: res.Status})
		htmlARD, htmlLegacy := HTMLLinks(res.Body, res.URL)
		headerARD, headerLegacy := HeaderLinks(res.Header, res.URL)
		legacy = append(htmlLegacy, headerLegacy...)
		for _, u := range htmlARD {
			if ok, err := pointer(MechanismHTMLLink, u, `<link rel="ard"> in the home page`); ok || err != nil {
				return d, err
			}
		}
		for _, u := range headerARD {
			if ok, err := pointer(MechanismHTTPLink, u, `the home page's Link header (rel="ard")`); ok || err != nil {
				return d, err
			}
		}
	}

	// 4. The v0.91 well-known path.
	if ok, err := try(MechanismWellKnown, base+WellKnownARD); ok || ctx.Err() != nil || isFatal(err) {
		return d, firstError(unwrapFatal(err), ctx.Err())
	}

	// 5. The predecessor, with a warning either way it is found.
	warnLegacy := func(where string) {
		d.Legacy = true
		d.Warnings = append(d.Warnings, fmt.Sprintf("the manifest was found only through the deprecated %s; publish it at %s (clients need not support the old route)", where, WellKnownARD))
	}
	for i, u := range legacy {
		if i == maxPointers {
			break
		}
		if ok, err := try(MechanismLegacyLink, u); ok || isFatal(err) {
			warnLegacy(`rel="ai-catalog" link`)
			return d, unwrapFatal(err)
		}
		if ctx.Err() != nil {
			return d, ctx.Err()
		}
	}
	if ok, err := try(MechanismLegacyWellKnown, base+WellKnownAICatalog); ok || isFatal(err) {
		warnLegacy("path " + WellKnownAICatalog)
		return d, unwrapFatal(err)
	}
	if ctx.Err() != nil {
		return d, ctx.Err()
	}
	var tried []string
	for _, a := range d.Tried {
		s := a.Error
		if s == "" {
			s = fmt.Sprint(a.Status)
		}
		tried = append(tried, a.URL+" "+s)
	}
	return d, fmt.Errorf("%w for %s (tried %s)", ErrNoManifest, domain, strings.Join(tried, ", "))
}

// fatalError marks a manifest that was found but cannot be used (too
// large): discovery stops there instead of trying further locations.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

func isFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

func unwrapFatal(err error) error {
	var f *fatalError
	if errors.As(err, &f) {
		return f.err
	}
	return nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// AgentmapURLs returns the absolute http(s) URLs of the Agentmap lines of a
// robots.txt (the directive name is case-insensitive, as robots.txt
// directives are), relative ones resolved against robotsURL, at most five.
func AgentmapURLs(body []byte, robotsURL string) []string {
	base, _ := url.Parse(robotsURL)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() && len(out) < maxPointers {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "agentmap") {
			continue
		}
		if u := resolveHTTP(base, strings.TrimSpace(value)); u != "" && !contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// HTMLLinks returns the hrefs of <link> elements whose rel holds "ard" and,
// separately, "ai-catalog", resolved against pageURL (or a <base href>), at
// most five of each. Only the document head is read: a <link> in the body
// is not a page-level relation.
func HTMLLinks(body []byte, pageURL string) (ard, legacy []string) {
	base, _ := url.Parse(pageURL)
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ard, legacy
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "body":
				return ard, legacy
			case "base", "link":
			default:
				continue
			}
			var rel, href string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "rel":
					rel = string(v)
				case "href":
					href = strings.TrimSpace(string(v))
				}
			}
			if string(name) == "base" {
				if b, err := url.Parse(href); err == nil && base != nil && href != "" {
					base = base.ResolveReference(b)
				}
				continue
			}
			for _, r := range strings.Fields(strings.ToLower(rel)) {
				u := resolveHTTP(base, href)
				if u == "" {
					break
				}
				switch {
				case r == "ard" && len(ard) < maxPointers && !contains(ard, u):
					ard = append(ard, u)
				case r == "ai-catalog" && len(legacy) < maxPointers && !contains(legacy, u):
					legacy = append(legacy, u)
				}
			}
		}
	}
}

// HeaderLinks returns the targets of RFC 8288 Link header values with
// rel="ard" and, separately, rel="ai-catalog", resolved against pageURL.
func HeaderLinks(h http.Header, pageURL string) (ard, legacy []string) {
	base, _ := url.Parse(pageURL)
	for _, v := range h.Values("Link") {
		for _, link := range splitLinks(v) {
			target, params, ok := parseLink(link)
			if !ok {
				continue
			}
			u := resolveHTTP(base, target)
			if u == "" {
				continue
			}
			for _, r := range strings.Fields(strings.ToLower(params["rel"])) {
				switch {
				case r == "ard" && len(ard) < maxPointers && !contains(ard, u):
					ard = append(ard, u)
				case r == "ai-catalog" && len(legacy) < maxPointers && !contains(legacy, u):
					legacy = append(legacy, u)
				}
			}
		}
	}
	return ard, legacy
}

// splitLinks splits a Link header value at the commas between links, not
// those inside <...> or quoted strings.
func splitLinks(v string) []string {
	var out []string
	inURL, inQuote, start := false, false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inQuote:
			if c == '\\' {
				i++
			} else if c == '"' {
				inQuote = false
			}
		case c == '<':
			inURL = true
		case c == '>':
			inURL = false
		case c == '"' && !inURL:
			inQuote = true
		case c == ',' && !inURL:
			out = append(out, v[start:i])
			start = i + 1
		}
	}
	return append(out, v[start:])
}

// parseLink reads `<target>; name=value; name="value"`; parameter names are
// lower-cased.
func parseLink(s string) (target string, params map[string]string, ok bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "<") {
		return "", nil, false
	}
	end := strings.IndexByte(s, '>')
	if end < 0 {
		return "", nil, false
	}
	target = strings.TrimSpace(s[1:end])
	params = map[string]string{}
	for _, p := range strings.Split(s[end+1:], ";") {
		k, v, _ := strings.Cut(p, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		if _, dup := params[k]; !dup { // RFC 8288: the first rel wins
			params[k] = v
		}
	}
	return target, params, true
}

// resolveHTTP resolves ref against base and keeps it only when the result is
// an absolute http(s) URL.
func resolveHTTP(base *url.URL, ref string) string {
	if ref == "" {
		return ""
	}
	r, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if base != nil {
		r = base.ResolveReference(r)
	}
	if (r.Scheme != "https" && r.Scheme != "http") || r.Host == "" || r.User != nil {
		return ""
	}
	r.Fragment = ""
	out := r.String()
	// What we return must parse again to a URL with a host: "https://::"
	// comes out of ResolveReference but is no fetchable URL.
	if back, err := url.Parse(out); err != nil || back.Hostname() == "" {
		return ""
	}
	return out
}
