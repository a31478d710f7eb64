package kv_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/kv/kvtest"
)

func entry(id, typ, extra string) kv.Entry {
	body := fmt.Sprintf(`{"identifier":%q,"displayName":"x","type":%q,"url":"https://a.test/card"%s}`, id, typ, extra)
	return kv.Entry{ID: id, Body: json.RawMessage(body), Provenance: kv.Provenance{SHA256: "abc"}}
}

func kinds(cs []kv.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Kind+" "+c.ID)
	}
	sort.Strings(out)
	return out
}

func TestReplaceSource(t *testing.T) {
	const mcp, a2a = "application/mcp-server-card+json", "application/a2a-agent-card+json"
	a := "urn:air:a.test:tools:one"
	b := "urn:air:b.test:tools:two"
	c := "urn:air:c.test:three"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	type step struct {
		source  string
		entries []kv.Entry
		want    []string // sorted "kind id"
	}
	tests := []struct {
		name    string
		steps   []step
		wantIDs map[string]string // id -> source after all steps
		types   map[string]int
	}{
		{
			name: "first ingest adds everything",
			steps: []step{{"s1", []kv.Entry{entry(a, mcp, ""), entry(b, a2a, "")},
				[]string{"entry.added " + a, "entry.added " + b}}},
			wantIDs: map[string]string{a: "s1", b: "s1"},
			types:   map[string]int{mcp: 1, a2a: 1},
		},
		{
			name: "unchanged re-ingest emits nothing",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, "")}, []string{"entry.added " + a}},
				{"s1", []kv.Entry{entry(a, mcp, "")}, nil},
			},
			wantIDs: map[string]string{a: "s1"},
			types:   map[string]int{mcp: 1},
		},
		{
			name: "whitespace-only difference is unchanged",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, "")}, []string{"entry.added " + a}},
				{"s1", []kv.Entry{{ID: a, Body: json.RawMessage("  " + string(entry(a, mcp, "").Body) + "\n")}}, nil},
			},
			wantIDs: map[string]string{a: "s1"},
			types:   map[string]int{mcp: 1},
		},
		{
			name: "changed body, removed entry, new entry",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, ""), entry(b, mcp, "")}, []string{"entry.added " + a, "entry.added " + b}},
				{"s1", []kv.Entry{entry(a, a2a, ""), entry(c, mcp, "")},
					[]string{"entry.added " + c, "entry.changed " + a, "entry.removed " + b}},
			},
			wantIDs: map[string]string{a: "s1", c: "s1"},
			types:   map[string]int{mcp: 1, a2a: 1},
		},
		{
			name: "entry claimed by another source moves and survives old source re-ingest",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, ""), entry(b, mcp, "")}, []string{"entry.added " + a, "entry.added " + b}},
				{"s2", []kv.Entry{entry(a, mcp, "")}, nil},
				{"s1", []kv.Entry{entry(b, mcp, "")}, nil},
			},
			wantIDs: map[string]string{a: "s2", b: "s1"},
			types:   map[string]int{mcp: 2},
		},
		{
			name: "empty set removes everything of the source only",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, "")}, []string{"entry.added " + a}},
				{"s2", []kv.Entry{entry(b, mcp, "")}, []string{"entry.added " + b}},
				{"s1", nil, []string{"entry.removed " + a}},
			},
			wantIDs: map[string]string{b: "s2"},
			types:   map[string]int{mcp: 1},
		},
		{
			name: "duplicate identifiers in one set: last wins, one event",
			steps: []step{
				{"s1", []kv.Entry{entry(a, mcp, ""), entry(a, a2a, "")}, []string{"entry.added " + a}},
			},
			wantIDs: map[string]string{a: "s1"},
			types:   map[string]int{a2a: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := kvtest.Open(t)
			for i, st := range tc.steps {
				got, err := db.ReplaceSource(st.source, st.entries, t0.Add(time.Duration(i)*time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(kinds(got), st.want) {
					t.Fatalf("step %d: changes %v, want %v", i, kinds(got), st.want)
				}
				for _, c := range got {
					if c.Source != st.source || c.Seq == 0 || c.Publisher == "" {
						t.Fatalf("step %d: bad change %+v", i, c)
					}
				}
			}
			n, err := db.CountEntries()
			if err != nil || n != len(tc.wantIDs) {
				t.Fatalf("CountEntries = %d, %v; want %d", n, err, len(tc.wantIDs))
			}
			seen := map[string]string{}
			if err := db.ForEachEntry(func(e kv.Entry) error { seen[e.ID] = e.Source; return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(seen, tc.wantIDs) {
				t.Fatalf("entries %v, want %v", seen, tc.wantIDs)
			}
			types, err := db.CountEntriesByType()
			if err != nil || !reflect.DeepEqual(types, tc.types) {
				t.Fatalf("CountEntriesByType = %v, %v; want %v", types, err, tc.types)
			}
			for id, src := range tc.wantIDs {
				got, err := db.EntriesBySource(src)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, e := range got {
					found = found || e.ID == id
				}
				if !found {
					t.Fatalf("EntriesBySource(%q) lacks %s", src, id)
				}
			}
		})
	}
}

func TestReplaceSourceTimestamps(t *testing.T) {
	db := kvtest.Open(t)
	id := "urn:air:a.test:one"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mustReplace := func(e kv.Entry, at time.Time) {
		t.Helper()
		if _, err := db.ReplaceSource("s", []kv.Entry{e}, at); err != nil {
			t.Fatal(err)
		}
	}
	mustReplace(entry(id, "text/plain", ""), t0)
	e := entry(id, "text/plain", "")
	e.Provenance.SHA256 = "def"
	mustReplace(e, t0.Add(time.Hour))
	got, err := db.GetEntry(id)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
		t.Fatalf("unchanged body moved timestamps: %v %v", got.CreatedAt, got.UpdatedAt)
	}
	if got.Provenance.SHA256 != "def" {
		t.Fatalf("provenance not refreshed: %+v", got.Provenance)
	}
	mustReplace(entry(id, "text/plain", `,"description":"<b>new</b>"`), t0.Add(2*time.Hour))
	got, _ = db.GetEntry(id)
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("changed body: created %v updated %v", got.CreatedAt, got.UpdatedAt)
	}
	// HTML-looking text must survive byte for byte so the next compare is stable.
	cs, _ := db.ReplaceSource("s", []kv.Entry{entry(id, "text/plain", `,"description":"<b>new</b>"`)}, t0.Add(3*time.Hour))
	if len(cs) != 0 {
		t.Fatalf("re-ingest of HTML-bearing body produced %v", kinds(cs))
	}
}

