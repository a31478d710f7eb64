package kv

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var testRecords = []struct {
	name string
	rec  SearchRecord
}{
	{"no results", SearchRecord{Time: time.Date(2026, 3, 1, 23, 59, 0, 1, time.UTC), Text: "nothing matches", Federation: "none"}},
	{"everything", SearchRecord{Time: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), Text: "wéather  forecast\t", Federation: "all",
		Filter: map[string][]string{"type": {"application/mcp-server-card+json"}, "tags": {"weather", ""}, "capabilities": {}},
		Offset: 10, Probe: true,
		Results:   []ReturnedEntry{{ID: "urn:air:a.test:w", Rank: 11}, {ID: "urn:air:b.test:w", Rank: 12, Source: "https://up.test", Private: true}},
		Upstreams: []UpstreamOutcome{{Upstream: "https://up.test", Outcome: "ok"}, {Upstream: "https://slow.test", Outcome: "timeout"}}}},
	{"empty text", SearchRecord{Time: time.Unix(0, 1).UTC(), Results: []ReturnedEntry{{ID: "urn:air:a.test:x", Rank: 1}}}},
	{"before 1970, odd ranks", SearchRecord{Time: time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), Text: "q", Offset: -1,
		Results: []ReturnedEntry{{ID: "", Rank: 0}, {ID: "urn:air:a.test:x", Rank: -5}}}},
	{"long text", SearchRecord{Time: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Text: string(bytes.Repeat([]byte("long "), 400))}},
}

// TestSearchRecordRoundTrip: a record reads back as it was appended, its
// time in UTC.
func TestSearchRecordRoundTrip(t *testing.T) {
	for _, tc := range testRecords {
		t.Run(tc.name, func(t *testing.T) {
			raw := appendSearchRecord(nil, &tc.rec)
			var got SearchRecord
			if err := decodeSearchRecord(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.rec) {
				t.Fatalf("read back %+v\nwant %+v", got, tc.rec)
			}
			// Every shorter prefix is corrupt, never a panic or a record.
			for n := range len(raw) {
				var r SearchRecord
				if err := decodeSearchRecord(raw[:n], &r); err == nil {
					t.Fatalf("the first %d of %d bytes decoded: %+v", n, len(raw), r)
				}
			}
		})
	}
}

// TestJSONSearchRecordsStillRead: a store from before the binary records
// holds JSON ones; they read back as they were, both listed for the
// rollups and through SearchesSince, among binary ones.
func TestJSONSearchRecordsStillRead(t *testing.T) {
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := testRecords[1].rec
	old.Time = old.Time.Add(-time.Hour)
	// As the JSON encoder wrote them, keys included.
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		raw, err := json.Marshal(old)
		if err != nil {
			return err
		}
		key := demandKey(old.Time, 1)
		if err := tx.Bucket(bucketDemand).Put(key, raw); err != nil {
			return err
		}
		return tx.Bucket(bucketDemandToRollup).Put(key, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendSearches([]SearchRecord{testRecords[0].rec, testRecords[1].rec}); err != nil {
		t.Fatal(err)
	}
	want := []SearchRecord{old, testRecords[0].rec, testRecords[1].rec}
	var got []SearchRecord
	if err := db.SearchesSince(time.Time{}, func(r SearchRecord) (bool, error) {
		got = append(got, r)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SearchesSince read %+v\nwant %+v", got, want)
	}
	got = nil
	if n, err := db.RollupSearches(10, func(recs []SearchRecord, _ Reports) error {
		got = recs
		return nil
	}, nil); err != nil || n != 3 {
		t.Fatalf("rolled up %d: %v", n, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RollupSearches handed %+v\nwant %+v", got, want)
	}
}

// FuzzSearchRecord: whatever a log record's bytes (a torn write, a bug),
// it decodes to an error or to a record that encodes and decodes back to
// itself, never a panic.
func FuzzSearchRecord(f *testing.F) {
	for _, tc := range testRecords {
		f.Add(appendSearchRecord(nil, &tc.rec))
		raw, err := json.Marshal(tc.rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{searchRecordV1})
	f.Add([]byte{searchRecordV1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec SearchRecord
		if decodeSearchRecord(raw, &rec) != nil {
			return
		}
		if rec.Time.Before(time.Unix(0, 0).AddDate(-290, 0, 0)) || rec.Time.After(time.Unix(0, 0).AddDate(290, 0, 0)) {
			return // a JSON time past what Unix nanoseconds hold
		}
		var again SearchRecord
		if err := decodeSearchRecord(appendSearchRecord(nil, &rec), &again); err != nil {
			t.Fatalf("%x decoded to %+v, which does not decode once encoded: %v", raw, rec, err)
		}
		// A JSON record's time may have kept its zone, and its empty lists
		// and maps be there rather than nil.
		rec.Time = rec.Time.UTC()
		if !reflect.DeepEqual(emptyAsNil(again), emptyAsNil(rec)) {
			t.Fatalf("%x decoded to %+v, encoded and decoded to %+v", raw, rec, again)
		}
	})
}

func emptyAsNil(rec SearchRecord) SearchRecord {
	if len(rec.Filter) == 0 {
		rec.Filter = nil
	}
	for k, v := range rec.Filter {
		if len(v) == 0 {
			rec.Filter[k] = nil
		}
	}
	if len(rec.Results) == 0 {
		rec.Results = nil
	}
	if len(rec.Upstreams) == 0 {
		rec.Upstreams = nil
	}
	return rec
}
