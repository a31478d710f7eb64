package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

// Page tokens are opaque to callers: base64url(kind | payload | mac), where
// the MAC (HMAC-SHA256, truncated) covers the kind, a hash of the request's
// scope (the query, filter and routing that produced the ranking) and the
// payload. A token altered by hand, or presented with a different query,
// fails the MAC and is rejected.
const (
	tokenSearch byte = 's'
	tokenAgents byte = 'a'

	tokenMACLen = 12
	// maxTokenLen keeps a hostile token from costing more than a hash.
	maxTokenLen = 2048
)

var errBadToken = errors.New("registry: bad page token")

type tokenSealer struct{ key []byte }

func (ts tokenSealer) mac(kind byte, scope, payload []byte) []byte {
	scopeSum := sha256.Sum256(scope)
	m := hmac.New(sha256.New, ts.key)
	m.Write([]byte{kind})
	m.Write(scopeSum[:])
	m.Write(payload)
	return m.Sum(nil)[:tokenMACLen]
}

// seal returns the token for payload within scope.
func (ts tokenSealer) seal(kind byte, scope, payload []byte) string {
	buf := make([]byte, 0, 1+len(payload)+tokenMACLen)
	buf = append(buf, kind)
	buf = append(buf, payload...)
	buf = append(buf, ts.mac(kind, scope, payload)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// open checks tok against scope and returns its payload.
func (ts tokenSealer) open(kind byte, scope []byte, tok string) ([]byte, error) {
	if len(tok) > maxTokenLen {
		return nil, errBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 1+tokenMACLen || raw[0] != kind {
		return nil, errBadToken
	}
	payload := raw[1 : len(raw)-tokenMACLen]
	if !hmac.Equal(raw[len(raw)-tokenMACLen:], ts.mac(kind, scope, payload)) {
		return nil, errBadToken
	}
	return payload, nil
}
