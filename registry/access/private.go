package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/ingest"
)

// MaxPrivateEntries bounds the entries one registration carries, and
// MaxPrivatePerDomain those a domain holds, so one key cannot grow the index
// without limit.
const (
	MaxPrivateEntries   = 100
	MaxPrivatePerDomain = 1000
)

// ErrNotHeld is returned when the caller's account does not hold the
// domain by claim.
var ErrNotHeld = errors.New("access: this key's account has not proved ownership of the domain (POST /claim, then POST /claim/verify)")

// EntryError is one reason a registration was refused, pointing into the
// request: Field is "entries[i]" or "entries[i].member".
type EntryError struct{ Field, Message string }

// InvalidEntriesError is a registration refused as a whole; nothing was
// stored.
type InvalidEntriesError struct{ Errors []EntryError }

func (e *InvalidEntriesError) Error() string {
	return "access: " + strconv.Itoa(len(e.Errors)) + " invalid private entries"
}

// ErrTooManyPrivate is returned when a registration would take the domain
// past MaxPrivatePerDomain.
var ErrTooManyPrivate = fmt.Errorf("access: a domain holds at most %d private entries", MaxPrivatePerDomain)

// RegisterPrivate validates entries as ingestion validates a manifest's
// (ARD entry objects; identifiers must be the domain's own, urn:air:<domain>:...)
// and stores them as private entries of domain for the
// caller, fsynced. Every entry is valid or nothing is stored. The stored
// entries are returned for the index.
func (s *Store) RegisterPrivate(c *Caller, domain string, entries []json.RawMessage) ([]kv.Entry, error) {
	d, err := NormalizeDomain(domain)
	if err != nil {
		return nil, err
	}
	if !c.HoldsByClaim(d) {
		return nil, ErrNotHeld
	}
	if len(entries) == 0 || len(entries) > MaxPrivateEntries {
		return nil, &InvalidEntriesError{Errors: []EntryError{{Field: "entries", Message: fmt.Sprintf("must hold 1 to %d entries", MaxPrivateEntries)}}}
	}
	doc, _ := json.Marshal(map[string]any{"entries": entries})
	m, problems := ingest.ParseManifest(doc)
	var errs []EntryError
	for _, p := range problems {
		if p.Severity == ingest.SeverityError {
			errs = append(errs, EntryError{Field: pointerField(p.Pointer), Message: p.Message})
		}
	}
	if len(m.Links) > 0 {
		errs = append(errs, EntryError{Field: pointerField(m.Links[0].Pointer), Message: "a private entry cannot link a catalog by url; give its entries inline"})
	}
	out := make([]kv.Entry, 0, len(m.Entries))
	for _, p := range m.Entries {
		// Exactly the claimed domain: a subdomain may be claimed by another
		// account, whose entries a collision would reveal. A subdomain's
		// entries are registered by claiming the subdomain.
		if p.Publisher != d {
			errs = append(errs, EntryError{Field: pointerField(p.Pointer) + ".identifier",
				Message: "must be urn:air:" + d + ":... (the domain the entries are registered for; claim a subdomain to register its entries)"})
			continue
		}
		out = append(out, kv.Entry{ID: p.ID, Body: p.Body})
	}
	if len(errs) > 0 {
		return nil, &InvalidEntriesError{Errors: errs}
	}
	owner := OwnerTag(d, c.AccountID)
	held, err := s.db.PrivateEntries(owner)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(held))
	for _, e := range held {
		known[e.ID] = true
	}
	n := len(held)
	for _, e := range out {
		if !known[e.ID] {
			n++
		}
	}
	if n > MaxPrivatePerDomain {
		return nil, ErrTooManyPrivate
	}
	stored, err := s.db.PutPrivateEntries(owner, out, s.now())
	var taken *kv.IdentifierTakenError
	if errors.As(err, &taken) {
		for i, p := range m.Entries {
			if p.ID == taken.ID {
				return nil, &InvalidEntriesError{Errors: []EntryError{{Field: pointerField(m.Entries[i].Pointer) + ".identifier",
					Message: "is already an entry of this registry (a public one, or another holder's); choose another identifier"}}}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("access: register private entries: %w", err)
	}
	return stored, nil
}

// pointerField turns "/entries/3/identifier" into "entries[3].identifier".
func pointerField(ptr string) string {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var b strings.Builder
	for i, p := range parts {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// PrivateEntries lists the caller's private entries across the domains it
// holds by claim, by domain then identifier.
func (s *Store) PrivateEntries(c *Caller) ([]kv.Entry, error) {
	if c == nil {
		return nil, nil
	}
	var out []kv.Entry
	for _, d := range c.Claimed {
		es, err := s.db.PrivateEntries(OwnerTag(d, c.AccountID))
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// DeletePrivate removes the caller's private entries with the given
// identifiers, fsynced, within the domains it holds by claim only. It
// returns those removed; an identifier that is not the caller's (public,
// another holder's, unknown) is not removed and not reported apart, so
// nobody learns of another's entries by deleting.
func (s *Store) DeletePrivate(c *Caller, ids []string) ([]kv.Entry, error) {
	if c == nil {
		return nil, nil
	}
	var out []kv.Entry
	for _, d := range c.Claimed {
		removed, err := s.db.DeletePrivateEntries(OwnerTag(d, c.AccountID), ids)
		if err != nil {
			return nil, fmt.Errorf("access: delete private entries: %w", err)
		}
		out = append(out, removed...)
	}
	return out, nil
}

// DomainOfOwner returns the domain of a private entry's owner tag.
func DomainOfOwner(owner string) string {
	d, _ := SplitOwnerTag(owner)
	return d
}