func TestReplaceSourceRejectsBadInput(t *testing.T) {
	db := kvtest.Open(t)
	tests := []struct {
		name    string
		source  string
		entries []kv.Entry
	}{
		{"empty source", "", []kv.Entry{entry("urn:air:a.test:x", "t", "")}},
		{"empty id", "s", []kv.Entry{{Body: json.RawMessage(`{}`)}}},
		{"NUL in source", "s\x00x", []kv.Entry{entry("urn:air:a.test:x", "t", "")}},
		{"body not JSON", "s", []kv.Entry{{ID: "urn:air:a.test:x", Body: json.RawMessage(`{`)}}},
		{"empty body", "s", []kv.Entry{{ID: "urn:air:a.test:x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.ReplaceSource(tc.source, tc.entries, time.Now()); err == nil {
				t.Fatal("accepted")
			}
			if n, _ := db.CountEntries(); n != 0 {
				t.Fatalf("failed call stored %d entries", n)
			}
			if cs, _ := db.Changes(0, 0); len(cs) != 0 {
				t.Fatalf("failed call appended %d changes", len(cs))
			}
		})
	}
}

func TestGetEntries(t *testing.T) {
	db := kvtest.Open(t)
	ids := []string{"urn:air:a.test:one", "urn:air:a.test:two"}
	if _, err := db.ReplaceSource("s", []kv.Entry{entry(ids[0], "t", ""), entry(ids[1], "t", "")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetEntries([]string{ids[0], "urn:air:missing.test:x", ids[1]})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[ids[0]].ID != ids[0] || got[ids[1]].ID != ids[1] {
		t.Fatalf("GetEntries = %v", got)
	}
	if _, err := db.GetEntry("urn:air:missing.test:x"); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("GetEntry(missing) = %v, want ErrNotFound", err)
	}
}

func TestEntriesAndChangesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := "urn:air:a.test:tools:one"
	want := entry(id, "application/mcp-server-card+json", "")
	if _, err := db.ReplaceSource("file.json", []kv.Entry{want}, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.GetEntry(id)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != string(want.Body) || got.Source != "file.json" || got.Provenance.SHA256 != "abc" {
		t.Fatalf("after reopen: %+v", got)
	}
	cs, err := db.Changes(0, 10)
	if err != nil || len(cs) != 1 || cs[0].Kind != kv.ChangeAdded || cs[0].Publisher != "a.test" {
		t.Fatalf("changes after reopen: %+v, %v", cs, err)
	}
	// The sequence continues rather than restarting after a reopen.
	more, err := db.ReplaceSource("file.json", nil, time.Unix(200, 0))
	if err != nil || len(more) != 1 || more[0].Seq != cs[0].Seq+1 {
		t.Fatalf("after reopen, next change %+v, %v", more, err)
	}
}

func TestChangesPaging(t *testing.T) {
	db := kvtest.Open(t)
	var all []kv.Entry
	for i := range 7 {
		all = append(all, entry(fmt.Sprintf("urn:air:p%d.test:e", i), "t", ""))
	}
	if _, err := db.ReplaceSource("s", all, time.Now()); err != nil {
		t.Fatal(err)
	}
	extra, err := db.AppendChanges([]kv.Change{{Kind: "endpoint.down", ID: "urn:air:p1.test:e", Time: time.Now()}})
	if err != nil || len(extra) != 1 || extra[0].Seq != 8 || extra[0].Publisher != "p1.test" {
		t.Fatalf("AppendChanges = %+v, %v", extra, err)
	}
	var got []uint64
	after := uint64(0)
	for {
		page, err := db.Changes(after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 3 {
			t.Fatalf("page of %d > limit", len(page))
		}
		for _, c := range page {
			got = append(got, c.Seq)
		}
		after = page[len(page)-1].Seq
	}
	if want := []uint64{1, 2, 3, 4, 5, 6, 7, 8}; !reflect.DeepEqual(got, want) {
		t.Fatalf("seqs %v, want %v", got, want)
	}
	if last, _ := db.LastChangeSeq(); last != 8 {
		t.Fatalf("LastChangeSeq = %d", last)
	}
}

func BenchmarkReplaceSource(b *testing.B) {
	db := kvtest.Open(b)
	const n = 5000
	entries := make([]kv.Entry, n)
	for i := range entries {
		entries[i] = entry(fmt.Sprintf("urn:air:bench.test:ns:e%05d", i), "application/mcp-server-card+json",
			`,"description":"a benchmark entry with a realistic amount of descriptive text in it","tags":["a","b"]`)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Alternate bodies so every iteration rewrites everything.
		for j := range entries {
			entries[j].Body = json.RawMessage(fmt.Sprintf(`{"identifier":%q,"type":"t","v":%d}`, entries[j].ID, i))
		}
		if _, err := db.ReplaceSource("bench", entries, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
}

func TestGetEntryBodiesAgreesWithGetEntries(t *testing.T) {
	db := kvtest.Open(t)
	public := entry("urn:air:a.test:public", "t", `,"description":"says \"owner\" in words"`)
	private := entry("urn:air:b.test:private", "t", "")
	private.Owner = "b.test"
	if _, err := db.ReplaceSource("s", []kv.Entry{public, private}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ids := []string{public.ID, private.ID, "urn:air:missing.test:x"}
	full, err := db.GetEntries(ids)
	if err != nil {
		t.Fatal(err)
	}
	lean, err := db.GetEntryBodies(ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(lean) != 2 {
		t.Fatalf("GetEntryBodies = %d entries, want 2", len(lean))
	}
	for _, id := range ids[:2] {
		if !bytes.Equal(lean[id].Body, full[id].Body) || lean[id].Owner != full[id].Owner {
			t.Errorf("%s: lean %q/%q, full %q/%q", id, lean[id].Body, lean[id].Owner, full[id].Body, full[id].Owner)
		}
	}
	if lean[private.ID].Owner != "b.test" || lean[public.ID].Owner != "" {
		t.Fatalf("owners = %q, %q", lean[private.ID].Owner, lean[public.ID].Owner)
	}
}

func TestHasEntries(t *testing.T) {
	db := kvtest.Open(t)
	if any, err := db.HasEntries(); err != nil || any {
		t.Fatalf("empty store: HasEntries = %v, %v", any, err)
	}
	if _, err := db.ReplaceSource("s", []kv.Entry{entry("urn:air:a.test:one", "t", "")}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if any, err := db.HasEntries(); err != nil || !any {
		t.Fatalf("after a put: HasEntries = %v, %v", any, err)
	}
	if _, err := db.ReplaceSource("s", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if any, err := db.HasEntries(); err != nil || any {
		t.Fatalf("after the source emptied: HasEntries = %v, %v", any, err)
	}
}

// TestEntriesState: the version moves when an entry is added, changed or
// removed, public or private, and only then; the change feed's sequence
// moves with the public ones; both survive a reopen.
func TestEntriesState(t *testing.T) {
	dir := t.TempDir()
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	const mcp = "application/mcp-server-card+json"
	a, b := "urn:air:a.test:one", "urn:air:a.test:two"
	var lastV, lastSeq uint64
	step := func(name string, moves, feed bool, write func() error) {
		t.Helper()
		if err := write(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v, seq, err := db.EntriesState()
		if err != nil {
			t.Fatal(err)
		}
		if moved := v != lastV; moved != moves {
			t.Errorf("%s: version %d → %d, want moved=%v", name, lastV, v, moves)
		}
		if moved := seq != lastSeq; moved != feed {
			t.Errorf("%s: change sequence %d → %d, want moved=%v", name, lastSeq, seq, feed)
		}
		lastV, lastSeq = v, seq
	}
	now := time.Unix(100, 0)
	replace := func(es ...kv.Entry) func() error {
		return func() error { _, err := db.ReplaceSource("f.json", es, now); return err }
	}
	step("add", true, true, replace(entry(a, mcp, ""), entry(b, mcp, "")))
	step("the same again", false, false, replace(entry(a, mcp, ""), entry(b, mcp, "")))
	step("change one", true, true, replace(entry(a, mcp, `,"description":"new"`), entry(b, mcp, "")))
	step("remove one", true, true, replace(entry(a, mcp, `,"description":"new"`)))
	step("another source, nothing stored", false, false, func() error { _, err := db.ReplaceSource("g.json", nil, now); return err })
	priv := entry("urn:air:p.test:secret", mcp, "")
	step("private put", true, false, func() error { _, err := db.PutPrivateEntries("acct", []kv.Entry{priv}, now); return err })
	step("private delete of nothing", false, false, func() error { _, err := db.DeletePrivateEntries("acct", []string{"urn:air:p.test:none"}); return err })
	step("private delete", true, false, func() error { _, err := db.DeletePrivateEntries("acct", nil); return err })

	db.Close()
	if db, err = kv.Open(dir, kv.Options{}); err != nil {
		t.Fatal(err)
	}
	step("reopen", false, false, func() error { return nil })
	step("add after reopen", true, true, replace(entry(a, mcp, `,"description":"new"`), entry(b, mcp, "")))
}
