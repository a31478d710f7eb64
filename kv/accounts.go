package kv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Accounts and their keys. An account is the holder of keys and domains; a
// key is stored by its public id with only the SHA-256 of the whole key, so
// the store never holds a usable key. Claimed domains have one owner each,
// kept in an index so a claim transfer moves a domain atomically.
var (
	bucketAccounts     = bucket("accounts")          // account id -> Account JSON
	bucketAccountKeys  = bucket("account_keys")      // key id -> APIKey JSON
	bucketDomainOwners = bucket("domain_owners")     // domain -> account id (held by claim)
	bucketChallenges   = bucket("claim_challenges")  // domain \x00 account id -> Challenge JSON
	bucketPrivateIndex = bucket("private_by_holder") // owner \x00 id -> nil (private entries)
)

// How an account holds a domain.
const (
	HeldByClaim      = "claim"
	HeldByMonitoring = "monitoring"
)

// ErrExists is returned when a record that must be new already exists.
var ErrExists = errors.New("kv: already exists")

// Account is one holder of keys and domains.
type Account struct {
	ID        string          `json:"id"`
	CreatedAt time.Time       `json:"createdAt"`
	Domains   []AccountDomain `json:"domains,omitempty"`
}

// AccountDomain is one domain an account holds, and how. A domain held both
// by claim and by monitoring appears twice.
type AccountDomain struct {
	Domain string    `json:"domain"`
	Via    string    `json:"via"` // HeldByClaim or HeldByMonitoring
	Since  time.Time `json:"since"`
}

// Holds reports whether a holds domain via how.
func (a Account) Holds(domain, via string) bool {
	return slices.ContainsFunc(a.Domains, func(d AccountDomain) bool { return d.Domain == domain && d.Via == via })
}

// APIKey is one key of an account, without its secret.
type APIKey struct {
	ID        string    `json:"id"`   // public part of the key, the lookup
	Hash      []byte    `json:"hash"` // SHA-256 of the whole key as presented
	AccountID string    `json:"account"`
	CreatedAt time.Time `json:"createdAt"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
}

// Challenge is a pending ownership claim of a domain by an account.
type Challenge struct {
	Domain    string    `json:"domain"`
	AccountID string    `json:"account"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// CreateAccount stores a new account with its first key, fsynced. Either id
// already in use is ErrExists.
func (db *DB) CreateAccount(a Account, k APIKey) error {
	if a.ID == "" || k.ID == "" || k.AccountID != a.ID {
		return errors.New("kv: create account: empty id or a key of another account")
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		ab, kb := tx.Bucket(bucketAccounts), tx.Bucket(bucketAccountKeys)
		if ab.Get([]byte(a.ID)) != nil || kb.Get([]byte(k.ID)) != nil {
			return ErrExists
		}
		if err := putJSON(ab, a.ID, a); err != nil {
			return err
		}
		return putJSON(kb, k.ID, k)
	})
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("kv: create account: %w", err)
	}
	return err
}

// GetAccount returns the account with id, or ErrNotFound.
func (db *DB) GetAccount(id string) (Account, error) {
	var a Account
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketAccounts), id, &a) })
	return a, err
}

// GetAPIKey returns the key with the public id, or ErrNotFound.
func (db *DB) GetAPIKey(id string) (APIKey, error) {
	var k APIKey
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bucketAccountKeys), id, &k) })
	return k, err
}

// GetKeyAccount returns the key with the public id and its account, in one
// read transaction (authentication reads both on every request).
func (db *DB) GetKeyAccount(id string) (APIKey, Account, error) {
	var k APIKey
	var a Account
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if err := getJSON(tx.Bucket(bucketAccountKeys), id, &k); err != nil {
			return err
		}
		return getJSON(tx.Bucket(bucketAccounts), k.AccountID, &a)
	})
	return k, a, err
}

// AccountKeys returns every key of the account, revoked ones included,
// oldest first. Keys are few, so it walks the bucket.
func (db *DB) AccountKeys(accountID string) ([]APIKey, error) {
	var out []APIKey
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAccountKeys).ForEach(func(_, v []byte) error {
			var k APIKey
			if err := json.Unmarshal(v, &k); err != nil {
				return err
			}
			if k.AccountID == accountID {
				out = append(out, k)
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b APIKey) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, err
}

// RotateAPIKey revokes the key oldID (at now) and stores next for the same
// account, in one fsynced transaction: the account never has neither. A
// revoked or unknown oldID is ErrNotFound.
func (db *DB) RotateAPIKey(oldID string, next APIKey, now time.Time) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		kb := tx.Bucket(bucketAccountKeys)
		var old APIKey
		if err := getJSON(kb, oldID, &old); err != nil {
			return err
		}
		if !old.RevokedAt.IsZero() || old.AccountID != next.AccountID {
			return ErrNotFound
		}
		if kb.Get([]byte(next.ID)) != nil {
			return ErrExists
		}
		old.RevokedAt = now.UTC()
		if err := putJSON(kb, old.ID, old); err != nil {
			return err
		}
		return putJSON(kb, next.ID, next)
	})
}

