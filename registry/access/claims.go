package access

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// Where a claimant puts the challenge token: a TXT record at
// ChallengeDNSPrefix+domain holding ChallengeTXTPrefix+token, or a file at
// https://<domain>/.well-known/ardx-challenge.txt whose body has the token
// on a line of its own.
const (
	ChallengeDNSPrefix = "_ardx-challenge."
	ChallengeTXTPrefix = "ardx-challenge="
	ChallengeFilePath  = "/.well-known/ardx-challenge.txt"

	// DefaultClaimTTL is how long a challenge may be verified.
	DefaultClaimTTL = 72 * time.Hour
	// ChangeOwnerChanged is the feed kind of a domain claimed by a new
	// holder: it says that the holder changed, never who holds it.
	ChangeOwnerChanged = "domain.owner_changed"
)

// Proof methods of VerifyClaim.
const (
	MethodDNS  = "dns"
	MethodHTTP = "http"
)

// Errors of VerifyClaim.
var (
	ErrNoChallenge      = errors.New("access: no pending claim of this domain by this account; start one with POST /claim")
	ErrChallengeExpired = errors.New("access: the claim's challenge has expired; start a new one with POST /claim")
)

// NotProvedError says why no proof was found, one line per method tried.
type NotProvedError struct{ Reasons []string }

func (e *NotProvedError) Error() string {
	return "access: ownership not proved: " + strings.Join(e.Reasons, "; ")
}

// ClaimConfig configures how claims are proved.
type ClaimConfig struct {
	// TTL is how long a challenge may be verified; zero means DefaultClaimTTL.
	TTL time.Duration
	// Resolver is the host:port of the DNS server TXT records are asked of;
	// "" means the system resolver. Tests point it at a loopback server.
	Resolver string
	// Fetcher reads the challenge file; it must be the SSRF-safe one. Its
	// Resolve option is how tests reach a loopback server.
	Fetcher *web.Fetcher
	// Timeout bounds each proof check; zero means 10 s.
	Timeout time.Duration
}

