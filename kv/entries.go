package kv

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Registry entries live in three buckets: the records themselves keyed by
// identifier, and two key-only secondary indexes ("<source>\x00<id>" and
// "<type>\x00<id>") so that replacing a source and counting by type never
// decode every record.
var (
	bucketEntries       = bucket("entries")
	bucketEntrySources  = bucket("entries_by_source")
	bucketEntryTypes    = bucket("entries_by_type")
	secondaryKeySep     = byte(0)
	maxSecondaryKeyPart = 4096 // bbolt keys must stay well under its 32 KiB limit
)

// Provenance records where an entry came from.
type Provenance struct {
	Source     string    `json:"source"` // file path or URL of the manifest
	FetchedAt  time.Time `json:"fetchedAt"`
	HTTPStatus int       `json:"httpStatus,omitempty"`
	SHA256     string    `json:"sha256"` // of the manifest body, hex
}

// Entry is one registry entry as stored.
type Entry struct {
	ID         string          `json:"id"`              // normalised identifier (urn:air:...)
	Body       json.RawMessage `json:"body"`            // the entry object as ingested, with identifier and type normalised
	Source     string          `json:"source"`          // replace-by-source key (manifest path or URL)
	Owner      string          `json:"owner,omitempty"` // "" for public entries
	Provenance Provenance      `json:"provenance"`
	CreatedAt  time.Time       `json:"createdAt"` // first ingested
	UpdatedAt  time.Time       `json:"updatedAt"` // last changed (body differs)
}

// Type returns the body's "type" member, or "" when the body has none.
func (e Entry) Type() string {
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(e.Body, &v)
	return v.Type
}

// GetEntry returns the entry with identifier id, or ErrNotFound.
func (db *DB) GetEntry(id string) (Entry, error) {
	var e Entry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketEntries).Get([]byte(id))
		if raw == nil {
			return ErrNotFound
		}
		var err error
		e, err = decodeEntry(raw)
		return err
	})
	if err != nil && err != ErrNotFound {
		return Entry{}, fmt.Errorf("kv: get entry %q: %w", id, err)
	}
	return e, err
}

// GetEntries returns the entries with the given identifiers in one read
// transaction; identifiers that do not exist are absent from the map.
func (db *DB) GetEntries(ids []string) (map[string]Entry, error) {
	out := make(map[string]Entry, len(ids))
	err := db.eachRecord(ids, func(id string, raw []byte) error {
		e, err := decodeEntry(raw)
		if err != nil {
			return fmt.Errorf("decode entry %q: %w", id, err)
		}
		out[id] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: get entries: %w", err)
	}
	return out, nil
}

// eachRecord calls fn with the stored record of every identifier in ids
// that exists, in one read transaction; raw is valid only during the call.
func (db *DB) eachRecord(ids []string, fn func(id string, raw []byte) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEntries)
		for _, id := range ids {
			if raw := b.Get([]byte(id)); raw != nil {
				if err := fn(id, raw); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// EntryBody is what a search result needs of an entry: its body and owner.
type EntryBody struct {
	Body  json.RawMessage
	Owner string
}

// GetEntryBodies returns the bodies and owners of the entries with the given
// identifiers in one read transaction; identifiers that do not exist are
// absent from the map. It skips decoding provenance and times, most of
// GetEntries' cost, for the search hot path.
func (db *DB) GetEntryBodies(ids []string) (map[string]EntryBody, error) {
	out := make(map[string]EntryBody, len(ids))
	err := db.eachRecord(ids, func(id string, raw []byte) error {
		head, body, err := splitRecord(raw)
		if err != nil {
			return fmt.Errorf("decode entry %q: %w", id, err)
		}
		var h struct {
			Owner string `json:"owner"`
		}
		if bytes.Contains(head, []byte(`"owner"`)) {
			if err := json.Unmarshal(head, &h); err != nil {
				return fmt.Errorf("decode entry %q: %w", id, err)
			}
		}
		out[id] = EntryBody{Body: bytes.Clone(body), Owner: h.Owner}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: get entry bodies: %w", err)
	}
	return out, nil
}

// ForEachEntry calls fn for every entry in identifier order, inside one read
// transaction; an error from fn stops the walk and is returned.
func (db *DB) ForEachEntry(fn func(Entry) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntries).ForEach(func(k, v []byte) error {
			e, err := decodeEntry(v)
			if err != nil {
				return fmt.Errorf("kv: decode entry %q: %w", k, err)
			}
			return fn(e)
		})
	})
}

// EntriesState returns the entries version, a number that moves whenever
// a stored entry is added, removed, or changes its body or owner (a
// re-ingest that changes nothing leaves it; it is the entries bucket's
// sequence, so it survives restarts), and the change feed's last sequence
// number, read at one moment: entries read after it hold at least what
// was stored then, and every public entry stored since is named by a
// change after seq (ReplaceSource stores an entry with its event; private
// entries have none). A view derived from every entry can be kept while
// the version stands, and brought up to date from the feed.
func (db *DB) EntriesState() (version, seq uint64, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		version = tx.Bucket(bucketEntries).Sequence()
		if k, _ := tx.Bucket(bucketChanges).Cursor().Last(); k != nil {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return version, seq, err
}

// bumpEntriesVersion moves the entries version (EntriesState) in a
// transaction that changed entries.
func bumpEntriesVersion(eb *bolt.Bucket) error {
	_, err := eb.NextSequence()
	return err
}

// EntriesBySource returns every entry currently attributed to source, in
// identifier order.
func (db *DB) EntriesBySource(source string) ([]Entry, error) {
	var out []Entry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		entries := tx.Bucket(bucketEntries)
		prefix := secondaryPrefix(source)
		c := tx.Bucket(bucketEntrySources).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			id := k[len(prefix):]
			raw := entries.Get(id)
			if raw == nil {
				continue
			}
			e, err := decodeEntry(raw)
			if err != nil {
				return fmt.Errorf("decode entry %q: %w", id, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: entries of %q: %w", source, err)
	}
	return out, nil
}

// CountEntries returns the number of stored entries.
// It walks every page of the entries bucket: for one-off reports, not for
// hot paths or start-up.
func (db *DB) CountEntries() (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketEntries).Stats().KeyN
		return nil
	})
	return n, err
}