// UpdateAccount reads the account id, lets fn change it and stores it, in
// one fsynced transaction. An error from fn stores nothing and is returned.
func (db *DB) UpdateAccount(id string, fn func(*Account) error) (Account, error) {
	var a Account
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		ab := tx.Bucket(bucketAccounts)
		if err := getJSON(ab, id, &a); err != nil {
			return err
		}
		if err := fn(&a); err != nil {
			return err
		}
		a.ID = id
		return putJSON(ab, id, a)
	})
	return a, err
}

// DomainOwner returns the account that holds domain by claim, or
// ErrNotFound.
func (db *DB) DomainOwner(domain string) (string, error) {
	var id string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDomainOwners).Get([]byte(domain))
		if v == nil {
			return ErrNotFound
		}
		id = string(v)
		return nil
	})
	return id, err
}

// PutChallenge stores c, replacing the account's earlier challenge for the
// same domain.
func (db *DB) PutChallenge(c Challenge) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bucketChallenges), challengeKey(c.Domain, c.AccountID), c)
	})
}

// GetChallenge returns the account's pending challenge for domain, or
// ErrNotFound.
func (db *DB) GetChallenge(domain, accountID string) (Challenge, error) {
	var c Challenge
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bucketChallenges), challengeKey(domain, accountID), &c)
	})
	return c, err
}

func challengeKey(domain, accountID string) string { return domain + "\x00" + accountID }

// ClaimTransfer is what a verified claim changed.
type ClaimTransfer struct {
	Previous string  // the account that held the domain by claim before; "" for none
	Removed  []Entry // the previous holder's private entries of the domain, deleted
}

