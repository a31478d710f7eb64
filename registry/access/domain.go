package access

import (
	"errors"
	"net/netip"
	"strings"
)

// maxDomainLen is the DNS limit on a name.
const maxDomainLen = 253

// ParseDomain checks a publisher domain given by a caller: a bare, fully
// qualified domain name (no scheme, port, path or IP literal) that can
// anchor a urn:air: identifier. It returns the lower-cased name, or a
// message saying what is wrong.
func ParseDomain(raw string) (string, string) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	switch {
	case d == "":
		return "", "must be a domain name such as example.com"
	case strings.Contains(d, "://") || strings.ContainsAny(d, "/?#@"):
		return "", "must be a bare domain name such as example.com, not a URL"
	case strings.Contains(d, ":") || strings.HasPrefix(d, "["):
		if _, err := netip.ParseAddr(strings.Trim(d, "[]")); err == nil {
			return "", "must be a domain name, not an IP address"
		}
		return "", "must be a bare domain name without a port"
	case len(d) > maxDomainLen:
		return "", "is longer than 253 characters"
	case d == "localhost":
		return "", "localhost is not a publisher domain"
	}
	if _, err := netip.ParseAddr(d); err == nil {
		return "", "must be a domain name, not an IP address"
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", "must be a fully qualified domain name such as example.com"
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", "is not a valid domain name"
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", "is not a valid domain name (letters, digits and hyphens only; use the punycode form of international names)"
			}
		}
	}
	if tld := labels[len(labels)-1]; strings.Trim(tld, "0123456789") == "" {
		return "", "must be a domain name, not an IP address"
	}
	return d, ""
}

// NormalizeDomain is ParseDomain with the message as an error.
func NormalizeDomain(raw string) (string, error) {
	d, msg := ParseDomain(raw)
	if msg != "" {
		return "", errors.New("domain " + msg)
	}
	return d, nil
}
