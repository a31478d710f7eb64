package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// A key reads "ardx_<id>_<secret>": id is 16 hex digits, the public lookup;
// secret is 32 random bytes in unpadded base64url. Only the SHA-256 of the
// whole key is stored, and the presented key's hash is compared with it in
// constant time.
const (
	keyPrefix    = "ardx_"
	keyIDLen     = 16
	keySecretLen = 43 // base64url of 32 bytes, unpadded
	keyLen       = len(keyPrefix) + keyIDLen + 1 + keySecretLen
)

// Errors of Authenticate. Each is a 401 to the caller, never an anonymous
// answer: someone who sent a key meant to be someone.
var (
	ErrMalformedKey = errors.New("access: the Authorization header is not \"Bearer <key>\" with an ardx key")
	ErrUnknownKey   = errors.New("access: the key is not valid")
	ErrRevokedKey   = errors.New("access: the key has been revoked")
)

// IsAuthError reports whether err is one of Authenticate's key errors.
func IsAuthError(err error) bool {
	return errors.Is(err, ErrMalformedKey) || errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrRevokedKey)
}

func mintKey(accountID string, now time.Time) (string, kv.APIKey, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", kv.APIKey{}, fmt.Errorf("access: key: %w", err)
	}
	id := randomHex(keyIDLen / 2)
	key := keyPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret)
	sum := sha256.Sum256([]byte(key))
	return key, kv.APIKey{ID: id, Hash: sum[:], AccountID: accountID, CreatedAt: now}, nil
}

// parseKey splits a presented key into its id, or reports it malformed.
func parseKey(key string) (string, bool) {
	if len(key) != keyLen || !strings.HasPrefix(key, keyPrefix) || key[len(keyPrefix)+keyIDLen] != '_' {
		return "", false
	}
	id := key[len(keyPrefix) : len(keyPrefix)+keyIDLen]
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	if _, err := base64.RawURLEncoding.DecodeString(key[len(keyPrefix)+keyIDLen+1:]); err != nil {
		return "", false
	}
	return id, true
}

// Authenticate reads an Authorization header value. An empty header is an
// anonymous caller (nil, nil); anything else must be "Bearer <key>" with a
// live key, else one of ErrMalformedKey, ErrUnknownKey, ErrRevokedKey.
func (s *Store) Authenticate(authorization string) (*Caller, error) {
	if authorization == "" {
		return nil, nil
	}
	scheme, key, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, ErrMalformedKey
	}
	key = strings.TrimSpace(key)
	id, ok := parseKey(key)
	if !ok {
		return nil, ErrMalformedKey
	}
	rec, a, err := s.db.GetKeyAccount(id)
	if errors.Is(err, kv.ErrNotFound) {
		// Hash anyway, so an unknown id costs what a known one does.
		sum := sha256.Sum256([]byte(key))
		_ = subtle.ConstantTimeCompare(sum[:], make([]byte, len(sum)))
		return nil, ErrUnknownKey
	}
	if err != nil {
		return nil, fmt.Errorf("access: authenticate: %w", err)
	}
	sum := sha256.Sum256([]byte(key))
	if subtle.ConstantTimeCompare(sum[:], rec.Hash) != 1 {
		return nil, ErrUnknownKey
	}
	if !rec.RevokedAt.IsZero() {
		return nil, ErrRevokedKey
	}
	c := &Caller{AccountID: a.ID, KeyID: rec.ID}
	for _, d := range a.Domains {
		if d.Via == ViaClaim {
			c.Claimed = append(c.Claimed, d.Domain)
		}
	}
	slices.Sort(c.Claimed)
	c.Claimed = slices.Compact(c.Claimed)
	return c, nil
}

// RotateKey revokes the caller's key and returns a new one for the same
// account, shown once. The old key stops working when this returns.
func (s *Store) RotateKey(c *Caller) (string, error) {
	if c == nil {
		return "", ErrUnknownKey
	}
	key, rec, err := mintKey(c.AccountID, s.now().UTC())
	if err != nil {
		return "", err
	}
	if err := s.db.RotateAPIKey(c.KeyID, rec, rec.CreatedAt); err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return "", ErrRevokedKey
		}
		return "", fmt.Errorf("access: rotate key: %w", err)
	}
	return key, nil
}

// KeyInfo describes one key of an account without its secret.
type KeyInfo struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// Keys lists the account's keys, revoked ones included, oldest first.
func (s *Store) Keys(accountID string) ([]KeyInfo, error) {
	ks, err := s.db.AccountKeys(accountID)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, len(ks))
	for i, k := range ks {
		out[i] = KeyInfo{ID: k.ID, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
	}
	return out, nil
}
