package kv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The fetch cache holds, per URL, the validators (ETag, Last-Modified) of its
// last 200 answer and that answer's body, so a crawler can send
// If-None-Match / If-Modified-Since and treat a 304 as "the body you have".
// The crawl state holds, per publisher domain, which replace-by-source keys
// its last crawl produced, so a re-crawl can remove what a publisher stopped
// publishing and a background job knows which domains to revisit.
var (
	bucketFetchCache = bucket("fetch_cache")
	bucketCrawls     = bucket("crawls")
)

// CachedFetch is what is remembered of one URL's last 200 response that
// carried a validator.
type CachedFetch struct {
	URL          string    `json:"url"` // the URL asked for (the key)
	FinalURL     string    `json:"finalUrl,omitempty"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"lastModified,omitempty"`
	SHA256       string    `json:"sha256"`
	FetchedAt    time.Time `json:"fetchedAt"`
	Body         []byte    `json:"body"`
}

// GetCachedFetch returns the cached response of url, or ErrNotFound.
func (db *DB) GetCachedFetch(url string) (CachedFetch, error) {
	var c CachedFetch
	err := db.bolt.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketFetchCache).Get([]byte(url))
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &c)
	})
	if err != nil {
		if err == ErrNotFound {
			return CachedFetch{}, err
		}
		return CachedFetch{}, fmt.Errorf("kv: cached fetch %q: %w", url, err)
	}
	return c, nil
}

// PutCachedFetch stores (replacing) the cached response of c.URL.
func (db *DB) PutCachedFetch(c CachedFetch) error {
	if c.URL == "" || len(c.URL) > maxSecondaryKeyPart {
		return fmt.Errorf("kv: put cached fetch: empty or oversized URL")
	}
	c.FetchedAt = c.FetchedAt.UTC()
	v, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("kv: put cached fetch: %w", err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFetchCache).Put([]byte(c.URL), v)
	})
	if err != nil {
		return fmt.Errorf("kv: put cached fetch %q: %w", c.URL, err)
	}
	return nil
}

// DeleteCachedFetch forgets url's cached response; a missing one is no error.
func (db *DB) DeleteCachedFetch(url string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFetchCache).Delete([]byte(url))
	})
}

// CrawlState is what the last crawl of one publisher domain produced.
type CrawlState struct {
	Domain    string    `json:"domain"` // lower-case, the key
	Sources   []string  `json:"sources"`
	CrawledAt time.Time `json:"crawledAt"`
	Error     string    `json:"error,omitempty"` // the last crawl's error, when it failed as a whole
}

// GetCrawlState returns the crawl state of domain, or ErrNotFound.
func (db *DB) GetCrawlState(domain string) (CrawlState, error) {
	var s CrawlState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketCrawls).Get([]byte(strings.ToLower(domain)))
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, &s)
	})
	if err != nil {
		if err == ErrNotFound {
			return CrawlState{}, err
		}
		return CrawlState{}, fmt.Errorf("kv: crawl state %q: %w", domain, err)
	}
	return s, nil
}

// PutCrawlState stores (replacing) the crawl state of s.Domain.
func (db *DB) PutCrawlState(s CrawlState) error {
	s.Domain = strings.ToLower(s.Domain)
	if s.Domain == "" || len(s.Domain) > maxSecondaryKeyPart {
		return fmt.Errorf("kv: put crawl state: empty or oversized domain")
	}
	s.CrawledAt = s.CrawledAt.UTC()
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("kv: put crawl state: %w", err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCrawls).Put([]byte(s.Domain), v)
	})
	if err != nil {
		return fmt.Errorf("kv: put crawl state %q: %w", s.Domain, err)
	}
	return nil
}

// CrawlStates returns every domain's crawl state in domain order.
func (db *DB) CrawlStates() ([]CrawlState, error) {
	var out []CrawlState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCrawls).ForEach(func(k, v []byte) error {
			var s CrawlState
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("decode crawl state %q: %w", k, err)
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kv: crawl states: %w", err)
	}
	return out, nil
}

// EntrySources returns every distinct replace-by-source key that holds at
// least one entry, in key order. It reads the source index only, not the
// entry bodies.
func (db *DB) EntrySources() ([]string, error) {
	var out []string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEntrySources).Cursor()
		for k, _ := c.First(); k != nil; {
			i := bytes.IndexByte(k, secondaryKeySep)
			if i < 0 {
				k, _ = c.Next()
				continue
			}
			src := string(k[:i])
			out = append(out, src)
			// Skip the rest of this source's keys: seek past the separator.
			k, _ = c.Seek(append([]byte(src), secondaryKeySep+1))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: entry sources: %w", err)
	}
	return out, nil
}