// ClaimDomain makes accountID the claimed holder of domain, in one fsynced
// transaction with the challenge's removal: the previous holder loses the
// domain and the private entries stored under prevOwner(previous) (their
// identifiers are returned for the index), and change is appended to the feed
// when the holder changed (its ID, Publisher and Source are the caller's).
func (db *DB) ClaimDomain(domain, accountID string, now time.Time, prevOwner func(accountID string) string, change func(previous string) *Change) (ClaimTransfer, error) {
	var out ClaimTransfer
	now = now.UTC()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		out = ClaimTransfer{}
		ab, ob := tx.Bucket(bucketAccounts), tx.Bucket(bucketDomainOwners)
		var a Account
		if err := getJSON(ab, accountID, &a); err != nil {
			return err
		}
		if err := tx.Bucket(bucketChallenges).Delete([]byte(challengeKey(domain, accountID))); err != nil {
			return err
		}
		if prev := ob.Get([]byte(domain)); prev != nil && string(prev) != accountID {
			out.Previous = string(prev)
			var p Account
			if err := getJSON(ab, out.Previous, &p); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if p.ID != "" {
				p.Domains = slices.DeleteFunc(p.Domains, func(d AccountDomain) bool { return d.Domain == domain && d.Via == HeldByClaim })
				if err := putJSON(ab, p.ID, p); err != nil {
					return err
				}
			}
			removed, err := deletePrivateTx(tx, prevOwner(out.Previous), nil)
			if err != nil {
				return err
			}
			out.Removed = removed
		}
		if !a.Holds(domain, HeldByClaim) {
			a.Domains = append(a.Domains, AccountDomain{Domain: domain, Via: HeldByClaim, Since: now})
			if err := putJSON(ab, a.ID, a); err != nil {
				return err
			}
		}
		if err := ob.Put([]byte(domain), []byte(accountID)); err != nil {
			return err
		}
		if out.Previous != "" && change != nil {
			if c := change(out.Previous); c != nil { // the caller's event, never an account id
				c.Time = now
				cb := tx.Bucket(bucketChanges)
				cb.FillPercent = appendFillPercent
				if _, err := appendChange(cb, *c); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return ClaimTransfer{}, err
	}
	return out, nil
}

func getJSON(b *bolt.Bucket, key string, v any) error {
	raw := b.Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	return json.Unmarshal(raw, v)
}

// Private entries live in the entries bucket beside public ones (so search
// results, /agents and lookups read them the same way), with a non-empty
// Owner and source "private:<owner>", and are indexed by owner in
// bucketPrivateIndex. They never append change events: the feed is public.

// ErrIdentifierTaken is returned when a private entry would replace an entry
// that is public or belongs to another owner.
var ErrIdentifierTaken = errors.New("kv: identifier held by another entry")

// PrivateSource is the source of the private entries stored under owner.
func PrivateSource(owner string) string { return "private:" + owner }

// PutPrivateEntries stores entries under owner (each entry's Owner and Source
// are set), fsynced, without change events. An identifier already held by a
// public entry or another owner's entry fails the whole call with an
// *IdentifierTakenError naming it, storing nothing.
func (db *DB) PutPrivateEntries(owner string, entries []Entry, now time.Time) ([]Entry, error) {
	if owner == "" {
		return nil, errors.New("kv: private entries need an owner")
	}
	now = now.UTC()
	src := PrivateSource(owner)
	out := make([]Entry, 0, len(entries))
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		eb, tb, pb := tx.Bucket(bucketEntries), tx.Bucket(bucketEntryTypes), tx.Bucket(bucketPrivateIndex)
		for _, e := range entries {
			if e.ID == "" || len(e.ID) > maxSecondaryKeyPart || bytes.IndexByte([]byte(e.ID), secondaryKeySep) >= 0 {
				return fmt.Errorf("kv: private entry with an empty, oversized or NUL-holding identifier")
			}
			body, err := compactBody(e.Body)
			if err != nil {
				return fmt.Errorf("entry %q: %w", e.ID, err)
			}
			e.Body, e.Owner, e.Source = body, owner, src
			e.CreatedAt, e.UpdatedAt = now, now
			if raw := eb.Get([]byte(e.ID)); raw != nil {
				old, err := decodeEntry(raw)
				if err != nil {
					return err
				}
				if old.Owner != owner {
					return &IdentifierTakenError{ID: e.ID}
				}
				e.CreatedAt = old.CreatedAt
				if err := tb.Delete(secondaryKey(old.Type(), old.ID)); err != nil {
					return err
				}
			}
			val, err := encodeEntry(e)
			if err != nil {
				return err
			}
			if err := eb.Put([]byte(e.ID), val); err != nil {
				return err
			}
			if err := tb.Put(secondaryKey(e.Type(), e.ID), nil); err != nil {
				return err
			}
			if err := pb.Put(secondaryKey(owner, e.ID), nil); err != nil {
				return err
			}
			out = append(out, e)
		}
		if len(out) > 0 {
			return bumpEntriesVersion(eb)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IdentifierTakenError names the identifier PutPrivateEntries refused.
type IdentifierTakenError struct{ ID string }

func (e *IdentifierTakenError) Error() string {
	return fmt.Sprintf("kv: identifier %q is held by another entry", e.ID)
}

// Unwrap makes errors.Is(err, ErrIdentifierTaken) hold.
func (e *IdentifierTakenError) Unwrap() error { return ErrIdentifierTaken }

// PrivateEntries returns owner's private entries in identifier order.
func (db *DB) PrivateEntries(owner string) ([]Entry, error) {
	var out []Entry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		eb := tx.Bucket(bucketEntries)
		prefix := secondaryPrefix(owner)
		c := tx.Bucket(bucketPrivateIndex).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			raw := eb.Get(k[len(prefix):])
			if raw == nil {
				continue
			}
			e, err := decodeEntry(raw)
			if err != nil {
				return err
			}
			if e.Owner == owner {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// DeletePrivateEntries removes the entries of ids that owner holds (all of
// owner's when ids is nil), fsynced, and returns those removed; identifiers
// of other owners or public entries are left alone and not returned.
func (db *DB) DeletePrivateEntries(owner string, ids []string) ([]Entry, error) {
	var out []Entry
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		out, err = deletePrivateTx(tx, owner, ids)
		return err
	})
	return out, err
}

func deletePrivateTx(tx *bolt.Tx, owner string, ids []string) ([]Entry, error) {
	if owner == "" {
		return nil, nil
	}
	eb, tb, pb := tx.Bucket(bucketEntries), tx.Bucket(bucketEntryTypes), tx.Bucket(bucketPrivateIndex)
	if ids == nil {
		prefix := secondaryPrefix(owner)
		c := pb.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
	}
	var out []Entry
	for _, id := range ids {
		raw := eb.Get([]byte(id))
		if raw == nil {
			continue
		}
		e, err := decodeEntry(raw)
		if err != nil {
			return nil, err
		}
		if e.Owner != owner {
			continue
		}
		if err := eb.Delete([]byte(id)); err != nil {
			return nil, err
		}
		if err := tb.Delete(secondaryKey(e.Type(), id)); err != nil {
			return nil, err
		}
		if err := pb.Delete(secondaryKey(owner, id)); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) > 0 {
		if err := bumpEntriesVersion(eb); err != nil {
			return nil, err
		}
	}
	return out, nil
}
