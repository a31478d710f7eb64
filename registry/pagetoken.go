package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

// Page tokens are opaque to callers: base64url(kind | issued | payload |
// mac), where issued is the Unix second the token was made and the MAC
// (HMAC-SHA256, truncated) covers the kind, a hash of the request's scope
// (the query, filter and routing that produced the ranking), the time and
// the payload. A token altered by hand, or presented with a different
// query, fails the MAC and is rejected; a genuine one older than tokenTTL
// is refused as expired. The key lives in kv, so tokens survive restarts.
const (
	tokenSearch byte = 's'
	tokenAgents byte = 'a'

	tokenMACLen = 12
	// maxTokenLen keeps a hostile token from costing more than a hash.
	maxTokenLen = 2048
	// tokenTTL is how long a page token is honoured: long enough to page
	// through a result set, short enough that nobody builds on one.
	tokenTTL = 24 * time.Hour
)

var (
	errBadToken     = errors.New("registry: bad page token")
	errTokenExpired = errors.New("registry: page token expired")
)

type tokenSealer struct {
	key []byte
	now func() time.Time
}

func (ts tokenSealer) mac(kind byte, scope, signed []byte) []byte {
	scopeSum := sha256.Sum256(scope)
	m := hmac.New(sha256.New, ts.key)
	m.Write([]byte{kind})
	m.Write(scopeSum[:])
	m.Write(signed)
	return m.Sum(nil)[:tokenMACLen]
}

// seal returns the token for payload within scope, issued now.
func (ts tokenSealer) seal(kind byte, scope, payload []byte) string {
	buf := make([]byte, 0, 1+binary.MaxVarintLen64+len(payload)+tokenMACLen)
	buf = append(buf, kind)
	buf = binary.AppendUvarint(buf, uint64(ts.now().Unix()))
	buf = append(buf, payload...)
	buf = append(buf, ts.mac(kind, scope, buf[1:])...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// open checks tok against scope and returns its payload: errBadToken for
// a token that is not one of this scope, errTokenExpired for a genuine one
// past tokenTTL.
func (ts tokenSealer) open(kind byte, scope []byte, tok string) ([]byte, error) {
	if len(tok) > maxTokenLen {
		return nil, errBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 1+tokenMACLen || raw[0] != kind {
		return nil, errBadToken
	}
	signed := raw[1 : len(raw)-tokenMACLen]
	if !hmac.Equal(raw[len(raw)-tokenMACLen:], ts.mac(kind, scope, signed)) {
		return nil, errBadToken
	}
	issued, n := binary.Uvarint(signed)
	if n <= 0 {
		return nil, errBadToken
	}
	if age := ts.now().Sub(time.Unix(int64(issued), 0)); age > tokenTTL {
		return nil, errTokenExpired
	}
	return signed[n:], nil
}

// tokenMessage is the field message for a page token open refused.
func tokenMessage(err error, sameAs string) string {
	if errors.Is(err, errTokenExpired) {
		return "has expired (page tokens live " + tokenTTL.String() + "); start again from the first page"
	}
	return "is not a page token of this " + sameAs + "; send the same " + sameAs + " as the request that returned it"
}