// ConfigureClaims sets how claims are proved. Call it before serving.
func (s *Store) ConfigureClaims(c ClaimConfig) {
	if c.TTL <= 0 {
		c.TTL = DefaultClaimTTL
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Fetcher == nil {
		c.Fetcher = web.NewFetcher(web.FetchOptions{})
	}
	s.claims = c
}

// Challenge is a pending claim as the claimant needs it.
type Challenge struct {
	Domain    string    `json:"domain"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	DNSName   string    `json:"-"` // the TXT record's name
	TXTValue  string    `json:"-"` // the TXT record's value
	FileURL   string    `json:"-"` // where the file goes
}

func challengeOf(c kv.Challenge) Challenge {
	return Challenge{
		Domain: c.Domain, Token: c.Token, ExpiresAt: c.ExpiresAt,
		DNSName:  ChallengeDNSPrefix + c.Domain,
		TXTValue: ChallengeTXTPrefix + c.Token,
		FileURL:  "https://" + c.Domain + ChallengeFilePath,
	}
}

// StartClaim begins (or begins again, with a new token) the account's claim
// of domain. Claiming a domain the account already holds by claim starts a
// claim all the same: proving it again changes nothing.
func (s *Store) StartClaim(accountID, domain string) (Challenge, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		return Challenge{}, err
	}
	if _, err := s.Account(accountID); err != nil {
		return Challenge{}, err
	}
	now := s.now().UTC()
	c := kv.Challenge{Domain: d, AccountID: accountID, Token: randomHex(20), CreatedAt: now, ExpiresAt: now.Add(s.ClaimTTL())}
	if err := s.db.PutChallenge(c); err != nil {
		return Challenge{}, fmt.Errorf("access: start claim: %w", err)
	}
	return challengeOf(c), nil
}

// ClaimTTL is how long a challenge may be verified.
func (s *Store) ClaimTTL() time.Duration {
	if s.claims.TTL <= 0 {
		return DefaultClaimTTL
	}
	return s.claims.TTL
}

// ClaimResult is what a verified claim did.
type ClaimResult struct {
	Domain string
	Method string // the method that proved it
	// Transferred is true when another account held the domain by claim;
	// that account lost it and Removed lists its private entries of the
	// domain, deleted with it (the caller removes them from the index).
	Transferred bool
	Removed     []kv.Entry
}

// VerifyClaim checks the account's pending challenge for domain by the
// methods given (both when empty) and, when one proves it, makes the account
// the domain's holder by claim, in one fsynced transaction. A previous
// holder loses the domain and its private entries of it; the feed gets a
// ChangeOwnerChanged event naming the domain only.
func (s *Store) VerifyClaim(ctx context.Context, accountID, domain string, methods []string) (ClaimResult, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		return ClaimResult{}, err
	}
	ch, err := s.db.GetChallenge(d, accountID)
	if errors.Is(err, kv.ErrNotFound) {
		return ClaimResult{}, ErrNoChallenge
	}
	if err != nil {
		return ClaimResult{}, err
	}
	if !s.now().Before(ch.ExpiresAt) {
		return ClaimResult{}, ErrChallengeExpired
	}
	if len(methods) == 0 {
		methods = []string{MethodDNS, MethodHTTP}
	}
	var reasons []string
	proved := ""
	for _, m := range methods {
		var why string
		switch m {
		case MethodDNS:
			why = s.checkDNS(ctx, challengeOf(ch))
		case MethodHTTP:
			why = s.checkFile(ctx, challengeOf(ch))
		default:
			return ClaimResult{}, fmt.Errorf("access: unknown proof method %q", m)
		}
		if why == "" {
			proved = m
			break
		}
		reasons = append(reasons, m+": "+why)
	}
	if proved == "" {
		return ClaimResult{}, &NotProvedError{Reasons: reasons}
	}
	tr, err := s.db.ClaimDomain(d, accountID, s.now(), func(prev string) string { return OwnerTag(d, prev) },
		func(string) *kv.Change {
			return &kv.Change{Kind: ChangeOwnerChanged, Publisher: d}
		})
	if err != nil {
		return ClaimResult{}, fmt.Errorf("access: verify claim: %w", err)
	}
	return ClaimResult{Domain: d, Method: proved, Transferred: tr.Previous != "", Removed: tr.Removed}, nil
}

// checkDNS looks for the challenge's TXT record; "" when found, else why not.
func (s *Store) checkDNS(ctx context.Context, c Challenge) string {
	ctx, cancel := context.WithTimeout(ctx, s.claimTimeout())
	defer cancel()
	r := net.DefaultResolver
	if addr := s.claims.Resolver; addr != "" {
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	}
	txts, err := r.LookupTXT(ctx, c.DNSName)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return "no TXT record at " + c.DNSName
		}
		return "the TXT look-up of " + c.DNSName + " failed"
	}
	for _, t := range txts {
		if strings.TrimSpace(t) == c.TXTValue {
			return ""
		}
	}
	return "no TXT record at " + c.DNSName + " holds " + c.TXTValue
}

// checkFile fetches the challenge file; "" when it holds the token.
func (s *Store) checkFile(ctx context.Context, c Challenge) string {
	ctx, cancel := context.WithTimeout(ctx, s.claimTimeout())
	defer cancel()
	f := s.claims.Fetcher
	if f == nil {
		f = web.NewFetcher(web.FetchOptions{})
	}
	res, err := f.Get(ctx, c.FileURL, "text/plain")
	if err != nil {
		return "could not fetch " + c.FileURL
	}
	if res.Status != 200 {
		return fmt.Sprintf("%s answered %d", c.FileURL, res.Status)
	}
	sc := bufio.NewScanner(bytes.NewReader(res.Body))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == c.Token {
			return ""
		}
	}
	return c.FileURL + " does not hold the token on a line of its own"
}

func (s *Store) claimTimeout() time.Duration {
	if s.claims.Timeout <= 0 {
		return 10 * time.Second
	}
	return s.claims.Timeout
}