// HasEntries reports whether any entry is stored. Unlike CountEntries it
// reads one page, not the whole bucket (which would also pull every entry
// page of the mapped file into memory).
func (db *DB) HasEntries() (bool, error) {
	var any bool
	err := db.bolt.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketEntries).Cursor().First()
		any = k != nil
		return nil
	})
	return any, err
}

// CountEntriesByType returns how many entries there are of each body "type".
func (db *DB) CountEntriesByType() (map[string]int, error) {
	out := map[string]int{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEntryTypes).ForEach(func(k, _ []byte) error {
			if i := bytes.IndexByte(k, secondaryKeySep); i >= 0 {
				out[string(k[:i])]++
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("kv: count entries by type: %w", err)
	}
	return out, nil
}

// ReplaceSource stores entries as the complete set from source: entries of
// that source no longer present are removed; returns the change events it
// appended (added/changed/removed), in one fsynced transaction.
//
// Each entry's Source is set to source. An identifier already stored under
// another source moves to this one (the latest claim wins) and is no longer
// removed when its old source is re-ingested without it. An entry whose body
// and owner are unchanged produces no event and keeps its UpdatedAt; its
// provenance is still refreshed. CreatedAt and UpdatedAt of new entries are
// now. When entries repeats an identifier, the last one wins.
func (db *DB) ReplaceSource(source string, entries []Entry, now time.Time) ([]Change, error) {
	if source == "" {
		return nil, fmt.Errorf("kv: replace source: empty source")
	}
	if len(source) > maxSecondaryKeyPart || strings.IndexByte(source, secondaryKeySep) >= 0 {
		return nil, fmt.Errorf("kv: replace source: source is longer than %d bytes or holds a NUL", maxSecondaryKeyPart)
	}
	now = now.UTC()
	// Deduplicate up front so one identifier yields at most one event.
	last := make(map[string]int, len(entries))
	for i, e := range entries {
		if e.ID == "" || len(e.ID) > maxSecondaryKeyPart || strings.IndexByte(e.ID, secondaryKeySep) >= 0 {
			return nil, fmt.Errorf("kv: replace source: entry %d has an empty, oversized or NUL-holding identifier", i)
		}
		last[e.ID] = i
	}
	// Writing in key order appends to bbolt's in-memory leaves instead of
	// inserting into their middle, which is quadratic for a large source.
	order := make([]int, 0, len(last))
	for _, i := range last {
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool { return entries[order[a]].ID < entries[order[b]].ID })
	var changes []Change
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		eb := tx.Bucket(bucketEntries)
		sb := tx.Bucket(bucketEntrySources)
		tb := tx.Bucket(bucketEntryTypes)
		cb := tx.Bucket(bucketChanges)
		cb.FillPercent = appendFillPercent // sequence keys: append-only
		emit := func(kind, id string) error {
			c, err := appendChange(cb, Change{Time: now, Kind: kind, ID: id, Publisher: publisherOf(id), Source: source})
			if err != nil {
				return err
			}
			changes = append(changes, c)
			return nil
		}
		for _, i := range order {
			e := entries[i]
			body, err := compactBody(e.Body)
			if err != nil {
				return fmt.Errorf("entry %q: %w", e.ID, err)
			}
			e.Body = body
			e.Source = source
			typ := e.Type()
			kind := ChangeAdded
			if raw := eb.Get([]byte(e.ID)); raw != nil {
				old, err := decodeEntry(raw)
				if err != nil {
					return fmt.Errorf("decode entry %q: %w", e.ID, err)
				}
				e.CreatedAt = old.CreatedAt
				if bytes.Equal(old.Body, e.Body) && old.Owner == e.Owner {
					kind = ""
					e.UpdatedAt = old.UpdatedAt
				} else {
					kind = ChangeChanged
					e.UpdatedAt = now
				}
				if old.Source != source {
					if err := sb.Delete(secondaryKey(old.Source, old.ID)); err != nil {
						return err
					}
				}
				if oldType := old.Type(); oldType != typ {
					if err := tb.Delete(secondaryKey(oldType, old.ID)); err != nil {
						return err
					}
				}
			} else {
				e.CreatedAt, e.UpdatedAt = now, now
			}
			val, err := encodeEntry(e)
			if err != nil {
				return err
			}
			if err := eb.Put([]byte(e.ID), val); err != nil {
				return err
			}
			if err := sb.Put(secondaryKey(source, e.ID), nil); err != nil {
				return err
			}
			if err := tb.Put(secondaryKey(typ, e.ID), nil); err != nil {
				return err
			}
			if kind != "" {
				if err := emit(kind, e.ID); err != nil {
					return err
				}
			}
		}
		// Remove what the source no longer lists. Keys are collected first
		// because deleting under a live cursor skips elements in bbolt.
		prefix := secondaryPrefix(source)
		var gone []string
		c := sb.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			id := string(k[len(prefix):])
			if _, keep := last[id]; !keep {
				gone = append(gone, id)
			}
		}
		for _, id := range gone {
			if err := sb.Delete(secondaryKey(source, id)); err != nil {
				return err
			}
			raw := eb.Get([]byte(id))
			if raw == nil {
				continue
			}
			old, err := decodeEntry(raw)
			if err != nil {
				return fmt.Errorf("decode entry %q: %w", id, err)
			}
			if old.Source != source {
				continue // claimed by another source since; not ours to remove
			}
			if err := tb.Delete(secondaryKey(old.Type(), id)); err != nil {
				return err
			}
			if err := eb.Delete([]byte(id)); err != nil {
				return err
			}
			if err := emit(ChangeRemoved, id); err != nil {
				return err
			}
		}
		if len(changes) > 0 {
			return bumpEntriesVersion(eb)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kv: replace source %q: %w", source, err)
	}
	return changes, nil
}

// A stored entry is its metadata as JSON (without the body), a newline, and
// the compacted body verbatim: the body is neither re-escaped nor re-scanned
// on the way in or out, and a stored body compares byte for byte with a
// freshly compacted one. encoding/json never writes a raw newline, so the
// first one is the boundary.
type entryHeader struct {
	ID         string     `json:"id"`
	Source     string     `json:"source"`
	Owner      string     `json:"owner,omitempty"`
	Provenance Provenance `json:"provenance"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

func encodeEntry(e Entry) ([]byte, error) {
	h, err := json.Marshal(entryHeader{ID: e.ID, Source: e.Source, Owner: e.Owner, Provenance: e.Provenance, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt})
	if err != nil {
		return nil, fmt.Errorf("encode entry %q: %w", e.ID, err)
	}
	out := make([]byte, 0, len(h)+1+len(e.Body))
	out = append(append(h, '\n'), e.Body...)
	return out, nil
}

// decodeEntry copies what it returns: bbolt's bytes are valid only inside
// the transaction.
func decodeEntry(raw []byte) (Entry, error) {
	head, body, err := splitRecord(raw)
	if err != nil {
		return Entry{}, err
	}
	var h entryHeader
	if err := json.Unmarshal(head, &h); err != nil {
		return Entry{}, err
	}
	return Entry{
		ID: h.ID, Source: h.Source, Owner: h.Owner, Provenance: h.Provenance,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
		Body: bytes.Clone(body),
	}, nil
}

// splitRecord splits an entry record (see encodeEntry) into its JSON
// header line and the body.
func splitRecord(raw []byte) (head, body []byte, err error) {
	i := bytes.IndexByte(raw, '\n')
	if i < 0 {
		return nil, nil, fmt.Errorf("corrupt entry record")
	}
	return raw[:i], raw[i+1:], nil
}

func compactBody(body json.RawMessage) (json.RawMessage, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("empty body")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return buf.Bytes(), nil
}

func secondaryPrefix(part string) []byte {
	return append([]byte(part), secondaryKeySep)
}

func secondaryKey(part, id string) []byte {
	k := make([]byte, 0, len(part)+1+len(id))
	k = append(k, part...)
	k = append(k, secondaryKeySep)
	return append(k, id...)
}

// publisherOf returns the publisher segment of a urn:air: identifier, so the
// change feed can be filtered by publisher without reading entry bodies.
func publisherOf(id string) string {
	rest, ok := strings.CutPrefix(id, "urn:air:")
	if !ok {
		return ""
	}
	pub, _, _ := strings.Cut(rest, ":")
	return strings.ToLower(pub)
}
