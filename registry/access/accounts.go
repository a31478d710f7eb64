package access

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
)

// How an account holds a domain (kv stores the same words).
const (
	ViaClaim      = kv.HeldByClaim
	ViaMonitoring = kv.HeldByMonitoring
)

// Store is the access domain over one kv store. It is safe for concurrent
// use; every write is committed (fsync) before a method returns.
type Store struct {
	db     *kv.DB
	now    func() time.Time
	claims ClaimConfig
}

// New returns a Store over db; now is the clock (nil means time.Now).
func New(db *kv.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// Account is one holder of keys and domains.
type Account = kv.Account

// Holding is one domain an account holds and how (ViaClaim or ViaMonitoring).
type Holding = kv.AccountDomain

// ErrNoAccount is returned for an account id that does not exist.
var ErrNoAccount = errors.New("access: no such account")

// CreateAccount mints a new account and its first key. The key is returned
// here once and never again: only its hash is stored.
func (s *Store) CreateAccount() (Account, string, error) {
	now := s.now().UTC()
	a := Account{ID: "acct_" + randomHex(12), CreatedAt: now}
	key, rec, err := mintKey(a.ID, now)
	if err != nil {
		return Account{}, "", err
	}
	if err := s.db.CreateAccount(a, rec); err != nil {
		return Account{}, "", fmt.Errorf("access: create account: %w", err)
	}
	return a, key, nil
}

// Account returns the account with id, or ErrNoAccount.
func (s *Store) Account(id string) (Account, error) {
	a, err := s.db.GetAccount(id)
	if errors.Is(err, kv.ErrNotFound) {
		return Account{}, ErrNoAccount
	}
	return a, err
}

// Domains returns the domains the account holds, sorted by domain then how.
func (s *Store) Domains(accountID string) ([]Holding, error) {
	a, err := s.Account(accountID)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(a.Domains)
	slices.SortFunc(out, func(x, y Holding) int {
		if c := strings.Compare(x.Domain, y.Domain); c != 0 {
			return c
		}
		return strings.Compare(x.Via, y.Via)
	})
	return out, nil
}

// HoldDomain records that the account holds domain via how (ViaMonitoring
// for monitoring; claims go through VerifyClaim, which proves ownership).
// Holding it already is no change. The domain is normalised (NormalizeDomain).
func (s *Store) HoldDomain(accountID, domain, via string) (Account, error) {
	if via != ViaMonitoring {
		return Account{}, fmt.Errorf("access: a domain is held by claim only through VerifyClaim")
	}
	d, err := NormalizeDomain(domain)
	if err != nil {
		return Account{}, err
	}
	a, err := s.db.UpdateAccount(accountID, func(a *Account) error {
		if !a.Holds(d, via) {
			a.Domains = append(a.Domains, Holding{Domain: d, Via: via, Since: s.now().UTC()})
		}
		return nil
	})
	if errors.Is(err, kv.ErrNotFound) {
		return Account{}, ErrNoAccount
	}
	return a, err
}

// ReleaseDomain removes the account's holding of domain via how (only
// ViaMonitoring; a claim is lost only to a new owner's proof). Not holding it
// is no change.
func (s *Store) ReleaseDomain(accountID, domain, via string) (Account, error) {
	if via != ViaMonitoring {
		return Account{}, fmt.Errorf("access: a claimed domain is released only by another owner's claim")
	}
	d, err := NormalizeDomain(domain)
	if err != nil {
		return Account{}, err
	}
	a, err := s.db.UpdateAccount(accountID, func(a *Account) error {
		a.Domains = slices.DeleteFunc(a.Domains, func(h Holding) bool { return h.Domain == d && h.Via == via })
		return nil
	})
	if errors.Is(err, kv.ErrNotFound) {
		return Account{}, ErrNoAccount
	}
	return a, err
}

// Caller is an authenticated request's account and key.
type Caller struct {
	AccountID string
	KeyID     string
	// Claimed are the domains the account held by claim when the request
	// was authenticated, sorted.
	Claimed []string
}

// Viewers returns the owner tags whose private entries the caller may see:
// one per domain it holds by claim. A nil Caller (anonymous) sees none.
func (c *Caller) Viewers() []string {
	if c == nil {
		return nil
	}
	out := make([]string, len(c.Claimed))
	for i, d := range c.Claimed {
		out[i] = OwnerTag(d, c.AccountID)
	}
	return out
}

// HoldsByClaim reports whether the caller's account held domain by claim.
func (c *Caller) HoldsByClaim(domain string) bool {
	if c == nil {
		return false
	}
	_, ok := slices.BinarySearch(c.Claimed, domain)
	return ok
}

type callerKey struct{}

// WithCaller returns ctx carrying c (nil for an anonymous request).
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller WithCaller put in ctx, or nil (anonymous).
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// OwnerTag is the owner under which the private entries domain registered
// while account held it are stored and indexed.
func OwnerTag(domain, accountID string) string { return domain + "#" + accountID }

// SplitOwnerTag returns the domain and account of an owner tag.
func SplitOwnerTag(tag string) (domain, accountID string) {
	domain, accountID, _ = strings.Cut(tag, "#")
	return domain, accountID
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
