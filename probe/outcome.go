package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"time"

	"github.com/ardx-dev/ardx/web"
)

// Class is the outcome class of one probe.
type Class string

// Outcome classes. Answered classes (ok, auth required) count as successes:
// the endpoint is there and speaks; a server that wants a token is not down.
const (
	ClassOK            Class = "ok"
	ClassAuthRequired  Class = "auth_required"
	ClassHTTPError     Class = "http_error"     // an HTTP answer that is not a usable one (5xx, 404, ...)
	ClassProtocolError Class = "protocol_error" // an HTTP answer the protocol does not allow (bad JSON-RPC, not a card)
	ClassTimeout       Class = "timeout"
	ClassConnect       Class = "connect_error" // DNS, TCP connect or TLS failed
	ClassBlocked       Class = "blocked"       // the address is one the SSRF guard refuses: never dialled
)

// Classes lists every class in report order.
var Classes = []Class{ClassOK, ClassAuthRequired, ClassHTTPError, ClassProtocolError, ClassTimeout, ClassConnect, ClassBlocked}

// Answered reports whether the class counts as the endpoint answering.
func (c Class) Answered() bool { return c == ClassOK || c == ClassAuthRequired }

// Observation is what one probe saw. A check leaves Class empty to have it
// derived from Err (nil: ok).
type Observation struct {
	Class Class
	Err   error
	// Tools, SchemaHash and ToolHashes are an MCP server's tool list: the
	// count, a hash over every tool's description hash, and each tool's
	// description hash by name (nil when not read this time).
	Tools      *int
	SchemaHash string
	ToolHashes map[string]string
	// Pay is set by a paid endpoint's check: the fingerprints of the terms
	// its 402 answer stated (empty, not nil, for an answer without a 402).
	Pay []string
}

// Classify maps a failed fetch to its class: a deadline is a timeout, a
// refused address is blocked, DNS/dial/TLS failures are connect errors, and
// anything else (the exchange happened but made no sense) a protocol error.
func Classify(err error) Class {
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
		recErr  tls.RecordHeaderError
	)
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, web.ErrForbiddenAddress):
		return ClassBlocked
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.As(err, &dnsErr), errors.As(err, &opErr), errors.As(err, &certErr),
		errors.As(err, &unknown), errors.As(err, &hostErr), errors.As(err, &recErr):
		return ClassConnect
	}
	return ClassProtocolError
}

// LatencyBounds are the upper bounds of the latency histogram's buckets;
// the last bucket holds everything slower.
var LatencyBounds = []time.Duration{
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	300 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second,
	1500 * time.Millisecond, 2 * time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second,
}

// latencyBucket is d's histogram bucket.
func latencyBucket(d time.Duration) int {
	for i, b := range LatencyBounds {
		if d <= b {
			return i
		}
	}
	return len(LatencyBounds)
}
