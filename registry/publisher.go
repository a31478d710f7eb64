package registry

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"

	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// The publisher tools (POST /manifest/build, /doctor, /audit) read a
// publisher's domain through the SSRF-safe Fetcher and never store what they
// read: they answer with what they saw.

// parseDomain checks a publisher domain given by a caller (access.ParseDomain):
// the lower-cased name, or a message saying what is wrong.
func parseDomain(raw string) (string, string) { return access.ParseDomain(raw) }

// domainMember reads a required "domain" member into fe's errors.
func domainMember(m map[string]json.RawMessage, fe *fieldErrors) string {
	raw, ok := m["domain"]
	if !ok || isNull(raw) {
		fe.add("domain", "is required: the publisher's domain name, such as example.com")
		return ""
	}
	s, ok := rawString(raw)
	if !ok {
		fe.add("domain", "must be a string")
		return ""
	}
	d, msg := parseDomain(s)
	if msg != "" {
		fe.add("domain", msg)
	}
	return d
}

// withinDomain reports whether host is domain or one of its subdomains.
func withinDomain(host, domain string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return domain != "" && (host == domain || strings.HasSuffix(host, "."+domain))
}

// hostOf is the lower-cased host name of rawURL, or "".
func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// publisherOf is the publisher segment of a urn:air: identifier.
func publisherOf(id string) string {
	rest, ok := strings.CutPrefix(id, "urn:air:")
	if !ok {
		return ""
	}
	pub, _, _ := strings.Cut(rest, ":")
	return pub
}

// Stable codes of outbound fetch failures, shared by the doctor's findings
// and the builder's and audit's source reports.
const (
	codeAddressForbidden = "fetch.address-forbidden"
	codeHostUnknown      = "fetch.host-unknown"
	codeFetchTimeout     = "fetch.timeout"
	codeFetchTooLarge    = "fetch.too-large"
	codeFetchRedirects   = "fetch.too-many-redirects"
	codeFetchBadURL      = "fetch.bad-url"
	codeFetchFailed      = "fetch.failed"
)

// describeFetchError classifies an outbound fetch error into a stable code
// and a sentence a publisher can act on, without leaking more of our
// network than the error already names.
func describeFetchError(err error) (code, msg string) {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, web.ErrForbiddenAddress):
		return codeAddressForbidden, "the host resolves to an address this registry never fetches (loopback, private, link-local or reserved): " + err.Error()
	case errors.As(err, &dnsErr):
		// Never dnsErr.Error(): it names this machine's resolver.
		why := "no such host"
		switch {
		case dnsErr.IsTimeout:
			why = "the lookup timed out"
		case !dnsErr.IsNotFound:
			why = "the lookup failed"
		}
		return codeHostUnknown, "the host name " + dnsErr.Name + " does not resolve: " + why
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return codeFetchTimeout, "the host did not answer in time"
	case errors.Is(err, web.ErrTooLarge):
		return codeFetchTooLarge, "the response is larger than this registry reads: " + err.Error()
	case errors.Is(err, web.ErrTooManyRedirects):
		return codeFetchRedirects, err.Error()
	case errors.Is(err, web.ErrBadURL):
		return codeFetchBadURL, err.Error()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		// Op and the remote address only: Error() also names our own
		// (local) address.
		msg := opErr.Op
		if opErr.Addr != nil {
			msg += " " + opErr.Addr.String()
		}
		inner := opErr.Err
		for errors.Unwrap(inner) != nil {
			inner = errors.Unwrap(inner)
		}
		return codeFetchFailed, "the fetch failed: " + msg + ": " + inner.Error()
	}
	return codeFetchFailed, "the fetch failed: " + err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
