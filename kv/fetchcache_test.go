package kv_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

func TestFetchCache(t *testing.T) {
	db := kvtest.Open(t)
	const u = "https://a.test/openapi.json"
	if _, err := db.GetCachedFetch(u); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("empty cache: %v", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	in := kv.CachedFetch{URL: u, ETag: `"v1"`, LastModified: "Mon, 02 Jan 2026 02:04:05 GMT", SHA256: "ab", FetchedAt: at, Body: []byte("{\"a\":1}\n\x00binary")}
	if err := db.PutCachedFetch(in); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetCachedFetch(u)
	if err != nil || got.ETag != in.ETag || got.LastModified != in.LastModified || string(got.Body) != string(in.Body) || !got.FetchedAt.Equal(at) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if err := db.DeleteCachedFetch(u); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetCachedFetch(u); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := db.PutCachedFetch(kv.CachedFetch{URL: strings.Repeat("x", 5000)}); err == nil {
		t.Error("oversized URL accepted")
	}
}

func TestCrawlStatesAndEntrySources(t *testing.T) {
	db := kvtest.Open(t)
	now := time.Now()
	for _, d := range []string{"B.test", "a.test"} {
		if err := db.PutCrawlState(kv.CrawlState{Domain: d, Sources: []string{"https://" + d + "/x"}, CrawledAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := db.GetCrawlState("b.TEST")
	if err != nil || st.Domain != "b.test" || len(st.Sources) != 1 {
		t.Fatalf("got %+v, %v", st, err)
	}
	all, err := db.CrawlStates()
	if err != nil || len(all) != 2 || all[0].Domain != "a.test" {
		t.Fatalf("states %+v, %v", all, err)
	}
	if _, err := db.GetCrawlState("c.test"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("missing state: %v", err)
	}

	body := func(id string) json.RawMessage {
		return json.RawMessage(`{"identifier":"` + id + `","type":"t"}`)
	}
	for src, ids := range map[string][]string{
		"src-b": {"urn:air:x.test:a", "urn:air:x.test:b"},
		"src-a": {"urn:air:x.test:c"},
		"src":   {"urn:air:x.test:d"},
	} {
		var es []kv.Entry
		for _, id := range ids {
			es = append(es, kv.Entry{ID: id, Body: body(id)})
		}
		if _, err := db.ReplaceSource(src, es, now); err != nil {
			t.Fatal(err)
		}
	}
	srcs, err := db.EntrySources()
	if err != nil || strings.Join(srcs, ",") != "src,src-a,src-b" {
		t.Fatalf("sources %v, %v", srcs, err)
	}
}
